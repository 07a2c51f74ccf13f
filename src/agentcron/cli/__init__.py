"""The `agentcron` command line (typer + rich): an edge that translates, holding no logic."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from agentcron import __version__
from agentcron.cli import render
from agentcron.cli.backends import ApiBackend, Backend, CliError, DbBackend
from agentcron.config import DB_ENV, ConfigError, data_dir, default_db_path
from agentcron.config_file import (
    CONFIG_ENV,
    apply_config,
    config_path,
    dump_example,
    effective,
    effective_json,
)
from agentcron.schedule import ScheduleError, describe, parse_when, spec_to_json, upcoming
from agentcron.schedule.zones import get_zone
from agentcron.store.models import Catchup, JobKind, Overlap

EXAMPLE_PHRASES = (
    "in 30m",
    "tomorrow at 09:00",
    "every weekday at 9 Europe/Berlin",
    "every 2h",
    "0 30 2 * * *",
    "30 2 * * * Europe/Berlin",
    "0 * * * * Australia/Lord_Howe",
)
URL_ENV = "AGENTCRON_URL"
DEFAULT_API = "http://127.0.0.1:8321"
_T = TypeVar("_T")

app = typer.Typer(
    help="agentcron: cron for AI agent sessions.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)
jobs_app = typer.Typer(
    help="Automations: add, list, show, pause, resume, remove.", no_args_is_help=True
)
runs_app = typer.Typer(help="Run records of fires.", no_args_is_help=True)
sessions_app = typer.Typer(help="Sessions (chats) and their transcripts.", no_args_is_help=True)
db_app = typer.Typer(help="The database: create, upgrade, inspect.", no_args_is_help=True)
config_app = typer.Typer(help="The configuration: what is in effect, an example file.",
                         no_args_is_help=True)  # fmt: skip
app.add_typer(jobs_app, name="jobs")
app.add_typer(runs_app, name="runs")
app.add_typer(sessions_app, name="sessions")
app.add_typer(db_app, name="db")
app.add_typer(config_app, name="config")

TABLE_WIDTH = 160  # when stdout is not a terminal (pipes, tests): wide, fixed, no surprises
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def _out() -> Console:
    """Tables and detail views: the terminal's width, or TABLE_WIDTH when not a terminal."""
    tty = sys.stdout.isatty()
    return Console(width=None if tty else TABLE_WIDTH, highlight=False, emoji=False)


def echo(text: str = "", nl: bool = True) -> None:
    """Plain lines, exactly as written (what `demo`, `serve`, `next` print)."""
    typer.echo(text, nl=nl)


def _fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"error: {message}", markup=False)
    return typer.Exit(code)


def _run(coro: Awaitable[_T]) -> _T:
    try:
        return asyncio.run(coro)  # type: ignore[arg-type]
    except CliError as exc:
        raise _fail(str(exc)) from None


# -- options shared by the resource commands -------------------------------------------------

_DIRECT = (
    "instead of a server's API (a server running on it sees changes made this way at its next "
    "wake-up, within 5 minutes)"
)
DbOpt = Annotated[
    Path | None,
    typer.Option("--db", help=f"Use this SQLite file directly, {_DIRECT}.", dir_okay=False),
]
UrlOpt = Annotated[
    str | None,
    typer.Option("--url", help=f"Use this database URL (postgresql://...) directly, {_DIRECT}."),
]
ApiOpt = Annotated[
    str | None,
    typer.Option("--api", help=f"The server's URL (default: ${URL_ENV}, else {DEFAULT_API})."),
]
TokenOpt = Annotated[
    str | None,
    typer.Option("--token", help="API token (default: $AGENTCRON_TOKEN, else the token file)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the JSON record(s) instead.")]


def _backend(
    db: Path | None, url: str | None, api: str | None, token: str | None, *, create: bool = False
) -> Backend:
    """The database when --db/--url is given, else the API of a running server. Only `create`
    commands make a new SQLite file; the others say there is none (a typo, usually).
    """
    if db is not None or url is not None:
        if db is not None and url is not None:
            raise _fail("give --db or --url, not both", 2)
        return DbBackend(db, url, create=create)
    from agentcron.tokens import read_token

    return ApiBackend(
        api or os.environ.get(URL_ENV) or DEFAULT_API, token or read_token(data_dir())
    )


def _call(
    backend: Backend, action: Callable[[Backend], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with backend:
            return await action(backend)

    return _run(go())


def _print_json(data: Any) -> None:
    echo(json.dumps(data, indent=2, ensure_ascii=False))


# -- schedule helpers (no server needed) ----------------------------------------------------


def _show(text: str, now: datetime, tz: str, count: int) -> None:
    spec = parse_when(text, now, tz)
    zone = get_zone(spec.tz)
    echo(f"{text!r}: {describe(spec)}")
    echo(f"  spec: {spec_to_json(spec)}")
    for fire in upcoming(spec, now, count):
        echo(f"  -> {fire.isoformat()}  ({fire.astimezone(zone):%a %Y-%m-%d %H:%M %Z})")


def _version(value: bool) -> None:
    if value:
        echo(f"agentcron, version {__version__}")
        raise typer.Exit()


@app.callback()
def main_callback(
    ctx: typer.Context,
    version: Annotated[
        bool | None,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version."),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help=f"A TOML configuration file (default: ${CONFIG_ENV}); flags and the "
            "environment win over it.",
            dir_okay=False,
        ),
    ] = None,
) -> None:
    """agentcron: cron for AI agent sessions."""
    # Before any command reads a setting: the file fills in what the environment leaves unset.
    try:
        path = config_path(config)
        applied = apply_config(path, os.environ)
    except ConfigError as exc:
        raise _fail(str(exc), 2) from None
    ctx.obj = {"config": path, "from_file": applied}


@config_app.command("show")
def config_show(
    ctx: typer.Context,
    as_json: JsonOpt = False,
) -> None:
    """Print the effective configuration: each setting, its value and where it came from
    (env, file or default); secrets masked.
    """
    obj = ctx.obj or {}
    rows = effective(os.environ, obj.get("from_file", set()))
    if as_json:
        _print_json({"config": None if obj.get("config") is None else str(obj["config"]),
                     "settings": effective_json(rows)})  # fmt: skip
        return
    path = obj.get("config")
    echo(f"configuration file: {path if path is not None else f'none (--config or ${CONFIG_ENV})'}")
    width = max(len(r.setting.key) for r in rows)
    for row in rows:
        echo(f"{row.setting.key:<{width}}  {row.source:<7}  {row.value}")


@config_app.command("example")
def config_example() -> None:
    """Print an example configuration file with every setting, commented out."""
    echo(dump_example(), nl=False)


@app.command("next")
def next_cmd(
    when: Annotated[
        list[str],
        typer.Argument(metavar="WHEN", help='A phrase: "every weekday at 9", cron, ...'),
    ],
    tz: Annotated[str, typer.Option(help="IANA zone for wall-clock phrases.")] = "UTC",
    count: Annotated[int, typer.Option("-n", help="How many fire times to show.")] = 5,
) -> None:
    """Show the spec and next fire times of a WHEN phrase."""
    try:
        _show(" ".join(when), datetime.now(UTC), tz, count)
    except ScheduleError as exc:
        raise _fail(str(exc), 2) from exc


@app.command()
def examples(
    tz: Annotated[str, typer.Option(help="IANA zone for wall-clock phrases.")] = "UTC",
    count: Annotated[int, typer.Option("-n", help="Fire times per example.")] = 3,
) -> None:
    """Print the next fire times of a few example schedules, including a rejected one."""
    now = datetime.now(UTC)
    echo(f"now: {now.isoformat()}\n")
    for phrase in EXAMPLE_PHRASES:
        try:
            _show(phrase, now, tz, count)
        except ScheduleError as exc:
            echo(f"{phrase!r}: rejected: {exc}")
        echo("")


@app.command()
def demo(
    sentence: Annotated[
        str, typer.Option("--say", help="What you tell the offline agent.")
    ] = "remind me in 10 seconds to stretch",
    db: Annotated[
        Path | None,
        typer.Option(help=f"SQLite file (default: ${DB_ENV}, else the data dir).", dir_okay=False),
    ] = None,
    wps: Annotated[
        float | None,
        typer.Option(help="Words per second of the offline model's replies (0 = no delay)."),
    ] = None,
) -> None:
    """Chat with the offline agent in the terminal: it schedules a reminder that comes back."""
    from agentcron.demo import run_demo

    code = asyncio.run(run_demo(db or default_db_path(), sentence, echo, wps))
    if code:
        raise typer.Exit(code)


@app.command()
def serve(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option(help="Address to bind (local only by default).", envvar="AGENTCRON_HOST")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.", envvar="AGENTCRON_PORT")] = 8321,
    db: Annotated[
        Path | None,
        typer.Option(help=f"SQLite file (default: ${DB_ENV}, else the data dir).", dir_okay=False),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(help="A database URL (postgresql://...).", envvar="AGENTCRON_DATABASE_URL"),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Model, e.g. openai:gpt-4.1-mini (default: $AGENTCRON_MODEL, offline)."),
    ] = None,
    unified: Annotated[
        bool | None,
        typer.Option("--unified/--no-unified", help="Web-chat automations share one session."),
    ] = None,
    demo: Annotated[
        bool, typer.Option(help="Start a chat where the agent schedules a reminder.")
    ] = False,
    log_level: Annotated[
        str, typer.Option(help="uvicorn log level.", envvar="AGENTCRON_LOG_LEVEL")
    ] = "info",
) -> None:
    """Run the engine, the agent, the channels, the API, the live stream and the web UI."""
    from agentcron.server.serve import ServeOptions, run

    if db is not None and url is not None:
        source = ctx.get_parameter_source("url")  # typer's own click: compare by name
        if source is None or source.name != "COMMANDLINE":
            url = None  # the --db flag wins over a database URL from the environment or file
        else:
            raise _fail("give --db or --url, not both", 2)
    options = ServeOptions(host=host, port=port, db=db, url=url, model=model,
                           unified_session=unified, demo=demo, log_level=log_level)  # fmt: skip
    try:
        run(options, echo)
    except ConfigError as exc:  # a setting from the environment or the file is not usable
        raise _fail(str(exc), 2) from None


@app.command()
def token(
    hook: Annotated[bool, typer.Option("--hook", help="The inbound hook's token.")] = False,
) -> None:
    """Print the API token (created on first use; the server prints it at start-up too)."""
    from agentcron.tokens import (
        HOOK_TOKEN_ENV,
        HOOK_TOKEN_FILE,
        TOKEN_ENV,
        TOKEN_FILE,
        load_or_create_token,
    )

    name, env = (HOOK_TOKEN_FILE, HOOK_TOKEN_ENV) if hook else (TOKEN_FILE, TOKEN_ENV)
    echo(load_or_create_token(data_dir(), name, env))


# -- db ---------------------------------------------------------------------------------------


async def _db_status(path: Path) -> tuple[str | None, int, int]:
    from sqlalchemy.exc import SQLAlchemyError

    from agentcron.store.sql import sqlite_url, upgrade_and_count

    try:
        return await upgrade_and_count(sqlite_url(path))
    except (SQLAlchemyError, OSError) as exc:
        inner = getattr(exc, "orig", None) or exc
        raise CliError(f"cannot open the database {path}: {inner}") from exc


@db_app.command("upgrade")
def db_upgrade(
    db: Annotated[
        Path | None,
        typer.Option(help=f"SQLite file (default: ${DB_ENV}, else the data dir).", dir_okay=False),
    ] = None,
) -> None:
    """Create the database, or upgrade its schema to the newest revision."""
    path = db or default_db_path()
    revision, jobs, runs = _run(_db_status(path))
    echo(f"{path}: schema at revision {revision} ({jobs} jobs, {runs} runs)")


# -- jobs -------------------------------------------------------------------------------------


@jobs_app.command("add")
def jobs_add(
    session: Annotated[str, typer.Option(help="The session it belongs to, e.g. websocket:abc.")],
    name: Annotated[str, typer.Option(help="A short name.")],
    message: Annotated[str, typer.Option(help="What the agent should do when it fires.")],
    when: Annotated[str, typer.Option(help='"in 30m", "every weekday at 9", "0 9 * * 1-5", ...')],
    tz: Annotated[str | None, typer.Option(help="IANA zone (default: the session's).")] = None,
    overlap: Annotated[
        Overlap | None, typer.Option(help="A fire while the previous one waits or runs.")
    ] = None,
    catchup: Annotated[
        Catchup | None, typer.Option(help="Fires that came due while no engine ran.")
    ] = None,
    max_runs: Annotated[int | None, typer.Option(help="End after this many runs.", min=1)] = None,
    idempotency_key: Annotated[str | None, typer.Option(help="Create at most once.")] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Its turns' model, e.g. \"openai:gpt-4o\" (default: the agent's)."),
    ] = None,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Add an automation to a session."""
    body: dict[str, Any] = {"session_key": session, "name": name, "message": message,
                            "when": when}  # fmt: skip
    optional = {"tz": tz, "overlap": overlap, "catchup": catchup, "max_runs": max_runs,
                "idempotency_key": idempotency_key, "model": model}  # fmt: skip
    body.update({k: v for k, v in optional.items() if v is not None})
    job = _call(_backend(db, url, api, token), lambda b: b.add_job(body))
    if as_json:
        _print_json(job)
        return
    echo(f"added {job['id']}: “{job['name']}”, {job['schedule']}; next run "
         f"{render.when(job['next_run_at'], job['tz'])}")  # fmt: skip


@jobs_app.command("list")
def jobs_list(
    session: Annotated[
        str | None, typer.Option(help="Only this session's (what it shows).")
    ] = None,
    kind: Annotated[JobKind | None, typer.Option(help="Only jobs of this kind.")] = None,
    enabled: Annotated[
        bool | None, typer.Option("--enabled/--disabled", help="Only enabled / paused ones.")
    ] = None,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List automations (and recalls and system jobs)."""
    kind_value = None if kind is None else kind.value
    data = _call(_backend(db, url, api, token), lambda b: b.list_jobs(session, kind_value, enabled))
    if as_json:
        _print_json(data["jobs"])
        return
    _out().print(render.jobs_table(data["jobs"]))


@jobs_app.command("show")
def jobs_show(
    job_id: Annotated[str, typer.Argument(metavar="ID", help="The job's id.")],
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One automation: its schedule, the next 5 fires, the last runs and what it cost."""
    job = _call(_backend(db, url, api, token), lambda b: b.get_job(job_id))
    if as_json:
        _print_json(job)
        return
    render.job_detail(_out(), job)


def _job_action(job_id: str, action: str, backend: Backend, as_json: bool) -> None:
    result = _call(backend, lambda b: b.job_action(job_id, action))
    if as_json:
        _print_json(result)
    elif action == "rm":
        echo(f"removed {result['deleted']}")
    else:
        state = "enabled" if result["enabled"] else "paused"
        nxt = render.when(result["next_run_at"], result["tz"])
        echo(f"{result['id']} “{result['name']}”: {state}; next run {nxt}")


@jobs_app.command("pause")
def jobs_pause(
    job_id: Annotated[str, typer.Argument(metavar="ID", help="The job's id.")],
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Pause an automation (no fires until it is resumed)."""
    _job_action(job_id, "pause", _backend(db, url, api, token), as_json)


@jobs_app.command("resume")
def jobs_resume(
    job_id: Annotated[str, typer.Argument(metavar="ID", help="The job's id.")],
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Resume an automation from now on."""
    _job_action(job_id, "resume", _backend(db, url, api, token), as_json)


@jobs_app.command("rm")
def jobs_rm(
    job_id: Annotated[str, typer.Argument(metavar="ID", help="The job's id.")],
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Remove an automation (its run records stay until retention)."""
    _job_action(job_id, "rm", _backend(db, url, api, token), as_json)


# -- runs -------------------------------------------------------------------------------------


@runs_app.command("list")
def runs_list(
    job: Annotated[str | None, typer.Option(help="A job's runs.")] = None,
    session: Annotated[str | None, typer.Option(help="A session's runs.")] = None,
    limit: Annotated[
        int, typer.Option(help="At most this many, newest first.", min=1, max=1000)
    ] = 20,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run records, newest first."""
    if (job is None) == (session is None):
        raise _fail("give exactly one of --job ID or --session KEY", 2)
    data = _call(_backend(db, url, api, token), lambda b: b.list_runs(job, session, limit))
    if as_json:
        _print_json(data["runs"])
        return
    _out().print(render.runs_table(data["runs"]))


@runs_app.command("show")
def runs_show(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run's id.")],
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The full run record: states, rendered prompt, output, error details, usage."""
    run = _call(_backend(db, url, api, token), lambda b: b.get_run(run_id))
    if as_json:
        _print_json(run)
        return
    render.run_detail(_out(), run)


# -- sessions ---------------------------------------------------------------------------------


@sessions_app.command("add")
def sessions_add(
    key: Annotated[str, typer.Argument(metavar="KEY", help="channel:chat_id, e.g. api:ops")],
    tz: Annotated[str, typer.Option(help="IANA zone of the session.")] = "UTC",
    title: Annotated[str | None, typer.Option(help="A title.")] = None,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a session (or show it if it exists)."""
    backend = _backend(db, url, api, token, create=True)
    session = _call(backend, lambda b: b.create_session(key, tz, title))
    if as_json:
        _print_json(session)
        return
    echo(f"session {session['key']} ({session['tz']})")


@sessions_app.command("note")
def sessions_note(
    key: Annotated[str, typer.Argument(metavar="KEY", help="The session key.")],
    text: Annotated[str, typer.Argument(metavar="TEXT", help="The note.")],
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Add a note to a session's transcript without starting a turn (the agent sees it next
    time).
    """
    answer = _call(_backend(db, url, api, token), lambda b: b.note(key, text))
    if as_json:
        _print_json(answer)
        return
    echo(f"noted in {key} (entry {answer['message']['seq']}); no turn started")


@sessions_app.command("send")
def sessions_send(
    key: Annotated[str, typer.Argument(metavar="KEY", help="The session key.")],
    text: Annotated[str, typer.Argument(metavar="TEXT", help="What to send.")],
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Send a message out through the session's channel (Telegram, webhook) without the
    agent; needs the running server.
    """
    answer = _call(_backend(None, None, api, token), lambda b: b.send_out(key, text))
    if as_json:
        _print_json(answer)
        return
    echo(f"sent to {key} (entry {answer['message']['seq']}); its delivery shows in "
         f"GET /api/deliveries?session_key={key}")  # fmt: skip


@sessions_app.command("list")
def sessions_list(
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Sessions, most recently active first."""
    data = _call(_backend(db, url, api, token), lambda b: b.list_sessions())
    if as_json:
        _print_json(data["sessions"])
        return
    _out().print(render.sessions_table(data["sessions"]))


@sessions_app.command("show")
def sessions_show(
    key: Annotated[str, typer.Argument(metavar="KEY", help="The session key.")],
    last: Annotated[int, typer.Option(help="How many transcript entries to show.", min=0)] = 10,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A session: its automations, recall, usage and last transcript entries."""

    async def both(b: Backend) -> dict[str, Any]:
        session = await b.get_session(key)
        session["messages"] = (await b.messages(key))["messages"][-last:] if last else []
        return session

    session = _call(_backend(db, url, api, token), both)
    if as_json:
        _print_json(session)
        return
    render.session_detail(_out(), session)


@sessions_app.command("rm")
def sessions_rm(
    key: Annotated[str, typer.Argument(metavar="KEY", help="The session key.")],
    confirm: Annotated[
        bool, typer.Option("--confirm", help="Also delete the automations bound to it.")
    ] = False,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete a session. With bound automations it is two-step: add --confirm to delete them."""
    answer = _call(_backend(db, url, api, token), lambda b: b.delete_session(key, confirm))
    if as_json:
        _print_json(answer)
    if answer.get("deleted"):
        if not as_json:
            removed = answer.get("deleted_automations") or []
            echo(f"deleted {key}" + (f" and {len(removed)} automation(s)" if removed else ""))
        return
    names = ", ".join(f"“{a['name']}” ({a['id']})" for a in answer.get("automations", []))
    raise _fail(f"{key} owns automations: {names}; nothing was deleted. Run again with "
                "--confirm to delete them and the session")  # fmt: skip


def main() -> None:
    app()
