"""The python blocks of a documentation page, run as written: each marked block is loaded as a
module of its own (docs/extending.md's examples, docs/integrations.md's recipes).
"""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def python_blocks(page: Path, marker: str) -> dict[str, str]:
    """Each `<!-- {marker}: NAME -->` python block of the page by NAME; every python block of
    the page must carry the marker."""
    text = page.read_text("utf-8")
    found = dict(re.findall(rf"<!-- {marker}: (\S+) -->\n```python\n(.*?)```", text, re.S))
    assert len(found) == text.count("```python"), f"a python block without a {marker} marker"
    return found


@contextmanager
def loaded_blocks(page: Path, marker: str) -> Iterator[Callable[[str], types.ModuleType]]:
    """A loader of the page's blocks by name: each runs as a module, registered until the end
    (so its dataclasses and annotations resolve as a file's would)."""
    loaded: list[str] = []
    prefix = page.stem

    def load(name: str) -> types.ModuleType:
        module = types.ModuleType(f"{prefix}_{name.replace('-', '_')}")
        module.__file__ = f"{page}#{name}"
        sys.modules[module.__name__] = module
        loaded.append(module.__name__)
        code = python_blocks(page, marker)[name]
        exec(compile(code, module.__file__, "exec"), module.__dict__)
        return module

    try:
        yield load
    finally:
        for name in loaded:
            sys.modules.pop(name, None)
