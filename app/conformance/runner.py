"""Run the registered checks against a service and report each one."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TextIO

import httpx

from app.conformance.kit import CHECKS, Check, Failed, Probe, new_run_namespace

CHECK_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Outcome:
    family: str
    name: str
    passed: bool
    reason: str
    seconds: float

    @property
    def path(self) -> str:
        """``family/name``, as a failure line and ``--known-failures`` name the check."""
        return f"{self.family}/{self.name}"


def selected(families: Sequence[str] = ()) -> list[Check]:
    """Every registered check, or those of the named families."""
    import app.conformance.checks  # noqa: F401  (registers them)

    return [c for c in CHECKS if not families or c.family in families]


async def run_checks(client: httpx.AsyncClient, checks: Iterable[Check]) -> list[Outcome]:
    """Each check in a namespace of its own below the run's; everything it stored is forgotten after."""
    run_namespace = new_run_namespace()
    outcomes = []
    for found in checks:
        probe = Probe(client, f"{run_namespace}/ws:{found.slug}")
        started = time.perf_counter()
        try:
            await found.run(probe)
            passed, reason = True, ""
        except Failed as failure:
            passed, reason = False, str(failure)
        except httpx.HTTPError as error:
            passed, reason = False, f"the service did not answer: {type(error).__name__}: {error}"
        except Exception as error:  # an answer the check could not read: a failure of that check, not of the run
            passed, reason = False, f"an answer not shaped as the contract says: {type(error).__name__}: {error}"
        finally:
            with contextlib.suppress(httpx.HTTPError):
                await probe.forget_everything()
        outcomes.append(Outcome(found.family, found.name, passed, reason, time.perf_counter() - started))
    return outcomes


def surprises(outcomes: Sequence[Outcome], known: Collection[str] = ()) -> list[str]:
    """What fails the run: a check that failed and is not ``known`` to (``family/name``), and ``stale``."""
    unexpected = sorted({o.path for o in outcomes if not o.passed} - set(known))
    return [f"{path} failed" for path in unexpected] + stale(outcomes, known)


def stale(outcomes: Sequence[Outcome], known: Collection[str]) -> list[str]:
    """Known failures that passed or name no check that ran: such a list fails the run, so it is kept true."""
    failed = {o.path for o in outcomes if not o.passed}
    ran = {o.path for o in outcomes}
    return [f"{path} is a known failure but passed" for path in sorted(set(known) & ran - failed)] + [
        f"{path} is a known failure but no such check ran" for path in sorted(set(known) - ran)
    ]


def print_lines(outcomes: Sequence[Outcome], out: TextIO, known: Collection[str] = ()) -> None:
    """One line per check, then ``N passed, N failed``."""
    for outcome in outcomes:
        mark = "pass" if outcome.passed else "FAIL"
        line = f"{mark}  {outcome.path}"
        print(line + (f": {outcome.reason}" if outcome.reason else ""), file=out)
    for line in stale(outcomes, known):
        print(f"stale  {line}", file=out)
    print(summary(outcomes, known), file=out)


def print_json(outcomes: Sequence[Outcome], out: TextIO, known: Collection[str] = ()) -> None:
    passed = sum(o.passed for o in outcomes)
    document = {
        "passed": passed,
        "failed": len(outcomes) - passed,
        "known_failures": sorted(known),
        "surprises": surprises(outcomes, known),
        "checks": [asdict(o) for o in outcomes],
    }
    json.dump(document, out, indent=2)
    print(file=out)


def summary(outcomes: Sequence[Outcome], known: Collection[str] = ()) -> str:
    passed = sum(o.passed for o in outcomes)
    line = f"{passed} passed, {len(outcomes) - passed} failed"
    expected = sum(not o.passed and o.path in known for o in outcomes)
    return line + (f" ({expected} known)" if known else "")


async def conform(url: str, key: str | None = None, families: Sequence[str] = ()) -> list[Outcome]:
    """Run the checks against the service at ``url``."""
    headers = {"authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=CHECK_TIMEOUT_S) as client:
        return await run_checks(client, selected(families))
