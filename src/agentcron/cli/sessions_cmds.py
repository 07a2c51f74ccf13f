"""`agentcron sessions`: chats and their transcripts; notes, and sending without the agent."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentcron.cli import render
from agentcron.cli.backends import Backend, PageAsk
from agentcron.cli.common import (
    AllOpt,
    ApiOpt,
    CursorOpt,
    DbOpt,
    JsonOpt,
    LimitOpt,
    TokenOpt,
    UrlOpt,
    backend_for,
    call,
    echo,
    fail,
    local_zone,
    more,
    out,
    paged,
    print_json,
)
from agentcron.service.paging import DEFAULT_PAGE, MAX_PAGE

app = typer.Typer(help="Sessions (chats) and their transcripts.", no_args_is_help=True)


@app.command("add")
def sessions_add(
    ctx: typer.Context,
    key: Annotated[str, typer.Argument(metavar="KEY", help="channel:chat_id, e.g. api:ops")],
    tz: Annotated[
        str | None,
        typer.Option(
            help="IANA zone of a new session (default UTC); another zone than an "
            "existing session's is refused."
        ),
    ] = None,
    title: Annotated[str | None, typer.Option(help="A title.")] = None,
    runner_url: Annotated[
        str | None,
        typer.Option(
            help="Your own agent's http(s) URL its turns run on (default: the server's runner)."
        ),
    ] = None,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a session (or show it if it exists). KEY is `channel:id`: a channel of letters,
    digits, `_-.`, then an id of 1-200 printable characters.
    """
    backend = backend_for(ctx, db, url, api, token, create=True)
    session = call(backend, lambda b: b.create_session(key, tz, title, runner_url))
    if as_json:
        print_json(session)
        return
    echo(f"session {session['key']} ({session['tz']})")


@app.command("note")
def sessions_note(
    ctx: typer.Context,
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
    answer = call(backend_for(ctx, db, url, api, token), lambda b: b.note(key, text))
    if as_json:
        print_json(answer)
        return
    echo(f"noted in {key} (entry {answer['message']['seq']}); no turn started")


@app.command("send")
def sessions_send(
    ctx: typer.Context,
    key: Annotated[str, typer.Argument(metavar="KEY", help="The session key.")],
    text: Annotated[str, typer.Argument(metavar="TEXT", help="What to send.")],
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Send a message out through the session's channel (Telegram, webhook) without the
    agent; needs the running server. A session no running channel serves (a web chat, an
    api: session) gets the entry in its transcript only.
    """

    async def sent(b: Backend) -> dict[str, Any]:
        return {"sent": await b.send_out(key, text), "channels": await b.channels()}

    both = call(backend_for(ctx, None, None, api, token), sent)
    answer = both["sent"]
    if as_json:
        print_json(answer)
        return
    channel = key.split(":", 1)[0]
    running = {c["name"] for c in both["channels"]["channels"] if c["running"]}
    entry = f"entry {answer['message']['seq']}"
    if channel in running:
        echo(
            f"sent to {key} ({entry}): the {channel} channel delivers it; "
            f"see agentcron deliveries list --session {key}"
        )
    elif channel == "websocket":
        echo(f"written to {key} ({entry}): a web chat shows it; no channel delivers it")
    else:
        echo(
            f"written to {key}'s transcript ({entry}) only: no running channel delivers "
            f"to {channel}: sessions"
        )


@app.command("list")
def sessions_list(
    ctx: typer.Context,
    search: Annotated[
        str | None, typer.Option(help="Only those whose title or key holds this (any case).")
    ] = None,
    limit: LimitOpt = DEFAULT_PAGE,
    cursor: CursorOpt = None,
    every: AllOpt = False,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Sessions, most recently active first, a page at a time."""
    sessions, next_cursor = paged(
        backend_for(ctx, db, url, api, token),
        lambda b, page: b.list_sessions(page),
        "sessions",
        PageAsk(limit=limit, cursor=cursor, search=search),
        every,
    )
    if as_json:
        print_json(sessions)
    else:
        out().print(render.sessions_table(sessions, local_zone(ctx)))
    more(next_cursor)


@app.command("show")
def sessions_show(
    ctx: typer.Context,
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
        found: list[dict[str, Any]] = []
        cursor = None
        while len(found) < last:  # the newest page, then older ones, read back
            page = await b.newest_messages(key, min(last - len(found), MAX_PAGE), cursor)
            found = page["messages"] + found
            cursor = page["next_cursor"]
            if cursor is None:
                break
        session["messages"] = found
        return session

    session = call(backend_for(ctx, db, url, api, token), both)
    if as_json:
        print_json(session)
        return
    render.session_detail(out(), session)


@app.command("quiet")
def sessions_quiet(
    ctx: typer.Context,
    key: Annotated[str, typer.Argument(metavar="KEY", help="The session key.")],
    hours: Annotated[
        str | None,
        typer.Argument(
            metavar="HH:MM-HH:MM",
            help="Its quiet hours in its zone, e.g. 22:00-07:00 (across midnight).",
        ),
    ] = None,
    off: Annotated[bool, typer.Option("--off", help="No quiet hours.")] = False,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Set a session's quiet hours (or --off). A fire due in them holds its delivery until
    they end, runs silently or waits, as its job's --quiet says.
    """
    if (hours is None) == (not off):
        raise fail("give the quiet hours (e.g. 22:00-07:00) or --off, not both", 2)
    backend = backend_for(ctx, db, url, api, token)
    session = call(backend, lambda b: b.set_quiet_hours(key, None if off else hours))
    if as_json:
        print_json(session)
        return
    quiet = session.get("quiet_hours")
    where = f"{session['key']} ({session['tz']})"
    echo(f"{where}: quiet {quiet}" if quiet else f"{where}: no quiet hours")


@app.command("rm")
def sessions_rm(
    ctx: typer.Context,
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
    answer = call(backend_for(ctx, db, url, api, token), lambda b: b.delete_session(key, confirm))
    if as_json:
        print_json(answer)
    if answer.get("deleted"):
        if not as_json:
            removed = answer.get("deleted_automations") or []
            echo(f"deleted {key}" + (f" and {len(removed)} automation(s)" if removed else ""))
        return
    names = ", ".join(f"“{a['name']}” ({a['id']})" for a in answer.get("automations", []))
    raise fail(
        f"{key} owns automations: {names}; nothing was deleted. Run again with "
        "--confirm to delete them and the session"
    )


_CAP_OPTIONS = ("usd_run", "usd_day", "usd_month", "tokens_run", "tokens_day", "tokens_month")


@app.command("budget")
def sessions_budget(
    ctx: typer.Context,
    key: Annotated[str, typer.Argument(metavar="KEY", help="The session key.")],
    usd_run: Annotated[float | None, typer.Option(help="US dollars per run.")] = None,
    usd_day: Annotated[float | None, typer.Option(help="US dollars per UTC day.")] = None,
    usd_month: Annotated[float | None, typer.Option(help="US dollars per UTC month.")] = None,
    tokens_run: Annotated[int | None, typer.Option(help="Tokens per run.")] = None,
    tokens_day: Annotated[int | None, typer.Option(help="Tokens per UTC day.")] = None,
    tokens_month: Annotated[int | None, typer.Option(help="Tokens per UTC month.")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Remove the session's budget.")] = False,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Set a session's budget across its jobs' fires (the caps given replace the old ones):
    a fire of any of its jobs that would pass it is skipped; no job is paused.
    """
    given = dict(zip(_CAP_OPTIONS, (usd_run, usd_day, usd_month, tokens_run, tokens_day,
                                    tokens_month), strict=True))  # fmt: skip
    caps = {k: v for k, v in given.items() if v is not None}
    if clear == bool(caps):
        raise fail("give the caps (--usd-day, --tokens-run, ...) or --clear, not both", 2)
    body = None if clear else caps
    spend = call(backend_for(ctx, db, url, api, token), lambda b: b.session_budget(key, body))
    if as_json:
        print_json(spend)
        return
    if clear:
        echo(f"session {key}: no budget")
        return
    render.session_spend(out(), spend)


@app.command("spend")
def sessions_spend(
    ctx: typer.Context,
    key: Annotated[str, typer.Argument(metavar="KEY", help="The session key.")],
    days: Annotated[int, typer.Option(help="UTC days back, today included.", min=1, max=366)] = 7,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A session's spend against its budget (its jobs' fires): today and this month (UTC),
    the estimate of one run, and their tokens and cost per day.
    """
    spend = call(backend_for(ctx, db, url, api, token), lambda b: b.session_spend(key, days))
    if as_json:
        print_json(spend)
        return
    render.session_spend(out(), spend)
