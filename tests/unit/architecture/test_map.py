"""docs/architecture.md names what exists: its layer table is the layer test's, and every file
or folder it cites is in the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.unit.architecture.test_layers import LAYERS

ROOT = Path(__file__).resolve().parents[3]
MAP = ROOT / "docs" / "architecture.md"
SRC = ROOT / "src" / "agentcron"

# `store/turn_writes.py`, `app.py`, `tests/faultproxy.py`, `webui/`, `store/migrations`
_CITED = re.compile(r"`((?:[\w.-]+/)*[\w.-]+\.(?:py|js|html|css|md|json)|(?:[\w.-]+/)+[\w.-]*)`")
_BASES = (SRC, ROOT, ROOT / "tests", ROOT / "tests" / "integration", ROOT / "bench")
_FILE_ENDINGS = (".py", ".js", ".html", ".css", ".md", ".json")


def layer_table(text: str) -> list[tuple[str, ...]]:
    """The packages of each row of the map's layer table, bottom to top."""
    block = text.split("<!-- layers -->", 1)[1].split("<!-- /layers -->", 1)[0]
    rows = [line for line in block.splitlines() if re.match(r"\|\s*\d+\s*\|", line)]
    return [tuple(re.findall(r"`([\w.]+)`", row.split("|")[2])) for row in rows]


def missing_citations(text: str, bases: tuple[Path, ...] = _BASES) -> list[str]:
    """Each cited path that is no file or folder under any base (a bare file name: anywhere
    under the first base).
    """
    missing = []
    for cited in sorted(set(_CITED.findall(text))):
        name = cited.rstrip("/")
        folder, _, last = name.rpartition("/")
        if "." in last and not last.endswith(_FILE_ENDINGS):  # `store/database.owner_only_file`
            name = f"{folder}/{last.split('.')[0]}.py"
        if any((base / name).exists() for base in bases):
            continue
        # A bare file name: anywhere under a base but the repository's root (its .venv).
        if "/" not in name and any(any(b.rglob(name)) for i, b in enumerate(bases) if i != 1):
            continue
        missing.append(cited)
    return missing


def test_the_layer_table_is_the_layer_test() -> None:
    assert layer_table(MAP.read_text("utf-8")) == [tuple(layer) for layer in LAYERS]


def test_every_cited_file_exists() -> None:
    assert missing_citations(MAP.read_text("utf-8")) == []


def test_the_checks_see_a_wrong_map(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "here.py").write_text("")
    text = (
        "<!-- layers -->\n| layer | packages | what |\n| ---: | --- | --- |\n"
        "| 0 | `errors`, `version` | x |\n| 1 | `store` | y |\n<!-- /layers -->\n"
        "See `pkg/here.py`, `here.py`, `pkg/here.f`, `pkg/`, `pkg/gone.py`, `pkg/gone.f`, `gone.py`."
    )
    assert layer_table(text) == [("errors", "version"), ("store",)]
    assert missing_citations(text, (tmp_path,)) == ["gone.py", "pkg/gone.f", "pkg/gone.py"]
