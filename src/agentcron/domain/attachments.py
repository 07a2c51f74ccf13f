"""Attachments: a photo, a document, ... carried with a message, by URL or as bounded bytes."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from agentcron.errors import InvalidInputError
from agentcron.limits import (
    MAX_ATTACHMENT_BYTES,
    MAX_ATTACHMENT_URL_CHARS,
    MAX_ATTACHMENTS,
    MAX_SHORT_CHARS,
    check_text,
)

AttachmentKind = Literal["photo", "document", "audio", "video", "voice"]
ATTACHMENT_KINDS: frozenset[str] = frozenset(get_args(AttachmentKind))


@dataclass(frozen=True, slots=True)
class Attachment:
    """One file carried with a message: a `url` the receiver fetches, or the file's `data`
    (at most MAX_ATTACHMENT_BYTES), or neither (metadata only: a file a channel did not
    fetch, e.g. one over the bound). `size` is in bytes (None: unknown; with `data`, its
    length when not given).

    Bytes never go into a transcript or a log: `describe()` is what is kept and shown.
    """

    kind: AttachmentKind
    name: str | None = None
    mime_type: str | None = None
    size: int | None = None
    url: str | None = None
    data: bytes | None = field(default=None, repr=False)  # never in a log

    def __post_init__(self) -> None:
        if self.kind not in ATTACHMENT_KINDS:
            raise InvalidInputError(
                f"attachment kind {self.kind!r}: one of {', '.join(sorted(ATTACHMENT_KINDS))}"
            )
        if self.url is not None and self.data is not None:
            raise InvalidInputError("an attachment has a url or data, not both")
        for what, value in (("name", self.name), ("mime_type", self.mime_type)):
            if value is not None:
                if len(value) > MAX_SHORT_CHARS:
                    raise InvalidInputError(
                        f"attachment {what}: at most {MAX_SHORT_CHARS} characters"
                    )
                check_text(value, f"attachment {what}")
        if self.url is not None:
            check_url(self.url)
        if self.data is not None and len(self.data) > MAX_ATTACHMENT_BYTES:
            raise InvalidInputError(
                f"an attachment's data is at most {MAX_ATTACHMENT_BYTES} bytes "
                f"(this is {len(self.data)}); send a url instead"
            )
        if self.size is not None and self.size < 0:
            raise InvalidInputError("an attachment's size cannot be negative")
        if self.data is not None and self.size is None:  # bytes known: so is their size
            object.__setattr__(self, "size", len(self.data))

    @property
    def filename(self) -> str:
        """A name to upload it under (its own, or one made from its kind)."""
        return self.name or ("photo.jpg" if self.kind == "photo" else self.kind)

    def describe(self) -> dict[str, Any]:
        """What a transcript keeps and a runner or a person is shown: no bytes."""
        found: dict[str, Any] = {"kind": self.kind}
        for key in ("name", "mime_type", "url"):
            value = getattr(self, key)
            if value is not None:
                found[key] = value
        if self.size is not None:
            found["size"] = self.size
        if self.data is not None:
            found["inline"] = True
        return found

    def to_json(self) -> dict[str, Any]:
        """`describe()` plus the bytes as base64 (`data`): for a durable outbound record and
        the webhook's body, never for a transcript.
        """
        found = self.describe()
        found.pop("inline", None)
        if self.data is not None:
            found["data"] = base64.b64encode(self.data).decode("ascii")
        return found

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Attachment:
        """The inverse of `to_json` (InvalidInputError on anything else)."""
        data = value.get("data")
        size = value.get("size")
        return cls(
            kind=value.get("kind"),  # type: ignore[arg-type]  # checked in __post_init__
            name=_opt_str(value.get("name")),
            mime_type=_opt_str(value.get("mime_type")),
            size=size if isinstance(size, int) else None,
            url=_opt_str(value.get("url")),
            data=None if data is None else decode_data(data),
        )


def _opt_str(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInputError("an attachment's name, mime_type and url are strings")
    return value


def check_url(url: str) -> str:
    """`url` if it is an http(s) URL of at most MAX_ATTACHMENT_URL_CHARS; InvalidInputError."""
    if len(url) > MAX_ATTACHMENT_URL_CHARS:
        raise InvalidInputError(
            f"an attachment's url is at most {MAX_ATTACHMENT_URL_CHARS} characters"
        )
    scheme, sep, rest = url.partition("://")
    if (
        not sep
        or scheme.lower() not in ("http", "https")
        or not rest
        or any(c in url for c in " \r\n\t")
    ):
        raise InvalidInputError("an attachment's url must be an http:// or https:// URL")
    return check_text(url, "an attachment's url")


def decode_data(value: object) -> bytes:
    """Base64 text as bytes, bounded by MAX_ATTACHMENT_BYTES; InvalidInputError otherwise."""
    if not isinstance(value, str):
        raise InvalidInputError("an attachment's data is base64 text")
    if len(value) > (MAX_ATTACHMENT_BYTES + 2) // 3 * 4:
        raise InvalidInputError(f"an attachment's data is at most {MAX_ATTACHMENT_BYTES} bytes")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInputError("an attachment's data is not valid base64") from None


def check_attachments(attachments: tuple[Attachment, ...]) -> tuple[Attachment, ...]:
    """At most MAX_ATTACHMENTS of them; InvalidInputError otherwise."""
    if len(attachments) > MAX_ATTACHMENTS:
        raise InvalidInputError(f"at most {MAX_ATTACHMENTS} attachments a message")
    return attachments


def attachment_note(described: list[dict[str, Any]] | tuple[Attachment, ...]) -> str:
    """A line a model reads: what was attached (kind, name, type, size, where), never bytes."""
    lines = []
    for item in described:
        found = item.describe() if isinstance(item, Attachment) else item
        bits = [str(found.get("mime_type") or "type unknown")]
        if isinstance(found.get("size"), int):
            bits.append(f"{found['size']} bytes")
        where = found.get("url") or ("sent inline" if found.get("inline") else None)
        if where:
            bits.append(str(where))
        name = f" “{found['name']}”" if found.get("name") else ""
        lines.append(f"[attached {found.get('kind', 'file')}{name}: {', '.join(bits)}]")
    return "\n".join(lines)


def without_bytes(payload: dict[str, Any]) -> dict[str, Any] | None:
    """A delivery record's payload with its `attachments` described, not carried (their bytes
    dropped, `"inline": true` instead); None when it has no bytes to drop. A delivered record
    no longer needs them (a failed one keeps them for a re-send).
    """
    files = payload.get("attachments")
    if not isinstance(files, list) or not any(isinstance(f, dict) and "data" in f for f in files):
        return None
    kept = [
        {**{k: v for k, v in f.items() if k != "data"}, "inline": True}
        if isinstance(f, dict) and "data" in f
        else f
        for f in files
    ]
    return {**payload, "attachments": kept}
