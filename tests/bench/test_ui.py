"""The explorer's page-load harness (python -m bench.ui) end to end on a small store: it stores the
corpus once, reuses it, and reads the page's marks and calls. No figure is judged."""

from __future__ import annotations

import re

import pytest

from bench.ui import main
from tests.support.scratch import scratch


@pytest.mark.slow
def test_the_page_load_harness_measures_and_reuses_its_store(capsys: pytest.CaptureFixture[str]) -> None:
    with scratch("bench-ui") as work:
        assert main(["--n", "200", "--loads", "2", "--work", str(work)]) == 0
        first = capsys.readouterr().out
        assert main(["--n", "200", "--loads", "1", "--work", str(work)]) == 0
        again = capsys.readouterr().out

    assert "stored 200 new items" in first
    for out, loads in ((first, 2), (again, 1)):
        assert f"200 items, {loads} loads, load average " in out
        visible = re.search(r"results visible, ms: ([\d, ]+) \(median (\d+)\)", out)
        drawn = re.search(r"everything drawn, ms: ([\d, ]+) \(median (\d+)\)", out)
        assert visible and drawn, out
        assert len(visible[1].split(", ")) == loads and int(visible[2]) > 0
        assert int(drawn[2]) >= int(visible[2])
        calls = re.findall(r"^\[bench\.ui [\d:]+\]   (list|explore \w+) ", out, re.M)
        assert sorted(calls[:5]) == ["explore kind", "explore namespace", "explore source", "explore tag", "list"]
        # Then the histogram: the years, and a finer unit a call (200 items span a day: down to hours).
        assert calls[5:] == [f"explore observed_{unit}" for unit in ("year", "month", "day", "hour")], out
    assert "drawing" not in again and "stored" not in again, "the store is reused"
