"""The ``engram serve`` process: uvicorn's server, which opens the engine first, and stop signals
taken through the event loop from the first line to the last.

A stop signal is never raised into the running code. Raised at whatever bytecode runs (as Python's
SIGINT handler does, or a handler raising KeyboardInterrupt), it can land inside the database
driver's protocol and leave it broken, a crash on the way out. So SIGTERM and SIGINT are only noted
until the event loop runs; then, while the engine opens (the embedded database starting, migrations,
the encoder loading), they cancel the opening, which unwinds through every ``finally``; once the
engine is open they ask uvicorn for its graceful shutdown (docs/operations.md#stopping).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import uvicorn

from app.engine.protocol import MemoryEngine

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopSignals:
    """SIGTERM and SIGINT noted, not raised: installed before anything that needs cleaning up starts,
    and again once the loop is done, so a stop requested then is not an interrupt half-way through."""

    def __init__(self) -> None:
        self.received: list[int] = []

    def install(self) -> None:
        for stop in STOP_SIGNALS:
            signal.signal(stop, self._note)

    def _note(self, signum: int, frame: Any) -> None:
        self.received.append(signum)


class EngramServer(uvicorn.Server):
    """``open_engine`` runs in uvicorn's own loop before it binds the port (a refused start is then one
    line, not a traceback); the app's lifespan takes the opened engine (``opened``). A stop requested
    before the port is bound sets ``stopped_while_starting``; a stop is a clean exit either way."""

    def __init__(
        self,
        config: uvicorn.Config,
        *,
        open_engine: Callable[[], Awaitable[MemoryEngine]],
        stops: StopSignals,
        on_listening: Callable[[], None],
    ) -> None:
        super().__init__(config)
        self._open_engine = open_engine
        self._stops = stops
        self._on_listening = on_listening
        self.opened: MemoryEngine | None = None
        self.stopped_while_starting = False

    async def serve(self, sockets: Any = None) -> None:
        loop = asyncio.get_running_loop()
        starting = asyncio.current_task()
        assert starting is not None

        def stop(signum: int) -> None:
            self.handle_exit(signum, None)  # uvicorn's: a graceful shutdown, forced by a second SIGINT
            if self.opened is None and not self.stopped_while_starting:
                starting.cancel()

        for signum in STOP_SIGNALS:
            loop.add_signal_handler(signum, stop, signum)
        try:
            if self._stops.received:  # before the loop ran
                self.stopped_while_starting = True
                return
            try:
                self.opened = await self._open_engine()
            except asyncio.CancelledError:
                self.stopped_while_starting = True
                return
            if self.should_exit:  # asked while the engine's last step ran: no port is bound
                self.stopped_while_starting = True
                await self.opened.close()
                return
            await super().serve(sockets)
        finally:
            for signum in STOP_SIGNALS:
                loop.remove_signal_handler(signum)
            self._stops.install()  # the embedded server's stop at exit is not cut short

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)  # exits the process when the port cannot be bound
        if not self.should_exit and self.started:
            self._on_listening()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # Uvicorn's own: signal.signal handlers, and the signal raised again after a graceful shutdown
        # so the process dies by it. Here the loop's handlers (serve) do it, and a stop completed
        # cleanly exits 0.
        yield
