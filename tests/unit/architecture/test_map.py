"""docs/architecture.md names what exists: its layer table is the layer test's; every file or
folder it cites is in the repository; its Layout names every module of src/agentcron and no
other; its Events section every event type; every `Class.member` and `package/module.name` it
writes resolves in the source (read with ast, never imported); its settings section names every
engine setting, its states section every state of a run, a turn, a job and a recall, its Errors
section every kind of `AgentcronError`, its parts every store protocol; the seams it lists are
`agentcron.interfaces`' names; and it speaks of the project as it is (no seed, issue or session
numbers). Each check has a test that shows it failing on a wrong map.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterable
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


# -- the Layout section names every module, and only modules that exist -------------------------

_LAYOUT_FILE = re.compile(r"(?<![\w/.*])([\w*]+\.(?:py|js|html|css))(?![\w.])")
_LAYOUT_FOLDER = re.compile(r"(?<![\w/.*])(\w+)/(?=[\s(]|$)")
_SOURCE_ENDINGS = (".py", ".js", ".html", ".css")
_NOT_LISTED = ("migrations", "templates", "__pycache__")  # a folder named as a whole


def section(text: str, title: str) -> str:
    """The body of the `## title...` section (to the next `## `)."""
    start = re.search(rf"^## {re.escape(title)}.*$", text, re.MULTILINE)
    if start is None:
        raise ValueError(f"docs/architecture.md has no section {title!r}")
    rest = text[start.end() :]
    end = re.search(r"^## ", rest, re.MULTILINE)
    return rest if end is None else rest[: end.start()]


def layout_offenders(text: str, src: Path = SRC) -> tuple[list[str], list[str]]:
    """The Layout block against `src`: (modules under `src` it does not name, names in it that
    are no file or folder there). A line indented two spaces starts a package (`store/`) or
    names a top-level module; the lines below it go on with it. A name resolves in the folders
    its package's lines named so far (`routes/`), then in the package; `*` is a glob.
    """
    block = section(text, "Layout").split("```", 2)[1]
    lines = block.splitlines()
    begin = next(i for i, line in enumerate(lines) if line.rstrip().endswith(f"{src.name}/"))
    named: set[Path] = set()
    gone: list[str] = []
    package, folders = src, [src]
    for line in lines[begin + 1 :]:
        if line and not line[0].isspace():
            break  # the next tree (tests/, bench/)
        body = line.strip()
        if len(line) - len(line.lstrip()) == 2:  # a new package, or a top-level module
            head = re.match(r"(\w+)/(?=\s|$)", body)
            package = src / head.group(1) if head else src
            folders = [package]
            if head:
                body = body[head.end() :]
                if not package.is_dir():
                    gone.append(f"{head.group(1)}/")
        for folder in _LAYOUT_FOLDER.findall(body):
            if (package / folder).is_dir():
                folders.insert(-1, package / folder)
                named.add(package / folder)
            else:
                gone.append(f"{package.relative_to(src) / folder}/")
        for name in _LAYOUT_FILE.findall(body):
            found = next((hits for f in folders if (hits := sorted(f.glob(name)))), [])
            if not found:
                gone.append(str((package / name).relative_to(src)))
            named.update(found)
    missing = [
        path.relative_to(src).as_posix()
        for path in sorted(src.rglob("*"))
        if path.suffix in _SOURCE_ENDINGS
        and path.name != "__init__.py"
        and not set(path.relative_to(src).parts) & set(_NOT_LISTED)
        and path not in named
    ]
    return missing, gone


def test_the_layout_names_every_module_and_no_other() -> None:
    assert layout_offenders(MAP.read_text("utf-8")) == ([], [])


def test_the_layout_check_sees_a_missing_and_a_gone_module(tmp_path: Path) -> None:
    src = tmp_path / "agentcron"
    for name in ("app.py", "pkg/a.py", "pkg/b.py", "pkg/sub/c.py", "pkg/x_cmds.py", "web/i.js"):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text("")
    text = (
        "## Layout\n```\nagentcron/\n  app.py     the wiring, start/stop\n"
        "  pkg/      a.py (one) sub/ (c.py: under sub)\n            gone.py *_cmds.py\n"
        "  lost/     d.py\ntests/  unit/ e.py\n```\n## Next\n"
    )
    missing, gone = layout_offenders(text, src)
    assert missing == ["pkg/b.py", "web/i.js"]
    assert gone == ["pkg/gone.py", "lost/", "lost/d.py"]


# -- every event type is in the Events section, and only event types are in its table ----------

EVENTS = SRC / "domain" / "events.py"


def event_classes(source: str) -> set[str]:
    """The classes of `source` that derive from `Event` (directly or through another)."""
    bases = {
        node.name: {b.id for b in node.bases if isinstance(b, ast.Name)}
        for node in ast.parse(source).body
        if isinstance(node, ast.ClassDef)
    }
    found: set[str] = set()
    while grown := {n for n, b in bases.items() if n not in found and b & (found | {"Event"})}:
        found |= grown
    return found


def events_offenders(text: str, source: str) -> tuple[list[str], list[str]]:
    """(event classes the Events section does not name, names in its table's first column that
    are no event class).
    """
    body = section(text, "Events")
    classes = event_classes(source)
    named = set(re.findall(r"`(\w+)`", body))
    rows = [line.split("|")[1] for line in body.splitlines() if line.startswith("| `")]
    listed = {name for row in rows for name in re.findall(r"`(\w+)`", row)}
    return sorted(classes - named), sorted(listed - classes)


def test_the_events_section_lists_every_event() -> None:
    assert events_offenders(MAP.read_text("utf-8"), EVENTS.read_text("utf-8")) == ([], [])


def test_the_events_check_sees_a_missing_and_a_stray_event() -> None:
    source = "class Event: ...\nclass A(Event): ...\nclass B(A): ...\nclass C: ...\n"
    text = "## Events\n| event | when |\n| --- | --- |\n| `A` / `C` | x |\n## Errors\n"
    assert events_offenders(text, source) == (["B"], ["C"])


# -- every `Class.attribute` and `package/module.name` the map writes exists ----------------------

# `SqlStore.claim_due`, `TurnEnds.finished`, `Engine._loop` (a class: a capital, then a lower case)
_MEMBER = re.compile(r"(?<![\w.])([A-Z]\w*[a-z]\w*)\.(_{0,2}[a-z]\w*)\b")
# `engine/policies.plan_fires`, `store/database.owner_only_file`
_MODULE_NAME = re.compile(
    r"(?<![\w/.])((?:[a-z_]+/)+[a-z_]\w*)\.(?!(?:py|js|html|css|md|json)\b)([a-z_]\w*)\b"
)


def _assigned(node: ast.stmt) -> list[str]:
    """The plain names a statement binds (`x = ...`, `x: int = ...`)."""
    targets = node.targets if isinstance(node, ast.Assign) else []
    if isinstance(node, ast.AnnAssign):
        targets = [node.target]
    return [t.id for t in targets if isinstance(t, ast.Name)]


def _is_self_attribute(node: ast.AST) -> bool:
    """`self.x = ...`'s target."""
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


_Classes = dict[str, list[tuple[set[str], set[str]]]]  # name -> [(attributes, base names)]
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _names_of(tree: ast.Module) -> tuple[_Classes, set[str]]:
    """The classes of a module and its top-level names (defined, assigned or imported)."""
    classes: _Classes = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        attrs = {sub.name for sub in ast.walk(node) if isinstance(sub, _DEFINITIONS)}
        attrs.update(
            sub.attr
            for sub in ast.walk(node)
            if isinstance(sub, ast.Attribute) and _is_self_attribute(sub)
        )
        attrs.update(name for sub in node.body for name in _assigned(sub))
        bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
        classes.setdefault(node.name, []).append((attrs, bases))
    top = {node.name for node in tree.body if isinstance(node, _DEFINITIONS)}
    top.update(name for node in tree.body for name in _assigned(node))
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):  # a name it re-exports
            top.update(alias.asname or alias.name for alias in node.names)
    return classes, top


def unknown_members(text: str, src: Path = SRC) -> list[str]:
    """Each `Class.attribute` of `text` whose class no module of `src` defines or whose class
    (with its bases) has no such method, property, field or `self.` attribute; and each
    `package/module.name` whose module has no such top-level name.
    """
    classes: _Classes = {}
    modules: dict[str, set[str]] = {}
    for path in sorted(src.rglob("*.py")):
        found, top = _names_of(ast.parse(path.read_text("utf-8")))
        for name, kinds in found.items():
            classes.setdefault(name, []).extend(kinds)
        modules[path.relative_to(src).with_suffix("").as_posix()] = top

    def has(cls: str, attr: str, seen: frozenset[str] = frozenset()) -> bool:
        return any(
            attr in attrs or any(has(b, attr, seen | {cls}) for b in bases - seen)
            for attrs, bases in classes.get(cls, [])
        )

    unknown = {f"{cls}.{attr}" for cls, attr in _MEMBER.findall(text) if not has(cls, attr)}
    for module, name in _MODULE_NAME.findall(text):
        if module in modules and name not in modules[module]:
            unknown.add(f"{module}.{name}")
    return sorted(unknown)


def test_every_class_member_and_module_name_the_map_writes_exists() -> None:
    assert unknown_members(MAP.read_text("utf-8")) == []


def test_the_member_check_sees_what_is_not_there(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(
        "class Base:\n    def run(self) -> None:\n        self.seen = 1\n"
        "class Lanes(Base):\n    size: int\n    async def _drain(self) -> None: ...\n"
        "def plan_fires() -> None: ...\n"
    )
    text = (
        "`Lanes._drain` `Lanes.run` `Lanes.seen` `Lanes.size` `Lanes.gone` `Ghost.run` "
        "`pkg/mod.plan_fires` `pkg/mod.gone` `pkg/mod.py` e.g. README.md"
    )
    assert unknown_members(text, tmp_path) == ["Ghost.run", "Lanes.gone", "pkg/mod.gone"]


# -- the settings section names every engine setting ---------------------------------------------


def setting_fields(source: str, cls: str = "EngineSettings") -> list[str]:
    """The fields of dataclass `cls` in `source`."""
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == cls)
    return [
        s.target.id
        for s in node.body
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
    ]


def unnamed_settings(text: str, source: str) -> list[str]:
    """The `EngineSettings` fields the settings section does not name in backticks."""
    named = set(re.findall(r"`(\w+)`", section(text, "Settings that shape the path")))
    return [name for name in setting_fields(source) if name not in named]


def test_the_settings_section_names_every_engine_setting() -> None:
    source = (SRC / "config" / "engine.py").read_text("utf-8")
    assert unnamed_settings(MAP.read_text("utf-8"), source) == []


def test_the_settings_check_sees_a_missing_setting() -> None:
    source = "class EngineSettings:\n    lease: int = 1\n    takeover: int = 2\n"
    text = "## Settings that shape the path\n`lease` (1 s)\n## Next\n`takeover`\n"
    assert unnamed_settings(text, source) == ["takeover"]


# -- the seams the map names are agentcron.interfaces' names -------------------------------------


def unexported_seams(text: str, exported: Iterable[str]) -> list[str]:
    """The names of the map's `agentcron.interfaces` bullet that module does not export."""
    body = section(text, "Public API and seams")
    bullet = body.split("- `agentcron.interfaces`", 1)[1].split("\n- ", 1)[0]
    return sorted(set(re.findall(r"`(\w+)`", bullet)) - set(exported))


def test_the_seams_the_map_names_are_exported() -> None:
    exported = importlib.import_module("agentcron.interfaces").__all__
    assert unexported_seams(MAP.read_text("utf-8"), exported) == []


def test_the_seams_check_sees_a_name_that_is_not_exported() -> None:
    text = (
        "## Public API and seams\n- `agentcron` re-exports `Gone`\n"
        "- `agentcron.interfaces` gathers `Runner`, `Clock`\n  and `Lost` (`cron.x`)\n"
        "- `agentcron.schedule` `Other`\n## Wiring\n"
    )
    assert unexported_seams(text, ["Runner", "Clock"]) == ["Lost"]


# -- the errors every edge maps, and the store protocols, are named ------------------------------


def direct_subclasses(sources: Iterable[str], base: str) -> set[str]:
    """The public classes of `sources` that name `base` among their bases."""
    return {
        node.name
        for source in sources
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ClassDef)
        and not node.name.startswith("_")
        and any(isinstance(b, ast.Name) and b.id == base for b in node.bases)
    }


def unnamed(text: str, title: str, names: Iterable[str]) -> list[str]:
    """The `names` section `title` does not write in backticks."""
    written = set(re.findall(r"`(\w+)`", section(text, title)))
    return sorted(set(names) - written)


def test_the_errors_section_names_every_kind_of_error() -> None:
    sources = [path.read_text("utf-8") for path in sorted(SRC.rglob("*.py"))]
    kinds = direct_subclasses(sources, "AgentcronError")
    assert len(kinds) > 10  # the walk saw the real source
    assert unnamed(MAP.read_text("utf-8"), "Errors", kinds) == []


def test_the_parts_name_every_store_protocol() -> None:
    protocols = direct_subclasses([(SRC / "store" / "interface.py").read_text("utf-8")], "Protocol")
    assert len(protocols) > 10
    assert unnamed(MAP.read_text("utf-8"), "The parts, layer by layer", protocols) == []


def test_the_naming_checks_see_a_class_the_map_leaves_out() -> None:
    source = (
        "class AgentcronError(Exception): ...\nclass StoreError(AgentcronError): ...\n"
        "class GoneError(AgentcronError): ...\nclass NotFound(StoreError): ...\n"
        "class _Inner(AgentcronError): ...\n"
    )
    kinds = direct_subclasses([source], "AgentcronError")
    assert kinds == {"StoreError", "GoneError"}
    text = "## Errors\n`StoreError`, `NotFound`\n## Layout\n`GoneError`\n"
    assert unnamed(text, "Errors", kinds) == ["GoneError"]


# -- every state of a run, a turn, a job and a recall is in the states section -------------------

STATE_ENUMS = {"states.py": ("RunState", "TurnState"), "jobs.py": ("JobStatus", "RecallState")}


def enum_values(source: str, cls: str) -> list[str]:
    """The string values of enum `cls` in `source` (`RUNNING = "running"`)."""
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == cls)
    return [
        s.value.value
        for s in node.body
        if isinstance(s, ast.Assign)
        and isinstance(s.value, ast.Constant)
        and isinstance(s.value.value, str)
    ]


def unnamed_states(text: str, values: Iterable[str]) -> list[str]:
    """The `values` the states section never writes as a word."""
    body = section(text, "Run and turn states")
    return [v for v in values if not re.search(rf"(?<![\w-]){re.escape(v)}(?![\w-])", body)]


def test_the_states_section_names_every_state() -> None:
    values = [
        value
        for module, classes in STATE_ENUMS.items()
        for cls in classes
        for value in enum_values((SRC / "domain" / module).read_text("utf-8"), cls)
    ]
    assert len(values) > 20
    assert unnamed_states(MAP.read_text("utf-8"), values) == []


def test_the_states_check_sees_a_missing_state() -> None:
    source = 'class RunState:\n    QUEUED = "queued"\n    LOST = "lost"\n    x: int = 1\n'
    assert enum_values(source, "RunState") == ["queued", "lost"]
    text = "## Run and turn states\nqueued --> lost-ish\n## Next\nlost\n"
    assert unnamed_states(text, ["queued", "lost"]) == ["lost"]


# -- the map speaks of the project as it is: no seeds, issues or sessions by number -------------

_HISTORY = re.compile(r"\b(?:seed|issue|session)\s+#?\d+|(?<![\w&])#\d+\b", re.IGNORECASE)


def history_mentions(text: str) -> list[str]:
    """Each mention of a seed, an issue or a session by its number (`seed002`, a name the code
    uses, is not one).
    """
    return _HISTORY.findall(text)


def test_the_map_names_no_seed_issue_or_session_number() -> None:
    assert history_mentions(MAP.read_text("utf-8")) == []


def test_the_history_check_sees_a_number() -> None:
    text = "as seed 004 asks (issue #24, #7; session 3) in `seed002.py`, `Seed002Arms`, &#8212;"
    assert history_mentions(text) == ["seed 004", "issue #24", "#7", "session 3"]
