"""bench/crossings.py: the crossing count on a tiny package traced for real, and the package
cycle finder on small import graphs.
"""

from __future__ import annotations

import asyncio
import queue
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from bench.crossings import (
    CodeMap,
    FlowCount,
    Place,
    Tracer,
    package_cycles,
    package_graph,
    place_of,
)

FAKE = "crossfake"  # the tiny traced package: a/x.py calls into b/y.py and top.py

SOURCES = {
    "__init__.py": "",
    "a/__init__.py": "",
    "a/x.py": """
        import asyncio

        from crossfake import top
        from crossfake.b import y


        def sync_flow():
            y.work()  # a>b, then b>top inside
            y.Point(1, 2)  # a>b: a dataclass's generated __init__ counts as b's code
            y.work()  # a>b, b>top
            return local()  # a>a: no crossing


        def local():
            return 1


        async def async_flow(pool, jobs, done):
            loop = asyncio.get_running_loop()
            await y.slow()  # a>b once: the two resumptions of slow() are not calls
            await loop.create_task(y.slow())  # a>b: the task's creator is the caller
            loop.call_soon(y.work)  # a>b when it runs (and b>top inside)
            await asyncio.sleep(0)
            await loop.run_in_executor(pool, top.leaf)  # a>top, on the pool's thread
            jobs.put((top.leaf, done))  # a>top, on the queue's thread
            await done
    """,
    "b/__init__.py": "",
    "b/y.py": """
        import asyncio
        from dataclasses import dataclass

        from crossfake import top


        @dataclass
        class Point:
            x: int
            y: int


        def work():
            return top.leaf()


        async def slow():
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            return 1


        def finish(future):
            future.set_result(None)
    """,
    "top.py": """
        import asyncio

        from crossfake.b import y


        def leaf():
            return 1


        async def noise():
            while True:  # not the flow's: never counted, though it runs in the window
                y.work()
                await asyncio.sleep(0.001)
    """,
}


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Any, Any]]:
    root = tmp_path / FAKE
    for rel, text in SOURCES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    import crossfake.a.x  # type: ignore[import-not-found]
    import crossfake.top  # type: ignore[import-not-found]

    yield root, crossfake.a.x, crossfake.top
    for name in [n for n in sys.modules if n == FAKE or n.startswith(FAKE + ".")]:
        del sys.modules[name]


def test_a_file_is_placed_in_its_first_directory_or_as_a_top_level_module() -> None:
    assert place_of("engine/clock.py") == Place("engine", "engine.clock")
    assert place_of("store/__init__.py") == Place("store", "store")
    assert place_of("server/routes/jobs.py") == Place("server", "server.routes.jobs")
    assert place_of("app.py") == Place("app", "app")
    assert place_of("__init__.py") == Place("agentcron", "agentcron")


def test_a_crossing_is_a_call_into_another_package_and_an_entry_is_not_one() -> None:
    count = FlowCount()
    a, b, c = Place("a", "a.m"), Place("b", "b.m"), Place("c", "c")
    for thread, caller, callee in [
        ("loop", None, a),  # the driver calls in
        ("loop", "a", a),
        ("loop", "a", b),
        ("db", "b", b),
        ("db", "b", a),
        ("loop", "a", c),
        ("loop", "c", a),
    ]:
        count.record(thread, caller, callee)
    assert (count.calls, count.entries, count.crossings) == (7, 1, 4)
    assert count.by_thread == {"loop": 3, "db": 1}
    assert count.pairs == {("a", "b"): 1, ("b", "a"): 1, ("a", "c"): 1, ("c", "a"): 1}
    assert count.path == ["a", "b", "a", "c", "a"]
    assert count.hops() == "a>b>a>c>a"
    assert count.hops(2) == "a>b>... (+3)"
    assert count.packages == {"a", "b", "c"}
    assert count.modules == {"a.m", "b.m", "c"}


def test_a_traced_sync_flow_counts_each_call_into_another_package(
    fake: tuple[Path, Any, Any],
) -> None:
    root, x, _ = fake
    tracer = Tracer(CodeMap(root))
    tracer.start()
    try:
        x.sync_flow()
        tracer.mute()
        x.sync_flow()  # muted: the driver's own work after the flow is not counted
    finally:
        count = tracer.stop()
    assert count.entries == 1
    assert count.pairs == {("a", "b"): 3, ("b", "top"): 2}
    assert count.crossings == 5
    assert count.path == ["a", "b", "top", "a", "b", "a", "b", "top"]
    assert count.modules == {"a.x", "b.y", "top"}
    assert count.by_thread == {"loop": 5}


async def test_tasks_callbacks_and_threads_are_charged_to_who_made_them_and_noise_is_not(
    fake: tuple[Path, Any, Any],
) -> None:
    root, x, top = fake
    y = sys.modules[f"{FAKE}.b.y"]
    tracer = Tracer(CodeMap(root))
    tracer.install()  # before the threads below start
    jobs: queue.Queue[tuple[Callable[[], object], asyncio.Future[None]] | None] = queue.Queue()
    loop = asyncio.get_running_loop()

    def worker() -> None:  # like anyio's worker threads: take an item, run it, report back
        while (item := jobs.get()) is not None:
            fn, done = item
            fn()
            loop.call_soon_threadsafe(done.set_result, None)

    taker = threading.Thread(target=worker, name="taker")
    taker.start()
    noise = asyncio.create_task(top.noise())
    try:
        with ThreadPoolExecutor(1, thread_name_prefix="pool") as pool:
            await asyncio.sleep(0.005)  # the noise is running before the window opens
            tracer.start()
            try:
                await x.async_flow(pool, jobs, loop.create_future())
                woken = loop.create_future()
                loop.call_soon(y.finish, woken)  # an entry: the driver scheduled it
                await woken  # b's code wakes the driver ...
                x.local()  # ... which is not b's caller for that: an entry, not a crossing
                await asyncio.sleep(0.005)  # the noise goes on inside the window
            finally:
                count = tracer.stop()
    finally:
        noise.cancel()
        jobs.put(None)
        taker.join()
        tracer.uninstall()
    assert count.entries == 3
    assert count.pairs == {("a", "b"): 3, ("b", "top"): 1, ("a", "top"): 2}
    assert count.by_thread == {"loop": 4, "pool": 1, "taker": 1}
    assert count.crossings == 6


def test_the_cycle_finder_finds_a_cycle_and_only_a_cycle() -> None:
    assert package_cycles([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("e", "a")]) == [
        ["a", "b", "c"]
    ]
    assert package_cycles([("a", "b"), ("b", "c"), ("a", "c"), ("d", "a")]) == []
    assert package_cycles([("a", "b"), ("b", "a"), ("c", "d"), ("d", "c")]) == [
        ["a", "b"],
        ["c", "d"],
    ]


def test_the_import_graph_reads_absolute_relative_and_type_checking_imports(
    tmp_path: Path,
) -> None:
    root = tmp_path / "agentcron"
    files = {
        "__init__.py": "from agentcron.app import App\n",
        "app.py": "import agentcron.views\n\nclass App: ...\n",
        "views.py": "from agentcron import engine\n",
        "engine/__init__.py": "",
        "engine/loop.py": "def f():\n    from agentcron.sessions.lane import g\n",
        "sessions/lane.py": (
            "from typing import TYPE_CHECKING\n\nfrom . import util\n"
            "if TYPE_CHECKING:\n    from ..engine import loop\n\ndef g(): ...\n"
        ),
        "sessions/util.py": "from .. import __version__\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    edges, runtime = package_graph(root)
    assert edges == {
        ("app", "views"): {"app.py"},
        ("views", "engine"): {"views.py"},
        ("engine", "sessions"): {"engine/loop.py"},
        ("sessions", "engine"): {"sessions/lane.py"},
    }
    assert set(runtime) == set(edges) - {("sessions", "engine")}
    assert package_cycles(edges) == [["engine", "sessions"]]
    assert package_cycles(runtime) == []
