"""`agentcron approvals`: gated tool calls waiting for a person; approve or deny them."""

from __future__ import annotations

import getpass
from typing import Annotated

import typer

from agentcron.cli import render
from agentcron.cli.common import (
    ApiOpt,
    DbOpt,
    JsonOpt,
    TokenOpt,
    UrlOpt,
    backend_for,
    call,
    echo,
    local_zone,
    out,
    print_json,
)
from agentcron.domain.approvals import Decision

app = typer.Typer(
    help="Approvals of gated tool calls: list them, approve or deny one.", no_args_is_help=True
)

IdArg = Annotated[str, typer.Argument(metavar="ID", help="The approval's id.")]
ByOpt = Annotated[
    str | None,
    typer.Option(
        "--by",
        help="Who decides (recorded; the model is told on a deny). Default: cli:<user name>.",
    ),
]


def default_by() -> str:
    """`cli:<os user>`, or `cli` when the user name cannot be told."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no such user in the password database, no $USER
        return "cli"


@app.command("list")
def approvals_list(
    ctx: typer.Context,
    session: Annotated[str | None, typer.Option(help="One session's (default: all).")] = None,
    all: Annotated[
        bool, typer.Option("--all", help="Also the decided ones (the newest 500).")
    ] = False,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Pending approvals, oldest first (with --all also the decided and expired ones)."""
    data = call(backend_for(ctx, db, url, api, token), lambda b: b.list_approvals(session, all))
    if as_json:
        print_json(data["approvals"])
        return
    out().print(render.approvals_table(data["approvals"], local_zone(ctx)))


@app.command("show")
def approvals_show(
    ctx: typer.Context,
    approval_id: IdArg,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One approval: its tool call, its state, who decided and when."""
    approval = call(backend_for(ctx, db, url, api, token), lambda b: b.get_approval(approval_id))
    if as_json:
        print_json(approval)
        return
    render.approval_detail(out(), approval, local_zone(ctx))


def _decide(
    ctx: typer.Context,
    decision: Decision,
    approval_id: str,
    by: str | None,
    db: DbOpt,
    url: UrlOpt,
    api: ApiOpt,
    token: TokenOpt,
    as_json: bool,
) -> None:
    who = default_by() if by is None else by
    backend = backend_for(ctx, db, url, api, token)
    approval = call(backend, lambda b: b.decide_approval(approval_id, decision, who))
    if as_json:
        print_json(approval)
        return
    where = f" in {approval['session_key']}" if approval["session_key"] else ""
    echo(f"{approval['state']}: the {approval['tool']} call{where}, by {approval['decided_by']}")


@app.command("approve")
def approvals_approve(
    ctx: typer.Context,
    approval_id: IdArg,
    by: ByOpt = None,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Approve a pending call: its tool runs and its turn goes on.

    With --db on a database a running server uses, the decision lands on the durable record
    (compare-and-set: only while it is pending) and is announced: the waiting turn in the
    server goes on at once.
    """
    _decide(ctx, "approve", approval_id, by, db, url, api, token, as_json)


@app.command("deny")
def approvals_deny(
    ctx: typer.Context,
    approval_id: IdArg,
    by: ByOpt = None,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Deny a pending call: the model is told "Denied by <by>." and its turn goes on.

    With --db on a database a running server uses, the decision lands on the durable record
    (compare-and-set: only while it is pending) and is announced: the waiting turn in the
    server goes on at once.
    """
    _decide(ctx, "deny", approval_id, by, db, url, api, token, as_json)
