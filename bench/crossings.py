"""`python -m bench crossings`: how often three flows cross package boundaries, and the shape of
the package import graph (modules, the largest, package cycles). A measurement of structure, not
of speed: the same command gives the "before" and "after" figures of a refactor.

Packages. A module's package is the first path component under the `agentcron` directory: a
subpackage directory (`engine`, `store`, ...) or a top-level module's name (`app`, `views`, ...);
the root `__init__.py` is `agentcron`. Nothing here names a module of agentcron: a module that
moves is counted where it is.

Flows (public API only: `AgentCron`, `agentcron.testing`, events matched by their `type`): each
runs once untraced (imports, lazy set-up), then `--repeat` times traced, each time in a fresh
session that already holds one exchange (so every run starts from the same state):
- fire: a bound one-shot job, created beforehand, becomes due (the FakeClock is moved to it);
  traced from the move to the end of its turn (and what settles after it);
- message: `cron.sessions.send(key, text)` to the end of its turn;
- approval: a message that makes the built-in agent (offline model) call a library tool whose
  policy is `approve`, the request, `cron.approvals.decide(...)`, the end of the turn.
The fire and message flows use a minimal Runner (it reads the session's history, as the default
window says, and answers at once); the approval flow uses the built-in runner, so its figures
include that runner's own calls. Each window ends when the engine has settled
(`wait_settled`, not itself counted).

Counting rule. The tracer (`sys.setprofile`, and `threading.setprofile` for the database and
worker threads, which are started after it is installed) looks at every Python call of a code
object under the agentcron directory, and at a method generated from a string for one of its
classes (a dataclass's `__init__`: constructing another package's record is a call into it):
- only fresh calls count: a coroutine or generator frame that resumes also makes a call event,
  and is skipped (its `f_lasti` is past its first RESUME instruction); comprehensions (frames of
  their own in 3.11 only) are not calls;
- the caller is the nearest agentcron frame on the callee's `f_back` chain (same thread). When
  the chain has none, the caller is whoever made the work that runs: for a task's coroutines,
  the agentcron frame that called `loop.create_task` (whatever the first coroutine's module);
  for a plain callback of the event loop, the one that made its `Handle`; for a function a
  thread pool runs, the one that made the work item; for a thread fed by a `queue.Queue`
  (anyio's worker threads, which run the built-in agent's sync tools), the one that put the
  item in. A task that resumes is not called by whoever woke it. No agentcron frame there
  either: an entry (the bench calling in), counted apart;
- a crossing is a call whose caller's package differs from the callee's. Returns never count.
  Counted per thread (the caller's frame or work was on the callee's thread or handed to it);
- only calls that belong to the flow count: work is "in the flow" when the traced driver did it,
  or when it was scheduled (a Handle, a task, a work item, a queue item) by work in the flow. So
  the periodic work that happens to run meanwhile (the SQLite signal poll every 50 ms, on a
  timer of its own) is left out, and the figures repeat exactly from run to run.
The FakeClock stands in for the system clock: its methods are counted as code of the module
that holds the clock `AgentCron` uses when given none, so a clock read is counted where it
would land in production; the rest of `agentcron.testing` is outside, like the bench.

Structure: modules are the `.py` files under the agentcron directory; the package import graph
has an edge A -> B when a module of A imports a module of B (every import statement, also inside
functions and `if TYPE_CHECKING:`; a second figure leaves the TYPE_CHECKING ones out); the root
package is left out of the graph; a cycle is a strongly connected component of more than one
package.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import asyncio.base_events
import asyncio.events
import concurrent.futures.thread
import dis
import inspect
import os
import platform
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import CodeType, FrameType, ModuleType
from typing import Any, NamedTuple

ROOT_PACKAGE = "agentcron"  # the name of the root package, as its directory is called

# -- places: which package and module a code object belongs to ------------------------------


@dataclass(frozen=True, slots=True)
class Place:
    package: str
    module: str


def place_of(relpath: str, root_name: str = ROOT_PACKAGE) -> Place:
    """The package and dotted module of a file given relative to the root package's directory
    (`engine/clock.py` -> engine, engine.clock; `app.py` -> app; `__init__.py` -> the root).
    """
    parts = [p for p in re.split(r"[\\/]", relpath) if p]
    if not parts:
        return Place(root_name, root_name)
    last = parts[-1]
    names = parts[:-1] if last == "__init__.py" else [*parts[:-1], last.removesuffix(".py")]
    if not names:
        return Place(root_name, root_name)
    return Place(names[0], ".".join(names))


class CodeMap:
    """Maps code objects to places: code under `root` by its file; `aliases` first; files in
    `outside` are not counted (None), nor is anything outside `root`.
    """

    def __init__(
        self,
        root: str | Path,
        aliases: Mapping[CodeType, Place] | None = None,
        outside: Iterable[str] = (),
    ) -> None:
        self.root = os.fspath(root).rstrip(os.sep)
        self._prefix = self.root + os.sep
        self._name = os.path.basename(self.root)
        self._outside = frozenset(outside)
        self._cache: dict[CodeType, Place | None] = dict(aliases or {})
        self._made: dict[CodeType, Place | None] = {}  # code generated from strings

    def place(self, code: CodeType) -> Place | None:
        try:
            return self._cache[code]
        except KeyError:
            pass
        name = code.co_filename
        found = None
        if name.startswith(self._prefix) and name.endswith(".py") and name not in self._outside:
            found = place_of(name[len(self._prefix) :], self._name)
        self._cache[code] = found
        return found

    def generated(self, frame: FrameType) -> Place | None:
        """The place of a method generated from a string (a dataclass's `__init__`, `__eq__`,
        ...): the module of the class that holds it, when that class is agentcron's.
        """
        code = frame.f_code
        try:
            return self._made[code]
        except KeyError:
            pass
        found = None
        if code.co_argcount:
            first = frame.f_locals.get(code.co_varnames[0])
            for cls in (first if isinstance(first, type) else type(first)).__mro__:
                method = inspect.getattr_static(cls, code.co_name, None)
                if getattr(method, "__code__", None) is code:
                    module = cls.__module__
                    if module == self._name or module.startswith(self._name + "."):
                        dotted = module.removeprefix(self._name).lstrip(".")
                        name = dotted or self._name
                        found = Place(name.split(".")[0], name)
                    break
        self._made[code] = found
        return found


# -- counting -----------------------------------------------------------------------------------


# The modules of plain records and typed events, before and after they moved to `domain/`:
# building a record or an event is data, not a hop of control, so the tables also show the
# crossings without the calls into these (a fair before/after across the move).
DATA_MODULES = ("domain", "store.models", "events")


def is_data(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in DATA_MODULES)


@dataclass
class FlowCount:
    """What one traced window saw (see the module docstring for the rule)."""

    calls: int = 0  # fresh calls of agentcron code in the flow
    entries: int = 0  # of those, calls from outside agentcron (the driver)
    crossings: int = 0
    into_data: int = 0  # of those, calls into plain records and events (DATA_MODULES)
    by_thread: Counter[str] = field(default_factory=Counter)
    pairs: Counter[tuple[str, str]] = field(default_factory=Counter)
    packages: set[str] = field(default_factory=set)
    modules: set[str] = field(default_factory=set)
    path: list[str] = field(default_factory=list)  # caller, callee of each crossing, deduplicated

    def record(self, thread: str, caller: str | None, callee: Place) -> None:
        """One fresh call of `callee` from package `caller` (None: from outside) on `thread`."""
        self.calls += 1
        self.packages.add(callee.package)
        self.modules.add(callee.module)
        if caller is None:
            self.entries += 1
            return
        if caller == callee.package:
            return
        self.crossings += 1
        if is_data(callee.module):
            self.into_data += 1
        self.by_thread[thread] += 1
        self.pairs[(caller, callee.package)] += 1
        if not self.path or self.path[-1] != caller:
            self.path.append(caller)
        self.path.append(callee.package)

    def hops(self, limit: int | None = None) -> str:
        shown = self.path if not limit else self.path[:limit]
        more = len(self.path) - len(shown)
        return ">".join(shown) + (f">... (+{more})" if more > 0 else "")


class Origin(NamedTuple):
    """Who scheduled the running work: the package to charge calls with no agentcron caller
    on their own chain, and whether the work belongs to the traced flow.
    """

    package: str | None
    in_flow: bool


IDLE = Origin(None, False)
FLOW = Origin(None, True)

_GENERATOR_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
# Where work is handed on in asyncio and in thread pools (the standard library's own code).
_HANDLE_INIT = asyncio.events.Handle.__init__.__code__
_HANDLE_RUN = asyncio.events.Handle._run.__code__
_ITEM_INIT = concurrent.futures.thread._WorkItem.__init__.__code__
_ITEM_RUN = concurrent.futures.thread._WorkItem.run.__code__
_CREATE_TASK = asyncio.base_events.BaseEventLoop.create_task.__code__
# A thread that takes work from a queue (anyio's worker threads run sync tools so): the work
# it got is in the flow when the item was put in by work in the flow.
_QUEUE_PUT = queue.Queue.put.__code__
_QUEUE_GET = queue.Queue.get.__code__
_GENERATED = "<string>"  # the file name of code made by exec (dataclasses' methods)
# Comprehensions are frames of their own in 3.11 and inlined from 3.12: never counted.
_COMPREHENSIONS = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>"})


def _first_resume(code: CodeType) -> int:
    """The offset of a generator code's first RESUME: a frame stopped there has not run yet."""
    for ins in dis.get_instructions(code):
        if ins.opname == "RESUME":
            return ins.offset
    return 0


class Tracer:
    """Counts package crossings of the flow between `start()` and `stop()`.

    `install()` (before any thread of interest starts) makes new threads carry the profile
    function; it does nothing while no window is open.
    """

    def __init__(self, codes: CodeMap) -> None:
        self.codes = codes
        self.active = False
        self.count = FlowCount()
        self._stacks: dict[int, list[Origin]] = {}
        self._base: dict[int, Origin] = {}  # a queue-fed thread's current item
        # Handles and work items made in the window, kept alive (so no id is reused) until stop.
        self._scheduled: dict[int, tuple[object, Origin]] = {}
        self._roots: dict[int, tuple[FrameType, str | None]] = {}  # a task's first coroutine
        self._resume_at: dict[CodeType, int] = {}
        self._threads: dict[int, str] = {}
        self._previous: Any = None

    def install(self) -> None:
        self._previous = threading.getprofile()
        threading.setprofile(self._hook)

    def uninstall(self) -> None:
        threading.setprofile(self._previous)

    def start(self) -> None:
        """Open a window; the calling code (the driver) is in the flow."""
        self.count = FlowCount()
        self._stacks = {threading.get_ident(): [FLOW]}
        self._base.clear()
        self._scheduled.clear()
        self._roots.clear()
        self._threads.clear()
        self.active = True
        sys.setprofile(self._hook)

    def mute(self) -> None:
        """From here on the driver's own work (and what it schedules) is not in the flow."""
        stack = self._stacks.setdefault(threading.get_ident(), [])
        if stack:
            stack[-1] = IDLE
        else:
            stack.append(IDLE)

    def stop(self) -> FlowCount:
        sys.setprofile(None)
        self.active = False
        count = self.count
        self._scheduled.clear()
        self._roots.clear()
        return count

    # The profile function: every event of every traced thread passes here, so it stays short.
    def _hook(self, frame: FrameType, event: str, arg: object) -> None:
        if not self.active:
            return
        if event == "call":
            code = frame.f_code
            place = self.codes.place(code)
            if place is None and code.co_filename == _GENERATED:
                place = self.codes.generated(frame)
            if place is not None:
                self._on_call(frame, place)
            elif code is _HANDLE_RUN or code is _ITEM_RUN:
                self._enter(frame)
            elif code is _HANDLE_INIT or code is _ITEM_INIT:
                self._scheduling(frame)
            elif code is _CREATE_TASK:
                self._task(frame)
            elif code is _QUEUE_PUT:
                self._scheduling(frame, "item")
        elif event == "return":
            code = frame.f_code
            if code is _HANDLE_RUN or code is _ITEM_RUN:
                stack = self._stacks.get(threading.get_ident())
                if stack:
                    stack.pop()
            elif code is _QUEUE_GET:
                self._taken(arg)

    def _top(self) -> Origin:
        ident = threading.get_ident()
        stack = self._stacks.get(ident)
        return stack[-1] if stack else self._base.get(ident, IDLE)

    def _fresh(self, frame: FrameType) -> bool:
        code = frame.f_code
        if not code.co_flags & _GENERATOR_FLAGS:
            return True
        start = self._resume_at.get(code)
        if start is None:
            start = self._resume_at[code] = _first_resume(code)
        return frame.f_lasti <= start

    def _place(self, frame: FrameType) -> Place | None:
        code = frame.f_code
        place = self.codes.place(code)
        if place is None and code.co_filename == _GENERATED:
            place = self.codes.generated(frame)
        return place

    def _caller(self, callee: FrameType, top: Origin) -> str | None:
        """The package that called `callee`: the nearest agentcron frame above it on this
        thread; else, at the bottom of the chain, whoever created the task (for a task's
        coroutines) or scheduled the callback or work item that runs now; None: nobody in
        agentcron (the driver).
        """
        below, frame = callee, callee.f_back
        root = self._roots.get(id(callee))
        if root is not None and root[0] is callee:
            return root[1]
        while frame is not None:
            place = self._place(frame)
            if place is not None:
                return place.package
            root = self._roots.get(id(frame))
            if root is not None and root[0] is frame:
                return root[1]
            code = frame.f_code
            if code is _HANDLE_RUN:
                # A task's step (its coroutine is at the bottom): the waker is not a caller.
                return None if below.f_code.co_flags & _GENERATOR_FLAGS else top.package
            if code is _ITEM_RUN:
                return top.package
            below, frame = frame, frame.f_back
        return top.package

    def _on_call(self, frame: FrameType, place: Place) -> None:
        top = self._top()
        if not top.in_flow or frame.f_code.co_name in _COMPREHENSIONS or not self._fresh(frame):
            return
        ident = threading.get_ident()
        thread = self._threads.get(ident)
        if thread is None:
            thread = self._threads[ident] = thread_label(threading.current_thread())
        self.count.record(thread, self._caller(frame, top), place)

    def _scheduling(self, frame: FrameType, name: str = "self") -> None:
        work = frame.f_locals.get(name)
        top = self._top()
        self._scheduled[id(work)] = (work, Origin(self._caller(frame, top), top.in_flow))

    def _task(self, frame: FrameType) -> None:
        coro = frame.f_locals.get("coro")
        first = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if isinstance(first, FrameType):
            self._roots[id(first)] = (first, self._caller(frame, self._top()))

    def _taken(self, item: object) -> None:
        """A thread took `item` from a queue: until its next take it works for whoever put
        the item in (its base origin: Handles and work items it runs stack above it).
        """
        found = self._scheduled.get(id(item))
        self._base[threading.get_ident()] = (
            found[1] if found is not None and found[0] is item else IDLE
        )

    def _enter(self, frame: FrameType) -> None:
        work = frame.f_locals.get("self")
        found = self._scheduled.get(id(work))
        origin = found[1] if found is not None and found[0] is work else IDLE
        self._stacks.setdefault(threading.get_ident(), []).append(origin)


def thread_label(thread: threading.Thread) -> str:
    """A thread's name without a pool's index; the main thread is the event loop's."""
    if thread is threading.main_thread():
        return "loop"
    return re.sub(r"_\d+$", "", thread.name)


# -- structure: modules and the package import graph -------------------------------------------


@dataclass
class Structure:
    modules: int
    largest: list[tuple[str, int]]  # (relative path, lines)
    subpackages: list[str]
    top_modules: list[str]
    edges: dict[tuple[str, str], set[str]]  # (from, to) -> importing modules (relative paths)
    runtime_edges: dict[tuple[str, str], set[str]]  # the same without TYPE_CHECKING imports
    cycles: list[list[str]]
    runtime_cycles: list[list[str]]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement in `tree`, with whether it sits under `if TYPE_CHECKING:`."""

    def walk(
        node: ast.AST, typing_only: bool
    ) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, typing_only
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for stmt in node.body:
                yield from walk(stmt, True)
            for stmt in node.orelse:
                yield from walk(stmt, typing_only)
            return
        for child in ast.iter_child_nodes(node):
            yield from walk(child, typing_only)

    yield from walk(tree, False)


def import_targets(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, exists: Callable[[str], bool]
) -> list[str]:
    """Dotted names (rooted at the root package) of the agentcron modules `node` imports, as
    seen from `module` (dotted, root-relative: `engine.clock`; "" for the root `__init__`).
    `exists(dotted)` says whether a module or package of that root-relative name exists.
    """
    found: list[str] = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name == ROOT_PACKAGE or alias.name.startswith(ROOT_PACKAGE + "."):
                found.append(alias.name.removeprefix(ROOT_PACKAGE).lstrip("."))
        return found
    if node.level:
        here = module.split(".") if module else []
        if not is_package:
            here = here[:-1]
        up = node.level - 1
        if up > len(here):
            return found
        base_parts = here[: len(here) - up] if up else here
        base = ".".join([*base_parts, *([node.module] if node.module else [])])
    elif node.module and (
        node.module == ROOT_PACKAGE or node.module.startswith(ROOT_PACKAGE + ".")
    ):
        base = node.module.removeprefix(ROOT_PACKAGE).lstrip(".")
    else:
        return found
    for alias in node.names:
        sub = f"{base}.{alias.name}" if base else alias.name
        found.append(sub if alias.name != "*" and exists(sub) else base)
    return found


def package_graph(
    root: Path,
) -> tuple[dict[tuple[str, str], set[str]], dict[tuple[str, str], set[str]]]:
    """Package import edges (all imports; without TYPE_CHECKING ones) -> importing files."""
    files = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    rels = [p.relative_to(root).as_posix() for p in files]
    known = {place_of(r, root.name).module for r in rels}

    def exists(dotted: str) -> bool:
        return (dotted or root.name) in known

    edges: dict[tuple[str, str], set[str]] = defaultdict(set)
    runtime: dict[tuple[str, str], set[str]] = defaultdict(set)
    for path, rel in zip(files, rels, strict=True):
        place = place_of(rel, root.name)
        dotted = "" if place.module == root.name else place.module
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, typing_only in _imports(tree):
            for target in import_targets(node, dotted, rel.endswith("__init__.py"), exists):
                to = target.split(".")[0] if target else root.name
                if root.name in (place.package, to) or to == place.package:
                    continue
                edges[(place.package, to)].add(rel)
                if not typing_only:
                    runtime[(place.package, to)].add(rel)
    return dict(edges), dict(runtime)


def strongly_connected(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, each sorted; the list sorted too."""
    succ: dict[str, set[str]] = defaultdict(set)
    every = set(nodes)
    for a, b in edges:
        succ[a].add(b)
        every |= {a, b}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(succ[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            found.append(sorted(component))

    for v in sorted(every):
        if v not in index:
            visit(v)
    return sorted(found)


def package_cycles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one package (each is a cycle or more)."""
    return [c for c in strongly_connected((), edges) if len(c) > 1]


def structure(root: Path) -> Structure:
    files = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    sizes = sorted(
        (
            (p.relative_to(root).as_posix(), len(p.read_text(encoding="utf-8").splitlines()))
            for p in files
        ),
        key=lambda item: (-item[1], item[0]),
    )
    subpackages = sorted(
        {p.relative_to(root).parts[0] for p in files if len(p.relative_to(root).parts) > 1}
    )
    top = sorted(p.stem for p in files if p.parent == root and p.name != "__init__.py")
    edges, runtime = package_graph(root)
    return Structure(
        modules=len(files),
        largest=sizes[:5],
        subpackages=subpackages,
        top_modules=top,
        edges=edges,
        runtime_edges=runtime,
        cycles=package_cycles(edges),
        runtime_cycles=package_cycles(runtime),
    )


# -- the flows --------------------------------------------------------------------------------

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
QUIET = timedelta(hours=1)  # moved untraced before a fire: every periodic timer runs and re-arms
LEAD = timedelta(milliseconds=250)  # a fire is due this long after the quiet jump
TOOL = "archive_logs"
ASK_TOOL = f"use {TOOL} with name=build.log"


def find_public(name: str, check: Callable[[Any], bool]) -> Any:
    """THE ONE PLACE that reaches past the public API: the `Outcome` a Runner returns is not
    exported from `agentcron` yet. Taken from `agentcron` if it is there, else from whichever
    loaded agentcron module defines it (so a move does not break the bench).
    """
    import agentcron

    candidates: list[ModuleType] = [agentcron]
    candidates += [m for n, m in sorted(sys.modules.items()) if n.startswith(f"{ROOT_PACKAGE}.")]
    for module in candidates:
        value = getattr(module, name, None)
        if value is not None and check(value):
            return value
    raise RuntimeError(f"no agentcron module defines {name}: the bench needs updating")


class QuietRunner:
    """A minimal Runner: its history is read as the default window says; it answers at once."""

    def __init__(self, outcome: Any) -> None:
        self._outcome = outcome  # made once: the runner itself calls nothing while traced

    async def run_turn(self, session: Any, turn: Any, events: Any) -> Any:
        return self._outcome


class Seen:
    """Every event of a cron, for the driver to wait on (matched by the event's `type`)."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self._changed = asyncio.Event()

    def __call__(self, event: Any) -> None:
        self.events.append(event)
        self._changed.set()

    async def first(self, kind: str, limit: float = 30.0, **attrs: Any) -> Any:
        async with asyncio.timeout(limit):
            while True:
                for event in self.events:
                    if getattr(event, "type", None) == kind and all(
                        getattr(event, k, None) == v for k, v in attrs.items()
                    ):
                        return event
                self._changed.clear()
                await self._changed.wait()


@dataclass
class FlowRun:
    flow: str
    run: int
    count: FlowCount


def archive_logs(name: str) -> str:
    """Move a log file into the archive."""
    return f"archived {name}"


class Bench:
    """Drives the flows on SQLite in `tmp` and counts them with `tracer`."""

    def __init__(self, tracer: Tracer, tmp: Path, repeat: int) -> None:
        self.tracer = tracer
        self.tmp = tmp
        self.repeat = repeat
        self.results: list[FlowRun] = []

    async def _cron(self, name: str, clock: Any, **kw: Any) -> tuple[Any, Seen]:
        from agentcron import AgentCron

        cron = AgentCron(db=self.tmp / f"{name}.db", clock=clock, **kw)
        seen = Seen()
        cron.subscribe(seen)
        await cron.start()
        return cron, seen

    async def _session(self, cron: Any, seen: Seen, key: str, hello: str = "hello") -> None:
        """A fresh session holding one exchange (made untraced)."""
        from agentcron.testing import wait_settled

        await cron.sessions.create(key)
        turn = await cron.sessions.send(key, hello)
        await seen.first("stream_end", turn_id=turn.id)
        await wait_settled(cron.engine)

    async def _window(
        self, flow: str, run: int, body: Callable[[], Any], cron: Any, seen: Seen
    ) -> None:
        """Trace `body` (run > 0) or run it untraced (the warm-up, run 0), then settle."""
        from agentcron.testing import wait_settled

        seen.events.clear()
        seen_end: Any = None
        if run:
            self.tracer.start()
        try:
            seen_end = await body()
            if run:
                self.tracer.mute()
            await wait_settled(cron.engine)
        finally:
            count = self.tracer.stop() if run else None
        status = getattr(seen_end, "status", None)
        if status != "succeeded":
            raise RuntimeError(f"{flow}: the turn ended {status!r}, not succeeded")
        if count is not None:
            self.results.append(FlowRun(flow, run, count))
            log(f"{flow} #{run}: {count.crossings} crossings")

    async def core_flows(self, flows: set[str]) -> None:
        from agentcron.testing import FakeClock, wait_settled

        outcome_type = find_public(
            "Outcome", lambda v: inspect.isclass(v) and hasattr(v, "succeeded")
        )
        clock = FakeClock(T0)
        cron, seen = await self._cron(
            "core", clock, runner=QuietRunner(outcome_type.succeeded("ok"))
        )
        try:
            for run in range(self.repeat + 1):
                if "fire" in flows:
                    key = f"api:fire-{run}"
                    await self._session(cron, seen, key)
                    clock.advance(QUIET)
                    await wait_settled(cron.engine)
                    due = clock.now() + LEAD
                    await cron.jobs.create(
                        name=f"fire {run}", when=due.isoformat(), message="ping", session_key=key
                    )
                    await wait_settled(cron.engine)

                    async def fire(key: str = key, due: datetime = due) -> Any:
                        clock.set(due)
                        return await seen.first("stream_end", session_key=key)

                    await self._window("fire", run, fire, cron, seen)
                if "message" in flows:
                    key = f"api:message-{run}"
                    await self._session(cron, seen, key)

                    async def message(key: str = key) -> Any:
                        turn = await cron.sessions.send(key, "how are you?")
                        return await seen.first("stream_end", turn_id=turn.id)

                    await self._window("message", run, message, cron, seen)
        finally:
            await cron.close()

    async def approval_flow(self) -> None:
        from agentcron.testing import FakeClock

        cron, seen = await self._cron(
            "agent",
            FakeClock(T0),
            runner=None,
            model="offline",
            tools=[archive_logs],
            tool_policy={TOOL: "approve"},
        )
        try:
            for run in range(self.repeat + 1):
                key = f"api:approval-{run}"
                await self._session(cron, seen, key)

                async def approval(key: str = key) -> Any:
                    turn = await cron.sessions.send(key, ASK_TOOL)
                    asked = await seen.first("approval_requested", turn_id=turn.id)
                    await cron.approvals.decide(asked.approval_id, "approve", by="bench")
                    return await seen.first("stream_end", turn_id=turn.id)

                await self._window("approval", run, approval, cron, seen)
                tool = [e for e in seen.events if getattr(e, "type", None) == "tool_call"][-1:]
                if not tool or tool[0].result != "archived build.log":
                    raise RuntimeError("approval: the gated tool did not run")
        finally:
            await cron.close()


def clock_aliases(tmp: Path) -> tuple[dict[CodeType, Place], str, str]:
    """The FakeClock's methods counted as code of the system clock's module (the clock an
    `AgentCron` given no clock uses); returns the aliases, that module and the testing file.
    """
    import agentcron
    import agentcron.testing
    from agentcron import AgentCron
    from agentcron.testing import FakeClock

    root = Path(agentcron.__file__).parent
    probe = AgentCron(db=tmp / "probe.db", runner=_noop)  # never started
    system = inspect.getsourcefile(type(probe.clock)) or ""
    place = place_of(os.path.relpath(system, root), root.name)
    codes = {
        value.__code__: place
        for value in vars(FakeClock).values()
        if inspect.isfunction(value) and value.__code__.co_filename == agentcron.testing.__file__
    }
    return codes, place.module, agentcron.testing.__file__


async def _noop(trigger: Any) -> str:
    return "ok"


def log(message: str) -> None:
    print(f"[crossings {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- output ---------------------------------------------------------------------------------


def git_commit(path: Path) -> str:
    """The commit checked out at `path`, and the last one that changed the code there."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(path), *args], capture_output=True, text=True, check=True
        )
        return done.stdout.strip()

    try:
        head, dirty = git("rev-parse", "--short", "HEAD"), git("status", "--porcelain", "--", ".")
        changed = git("log", "-1", "--format=%h", "--", ".")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    if dirty:
        return f"{head} with uncommitted changes"
    return head if changed == head else f"{head} (its source last changed in {changed})"


def render(
    root: Path,
    runs: list[FlowRun],
    shape: Structure,
    clock_module: str,
    hops: bool,
    hop_limit: int,
    command: str = "python -m bench crossings",
) -> str:
    out = [
        "# agentcron: package crossings and structure",
        "",
        f"agentcron at `{root}`, commit {git_commit(root)}; Python {platform.python_version()}; "
        f"`{command}` (the counting rule is the docstring of bench/crossings.py).",
        "",
    ]
    if runs:
        out += [
            "## Package crossings per flow",
            "",
            "| flow | run | crossings | without records | by thread | entries | calls | packages "
            "| modules |",
            "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
        ]
        for r in runs:
            c = r.count
            threads = ", ".join(
                f"{t} {n}" for t, n in sorted(c.by_thread.items(), key=lambda i: (-i[1], i[0]))
            )
            out.append(
                f"| {r.flow} | {r.run} | {c.crossings} | {c.crossings - c.into_data} | "
                f"{threads or '-'} | {c.entries} | "
                f"{c.calls} | {len(c.packages)} | {len(c.modules)} |"
            )
        out.append("")
        by_flow: dict[str, list[FlowCount]] = defaultdict(list)
        for r in runs:
            by_flow[r.flow].append(r.count)
        same = []
        for flow, counts in by_flow.items():
            figures = {(c.crossings, c.calls, c.entries, len(c.modules)) for c in counts}
            paths = {tuple(c.path) for c in counts}
            verdict = "identical" if len(figures) == 1 and len(paths) == 1 else "differ"
            same.append(f"{flow}: {len(counts)} runs {verdict}")
        out += [
            "Runs: " + "; ".join(same) + ". `crossings`: calls whose caller is in another "
            "package; `without records`: those less the calls into plain records and events "
            f"(modules {', '.join(DATA_MODULES)}); `entries`: calls from the driver (the "
            "bench); `calls`: every fresh call of agentcron code in the flow; `packages` / "
            "`modules`: touched. The FakeClock is "
            f"counted as `{clock_module}`.",
            "",
        ]
    units = len(shape.subpackages) + len(shape.top_modules)
    out += [
        "## Structure",
        "",
        "| figure | value |",
        "| --- | ---: |",
        f"| modules (`.py` files under `{root.name}/`) | {shape.modules} |",
        f"| packages (subpackages + top-level modules) | {units} ({len(shape.subpackages)} + "
        f"{len(shape.top_modules)}) |",
        f"| package import edges | {len(shape.edges)} |",
        f"| package cycles (every import) | {len(shape.cycles)} |",
        f"| package cycles (without `if TYPE_CHECKING:` imports) | {len(shape.runtime_cycles)} |",
        "",
        "Largest modules:",
        "",
        "| module | lines |",
        "| --- | ---: |",
        *(f"| `{rel}` | {lines:,} |" for rel, lines in shape.largest),
        "",
        f"Subpackages: {', '.join(shape.subpackages)}. Top-level modules: "
        f"{', '.join(shape.top_modules)}.",
        "",
    ]
    for title, cycles, edges in (
        ("every import", shape.cycles, shape.edges),
        ("without TYPE_CHECKING imports", shape.runtime_cycles, shape.runtime_edges),
    ):
        if not cycles:
            continue
        out.append(
            f"Package cycles ({title}): each strongly connected component, with its edges "
            "and the modules that make them:"
        )
        out.append("")
        for i, component in enumerate(cycles, 1):
            out.append(f"{i}. {', '.join(component)}")
            members = set(component)
            for (a, b), files in sorted(edges.items()):
                if a in members and b in members:
                    out.append(f"   - {a} -> {b}: {', '.join(f'`{f}`' for f in sorted(files))}")
        out.append("")
    if hops and runs:
        out += ["## Hops", ""]
        first: dict[str, FlowCount] = {}
        for r in runs:
            c = r.count
            before = first.setdefault(r.flow, c)
            if before is not c and (before.pairs, before.path) == (c.pairs, c.path):
                out += [f"### {r.flow} #{r.run}: the same pairs and path as #1", ""]
                continue
            pairs = ", ".join(
                f"{a}>{b} {n}" for (a, b), n in sorted(c.pairs.items(), key=lambda i: (-i[1], i[0]))
            )
            out += [
                f"### {r.flow} #{r.run}",
                "",
                f"- packages: {', '.join(sorted(c.packages))}",
                f"- modules: {', '.join(sorted(c.modules))}",
                f"- crossings by pair: {pairs}",
                f"- path ({len(c.path)} hops): `{c.hops(hop_limit)}`",
                "",
            ]
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench crossings",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--repeat", type=int, default=2, help="traced runs per flow (default 2)")
    parser.add_argument("--flows", default="fire,message,approval", help="comma list of flows")
    parser.add_argument("--hops", action="store_true", help="print each run's pairs and path")
    parser.add_argument(
        "--hop-limit", type=int, default=120, help="hops of a path printed (0: all)"
    )
    parser.add_argument("--structure-only", action="store_true", help="no flows")
    parser.add_argument("--out", type=Path, help="also write the markdown to this file")
    args = parser.parse_args(argv)
    flows = {f.strip() for f in args.flows.split(",") if f.strip()}
    unknown = flows - {"fire", "message", "approval"}
    if unknown:
        parser.error(f"unknown flows: {', '.join(sorted(unknown))}")
    import agentcron

    root = Path(agentcron.__file__).parent
    shape = structure(root)
    runs: list[FlowRun] = []
    clock_module = ""
    if not args.structure_only:
        os.environ["AGENTCRON_OFFLINE_WPS"] = "0"  # the offline model answers without pacing
        tmp = Path(tempfile.mkdtemp(prefix="agentcron-crossings-"))
        aliases, clock_module, testing_file = clock_aliases(tmp)
        tracer = Tracer(CodeMap(root, aliases, outside=[testing_file]))
        tracer.install()  # before any database thread starts
        started = time.monotonic()
        log(f"tracing {', '.join(sorted(flows))} ({args.repeat} runs each after a warm-up)")
        try:
            bench = Bench(tracer, tmp, args.repeat)

            async def drive() -> None:
                if flows & {"fire", "message"}:
                    await bench.core_flows(flows)
                if "approval" in flows:
                    await bench.approval_flow()

            asyncio.run(drive())
        finally:
            tracer.uninstall()
            shutil.rmtree(tmp, ignore_errors=True)
        log(f"flows done in {time.monotonic() - started:.1f} s")
        order = {"fire": 0, "message": 1, "approval": 2}
        runs = sorted(bench.results, key=lambda r: (order[r.flow], r.run))
    command = " ".join(["python -m bench crossings", *(argv if argv is not None else sys.argv[1:])])
    text = render(root, runs, shape, clock_module, args.hops, args.hop_limit, command)
    print(text, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
