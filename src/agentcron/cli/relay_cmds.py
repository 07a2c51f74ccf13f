"""`agentcron relay ...`: the wake service managed agents sleep behind (README "The relay")."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentcron.cli.common import DB_HELP, DB_METAVAR, database_flag, echo, fail, settings
from agentcron.config import ConfigError
from agentcron.config.database import db_url
from agentcron.config.relay import (
    ALLOW_PRIVATE_ENV,
    DEFAULT_RELAY_HOST,
    DEFAULT_RELAY_PORT,
    RELAY_DATABASE_URL_ENV,
    RELAY_HOST_ENV,
    RELAY_PORT_ENV,
)

app = typer.Typer(help="The relay: arms fires for sleeping agents and wakes them with a webhook.")

Home = Annotated[
    Path | None,
    typer.Option(
        help="The relay's directory (default: $AGENTCRON_RELAY_HOME, else relay/ in "
        "the data directory).",
        file_okay=False,
    ),
]


@app.command()
def serve(
    ctx: typer.Context,
    host: Annotated[
        str | None,
        typer.Option(
            help=f"Address to bind (default: ${RELAY_HOST_ENV}, else {DEFAULT_RELAY_HOST})."
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(help=f"Port (default: ${RELAY_PORT_ENV}, else {DEFAULT_RELAY_PORT})."),
    ] = None,
    home: Home = None,
    db: Annotated[
        str | None,
        typer.Option(
            metavar=DB_METAVAR,
            help=f"{DB_HELP} for the arms (default: ${RELAY_DATABASE_URL_ENV}, else "
            "$AGENTCRON_RELAY_DB, else relay.db in the relay's directory).",
        ),
    ] = None,
    url: Annotated[str | None, typer.Option(help="Deprecated: --db takes URLs too.")] = None,
    issuer: Annotated[
        str | None, typer.Option(help="The fire tokens' iss (default: http://HOST:PORT).")
    ] = None,
    deadline: Annotated[
        float | None,
        typer.Option(help="Seconds a fire is retried before the relay gives up (3600)."),
    ] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
    allow_private_callbacks: Annotated[
        bool,
        typer.Option(
            "--allow-private-callbacks",
            help="Call agents back on loopback, link-local and private addresses too "
            f"(default: ${ALLOW_PRIVATE_ENV}, else refused).",
        ),
    ] = False,
) -> None:
    """Run the relay: provision/cancel/list for agents, the JWKS, and fire deliveries."""
    from agentcron.relay.server import RelayOptions, run

    target = database_flag(db, url)
    config = settings(ctx)
    try:
        relay = config.relay(
            host=host, port=port, home=home, issuer=issuer, deadline=deadline,
            allow_private=allow_private_callbacks or None,
        )  # fmt: skip
        if target is None and relay.database_url:
            target = db_url(relay.database_url, RELAY_DATABASE_URL_ENV)
        options = RelayOptions(
            host=relay.host, port=relay.port, home=home, url=target, issuer=issuer,
            deadline=deadline, log_level=log_level, allow_private=relay.allow_private,
            settings=config,
        )  # fmt: skip
        run(options, echo)
    except ConfigError as exc:
        raise fail(str(exc), 2) from None


@app.command("add-agent")
def add_agent(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The agent's name (its arms are its own).")],
    audience: Annotated[str, typer.Option(help="The `aud` of its fire tokens, e.g. agent:NAME.")],
    allow_origin: Annotated[
        list[str] | None,
        typer.Option(
            help="An origin (scheme://host[:port]) the relay may call this agent back on; "
            "repeat for more. Re-keying without it keeps the agent's origins.",
        ),
    ] = None,
    home: Home = None,
) -> None:
    """Add an agent (or give it a new credential); prints the credential once."""
    from agentcron.relay.agents import AgentRegistry

    registry = AgentRegistry(settings(ctx).relay_home(home))
    try:
        token = registry.add(name, audience, allow_origin or None)
    except ConfigError as exc:
        raise fail(str(exc), 2) from None
    agent = registry.get(name)
    origins = ", ".join(sorted(agent.origins)) if agent else ""
    echo(f"agent {name} (audience {audience}); callback origins: {origins or 'none'}")
    if not origins:
        echo(f"its provisions are refused until: agentcron relay allow-origin {name} URL")
    echo("its relay credential, shown once:")
    echo(token)
    echo(f"set on the agent: AGENTCRON_WAKE_RELAY_TOKEN={token} AGENTCRON_WAKE_AUDIENCE={audience}")


@app.command("remove-agent")
def remove_agent(
    ctx: typer.Context, name: Annotated[str, typer.Argument()], home: Home = None
) -> None:
    """Remove an agent: its credential stops working (its arms stay until they fire)."""
    from agentcron.relay.agents import AgentRegistry

    if not AgentRegistry(settings(ctx).relay_home(home)).remove(name):
        raise fail(f"no agent {name!r}", 1)
    echo(f"removed agent {name}")


@app.command("allow-origin")
def allow_origin(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The agent.")],
    urls: Annotated[list[str], typer.Argument(help="Origins: scheme://host[:port].")],
    revoke: Annotated[
        bool, typer.Option("--revoke", help="Take these origins out of the agent's set.")
    ] = False,
    home: Home = None,
) -> None:
    """Allow (or with --revoke, stop) callbacks to these origins for an agent; a running
    relay applies it to provisions and deliveries at once.
    """
    from agentcron.relay.agents import AgentRegistry

    try:
        agent = AgentRegistry(settings(ctx).relay_home(home)).allow_origins(
            name, urls, revoke=revoke
        )
    except ConfigError as exc:
        raise fail(str(exc), 2) from None
    echo(f"agent {name}: callback origins: {', '.join(sorted(agent.origins)) or 'none'}")


@app.command()
def agents(ctx: typer.Context, home: Home = None) -> None:
    """List the agents (name, audience and allowed callback origins)."""
    from agentcron.relay.agents import AgentRegistry

    for agent in AgentRegistry(settings(ctx).relay_home(home)).all():
        echo(f"{agent.name}\t{agent.audience}\t{' '.join(sorted(agent.origins)) or '-'}")


@app.command("rotate-key")
def rotate_key(ctx: typer.Context, home: Home = None) -> None:
    """A new signing key; the current one stays in the JWKS until the next rotation."""
    from agentcron.relay.signing_keys import SigningKeys

    keys = SigningKeys(settings(ctx).relay_home(home) / "keys")
    try:
        kid = keys.rotate()
    except ConfigError as exc:
        raise fail(str(exc), 2) from None
    echo(f"signing with {kid}; published: {', '.join(k['kid'] for k in keys.jwks()['keys'])}")
