"""The package layer order of docs/architecture.md, read from the imports: no cycle, nothing upward.

A package is the first name under `agentcron` (a subpackage, or a top-level module). Every
import counts, wherever it is written: at the top, inside a function, under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "src" / "agentcron"

# Bottom to top. A package may import its own modules and any package of a LOWER layer; two
# packages of one layer never import each other. Keep docs/architecture.md ("Layers") in step.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "version"),
    ("session_keys", "limits", "schedule"),
    ("domain",),
    ("config",),  # every setting: the file, the environment, `Settings`; the [tools] table
    ("store",),
    ("agent",),  # with the tool sources (agent/tool_sources.py: entry points, MCP servers)
    ("runtime",),
    ("engine", "turns"),
    ("service", "wake"),
    ("app",),
    ("testing", "views", "approval_links", "tokens"),
    ("channels",),
    ("server",),
    ("relay",),
    ("demo",),
    ("cli",),
    ("interfaces",),  # the extension points, gathered from every layer below (public)
    ("agentcron",),  # the package's own __init__: the public names
)

Graph = Mapping[str, Mapping[str, Sequence[str]]]  # package -> imported package -> where


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "agentcron"


def _imported(node: ast.AST, module: str, is_init: bool, root: Path) -> Iterable[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".")
            base = base[: len(base) - node.level + (1 if is_init else 0)]
            target = ".".join([*base, node.module] if node.module else base)
        else:
            target = node.module or ""
        if target != root.name:
            yield target
            return
        for alias in node.names:  # `from agentcron import views`: the submodule's package
            name = alias.name
            is_module = (root / name).is_dir() or (root / f"{name}.py").is_file()
            yield f"{target}.{name}" if is_module else target


def import_graph(root: Path = SRC) -> dict[str, dict[str, list[str]]]:
    """package -> the packages it imports -> the modules that do."""
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path, root)
        source = _package(module)
        graph.setdefault(source, defaultdict(list))
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            for target in _imported(node, module, path.name == "__init__.py", root):
                if target == "agentcron" or target.startswith("agentcron."):
                    dest = _package(target)
                    if dest != source:
                        graph[source][dest].append(module)
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components with more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def violations(graph: Graph, layers: Sequence[Sequence[str]] = LAYERS) -> list[str]:
    """Every import against the layer order, and every package the order does not place."""
    level = {package: i for i, layer in enumerate(layers) for package in layer}
    problems = [f"{p} is in no layer" for p in sorted(graph) if p not in level]
    for source, targets in sorted(graph.items()):
        for dest, where in sorted(targets.items()):
            if source not in level or dest not in level:
                if dest not in level and dest not in graph:
                    problems.append(f"{source} imports {dest}, which is in no layer")
                continue
            if level[dest] >= level[source]:
                kind = "a sibling" if level[dest] == level[source] else "a higher layer"
                problems.append(f"{source} imports {dest} ({kind}) in {sorted(set(where))}")
    return problems


def test_no_package_cycle() -> None:
    assert cycles(import_graph()) == []


def test_every_import_points_down_the_layer_order() -> None:
    assert violations(import_graph()) == []


def test_every_layer_names_a_real_package() -> None:
    real = set(import_graph())
    assert [p for layer in LAYERS for p in layer if p not in real] == []


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b": ["agentcron.a.x"]}, "b": {"a": ["agentcron.b.y"]}}, [["a", "b"]]),
        ({"a": {"b": ["m"]}, "b": {"c": ["m"]}, "c": {"a": ["m"]}, "d": {}}, [["a", "b", "c"]]),
        ({"a": {"b": ["m"]}, "b": {}}, []),
    ],
)
def test_the_cycle_check_finds_a_cycle(graph: Graph, expected: list[list[str]]) -> None:
    assert cycles(graph) == expected


def test_the_layer_check_fails_on_an_upward_or_sideways_import() -> None:
    layers = (("low",), ("mid", "side"), ("high",))
    graph: Graph = {
        "low": {"mid": ["agentcron.low.x"]},  # upward
        "mid": {"side": ["agentcron.mid.y"], "low": ["agentcron.mid.z"]},  # sideways, down
        "side": {},
        "high": {"low": ["agentcron.high.w"]},  # down: fine
        "stray": {},
    }
    assert violations(graph, layers) == [
        "stray is in no layer",
        "low imports mid (a higher layer) in ['agentcron.low.x']",
        "mid imports side (a sibling) in ['agentcron.mid.y']",
    ]


def test_the_graph_reads_relative_and_nested_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "agentcron"
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "__init__.py").write_text(
        "from ..high import thing\nfrom agentcron import mid\n"
    )
    (pkg / "mid.py").write_text("from agentcron import __version__\n")
    (pkg / "high.py").write_text("def f():\n    import agentcron.low.x\n")
    graph = import_graph(pkg)
    assert {k: dict(v) for k, v in graph.items() if v} == {
        "low": {"high": ["agentcron.low"], "mid": ["agentcron.low"]},
        "high": {"low": ["agentcron.high"]},
        "mid": {"agentcron": ["agentcron.mid"]},
    }
