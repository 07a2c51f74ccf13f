"""Attachments: bounds, what a transcript keeps (never bytes), the JSON of a delivery record."""

from __future__ import annotations

import base64

import pytest

from agentcron.domain.attachments import (
    Attachment,
    attachment_note,
    check_attachments,
    decode_data,
    without_bytes,
)
from agentcron.errors import InvalidInputError
from agentcron.limits import MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS


def test_a_file_is_described_without_its_bytes_and_kept_as_json_with_them() -> None:
    photo = Attachment("photo", "cat.jpg", "image/jpeg", data=b"\xff\xd8 cat")
    assert photo.describe() == {
        "kind": "photo", "name": "cat.jpg", "mime_type": "image/jpeg", "size": 6, "inline": True,
    }  # fmt: skip
    assert photo.to_json()["data"] == base64.b64encode(b"\xff\xd8 cat").decode()
    assert "inline" not in photo.to_json()
    assert Attachment.from_json(photo.to_json()) == Attachment(
        "photo", "cat.jpg", "image/jpeg", 6, data=b"\xff\xd8 cat"
    )
    linked = Attachment("document", url="https://files.example/a.pdf")
    assert linked.describe() == {"kind": "document", "url": "https://files.example/a.pdf"}
    assert Attachment.from_json(linked.to_json()) == linked
    assert "xd8" not in repr(photo)  # bytes never reach a log line
    assert (photo.filename, linked.filename) == ("cat.jpg", "document")
    assert Attachment("photo", data=b"x").filename == "photo.jpg"


@pytest.mark.parametrize(
    "make",
    [
        lambda: Attachment("sticker", url="https://x.example/a"),  # type: ignore[arg-type]
        lambda: Attachment("photo", url="https://x.example/a", data=b"x"),
        lambda: Attachment("photo", url="file:///etc/passwd"),
        lambda: Attachment("photo", url="https://x.example/" + "a" * 3000),
        lambda: Attachment("photo", url="https://x.example/a b"),
        lambda: Attachment("photo", data=b"x" * (MAX_ATTACHMENT_BYTES + 1)),
        lambda: Attachment("photo", "a\x00b", data=b"x"),
        lambda: Attachment("photo", "n" * 201, data=b"x"),
        lambda: Attachment("photo", size=-1),
        lambda: Attachment.from_json({"kind": "photo", "data": "not base64!"}),
        lambda: Attachment.from_json({"kind": "photo", "name": 3}),
    ],
)
def test_bad_files_are_refused(make: object) -> None:
    with pytest.raises(InvalidInputError):
        make()  # type: ignore[operator]


def test_the_bounds_hold() -> None:
    assert len(decode_data(base64.b64encode(b"x" * MAX_ATTACHMENT_BYTES).decode())) == (
        MAX_ATTACHMENT_BYTES
    )
    with pytest.raises(InvalidInputError):
        decode_data("A" * (MAX_ATTACHMENT_BYTES * 2))
    with pytest.raises(InvalidInputError):
        decode_data(b"eA==")
    files = (Attachment("photo", size=1),) * MAX_ATTACHMENTS
    assert check_attachments(files) == files
    with pytest.raises(InvalidInputError):
        check_attachments((*files, files[0]))


def test_the_note_a_model_reads() -> None:
    note = attachment_note(
        (
            Attachment("photo", "cat.jpg", "image/jpeg", data=b"abc"),
            Attachment("document", size=9),
        )
    )
    assert note == (
        "[attached photo “cat.jpg”: image/jpeg, 3 bytes, sent inline]\n"
        "[attached document: type unknown, 9 bytes]"
    )
    assert attachment_note([{"kind": "photo", "url": "https://x.example/a"}]) == (
        "[attached photo: type unknown, https://x.example/a]"
    )


def test_a_settled_record_keeps_the_description_not_the_bytes() -> None:
    photo = Attachment("photo", "p.png", data=b"abc")
    payload = {"text": "t", "attachments": [photo.to_json(), {"kind": "document"}, "odd"]}
    assert without_bytes(payload) == {
        "text": "t",
        "attachments": [photo.describe(), {"kind": "document"}, "odd"],
    }
    assert without_bytes({"text": "t"}) is None
    assert (
        without_bytes({"attachments": [{"kind": "document", "url": "https://x.example"}]}) is None
    )
