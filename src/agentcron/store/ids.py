"""Ids: sortable and collision-free (ULID)."""

from ulid import ULID


def new_id() -> str:
    """A new ULID string: 26 characters, sorting by creation time."""
    return str(ULID())
