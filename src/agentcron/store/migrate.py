"""Schema creation and upgrades through Alembic, run on start and by `agentcron db upgrade`."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Connection

MIGRATIONS = Path(__file__).with_name("migrations")


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config for agentcron's migrations, bound to `connection` when given."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def upgrade_connection(connection: Connection, revision: str = "head") -> None:
    """Upgrade the database behind `connection` (inside the caller's transaction)."""
    command.upgrade(alembic_config(connection), revision)


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at, or None for an empty database."""
    return MigrationContext.configure(connection).get_current_revision()
