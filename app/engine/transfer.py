"""Export and import over any engine: the NDJSON stream out, and lines back in by batches.

An import is idempotent (an item's id is its fingerprint, so a line already held is a replay)
and so resumable: after a kill, running it again writes what was not written and replays the
rest without embedding it again. A line that cannot be imported is reported with its number and
typed error, and the others go on; each batch is one transaction, so no item is half-written.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass, field

from app.contract.errors import EngramError, Unavailable
from app.contract.limits import DEFAULT_LIMITS, MAX_STORE_MANY, Limits
from app.contract.requests import StoreReceipt
from app.contract.transfer import (
    Checksum,
    ExportRequest,
    GivenVector,
    ImportedLine,
    ImportReport,
    RejectedLine,
    TrailerLine,
    item_line,
    read_line,
)
from app.engine.protocol import MemoryEngine

EXPORT_PAGE = 500
"""Items read per statement while exporting."""


async def export_lines(engine: MemoryEngine, request: ExportRequest) -> AsyncIterator[bytes]:
    """Every item the request admits as NDJSON lines, in the order stored, then the trailer.

    Items stored once the export began are left to a later export (the first page fixes the
    ceiling), so the dump is one consistent list however long it takes to read.
    """
    checksum = Checksum()
    after, ceiling = 0, None
    while True:
        page = await engine.export_page(request, after=after, ceiling=ceiling, count=EXPORT_PAGE)
        ceiling = page.ceiling
        for row in page.rows:
            line = item_line(row.id, row.item, row.vector, page.embedder if row.vector is not None else None)
            checksum.add(line)
            yield line
        if len(page.rows) < EXPORT_PAGE:
            break
        after = page.rows[-1].seq
    yield checksum.trailer()


@dataclass
class _Batch:
    numbers: list[int] = field(default_factory=list)
    lines: list[ImportedLine] = field(default_factory=list)


async def import_lines(
    engine: MemoryEngine,
    lines: AsyncIterable[bytes],
    *,
    limits: Limits = DEFAULT_LIMITS,
    batch_size: int = MAX_STORE_MANY,
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    """Import NDJSON ``lines`` (numbered from 1); vectors the engine's own embedder made are kept as they are.

    Only ``unavailable`` (the database or the embedder away) stops it: run it again to go on.
    """
    stored = replayed = 0
    rejected: list[RejectedLine] = []
    checksum = Checksum()
    trailer: TrailerLine | None = None
    batch = _Batch()

    async def flush() -> None:
        nonlocal stored, replayed
        if not batch.lines:
            return
        receipts = await _write(engine, batch, rejected)
        stored += sum(not r.replayed for r in receipts)
        replayed += sum(r.replayed for r in receipts)
        batch.numbers.clear()
        batch.lines.clear()

    number = 0
    async for raw in lines:
        number += 1
        if progress is not None:
            progress(len(raw))
        if not raw.strip():
            continue
        try:
            read = read_line(raw, limits)
        except EngramError as error:
            rejected.append(RejectedLine(line=number, code=error.code, message=error.message))
            continue
        if isinstance(read, TrailerLine):
            trailer = read
            continue
        checksum.add(raw if raw.endswith(b"\n") else raw + b"\n")
        batch.numbers.append(number)
        batch.lines.append(read)
        if len(batch.lines) >= batch_size:
            await flush()
    await flush()
    if trailer is None:
        state = "missing"
    elif trailer.count == checksum.count and trailer.sha256 == checksum.sha256:
        state = "verified"
    else:
        state = "mismatch"
    rejected.sort(key=lambda r: r.line)
    return ImportReport(stored=stored, replayed=replayed, rejected=rejected, trailer=state)


async def _write(engine: MemoryEngine, batch: _Batch, rejected: list[RejectedLine]) -> list[StoreReceipt]:
    """The batch in one call; when the engine refuses it, each line alone, so one bad line is reported
    and the others are written."""
    vectors: list[GivenVector | None] = [
        (line.embedder, line.vector) if line.vector is not None and line.embedder is not None else None
        for line in batch.lines
    ]
    items = [line.item for line in batch.lines]
    try:
        return await engine.import_items(items, vectors)
    except Unavailable:
        raise
    except EngramError:
        pass
    receipts = []
    for number, item, vector in zip(batch.numbers, items, vectors, strict=True):
        try:
            receipts += await engine.import_items([item], [vector])
        except Unavailable:
            raise
        except EngramError as error:
            rejected.append(RejectedLine(line=number, code=error.code, message=error.message))
    return receipts
