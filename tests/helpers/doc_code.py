"""The code blocks of the documentation, run as written: each marked python block of a page
loaded as a module of its own (docs/extending.md's examples, docs/integrations.md's recipes), and
every block of the README and docs/*.md found with its mark (tests/integration/test_doc_blocks.py
runs the python ones and checks the `agentcron` commands of the shell ones).
"""

from __future__ import annotations

import re
import shlex
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.core import TyperGroup, TyperOption

Command = Any  # a command of typer's own click (typer._click): a group or a leaf


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


# Every code block of the README and the docs (tests/integration/test_doc_blocks.py): its page,
# line, language and the mark on the line before it.

_FENCE = re.compile(r"^( *)(```+)(\S*)\s*$")
_MARK = re.compile(r"^\s*<!--\s*(.*?)\s*-->\s*$")
_NO_TEST = re.compile(r"^no-test:\s*(\S.*)$")


@dataclass(frozen=True)
class CodeBlock:
    """A fenced block of a page: its opening fence's line (1-based), its language (the fence's
    info string, "" for none), its code (dedented to the fence) and its mark: the HTML comment
    on the line before the fence ("" for none), e.g. `no-test: why` or `example: NAME`."""

    page: Path
    line: int
    lang: str
    code: str
    mark: str

    @property
    def name(self) -> str:
        return f"{self.page.name}:{self.line}"

    @property
    def untested_because(self) -> str | None:
        """Why the block is not run, from a `<!-- no-test: why -->` mark (None without one)."""
        found = _NO_TEST.match(self.mark)
        return found.group(1) if found else None


def code_blocks(page: Path) -> list[CodeBlock]:
    """Every fenced block of the page, in order; an unclosed fence is an error."""
    lines = page.read_text("utf-8").splitlines()
    blocks: list[CodeBlock] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        indent, ticks, lang = fence.groups()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == ticks), None)
        assert end is not None, f"{page.name}:{i + 1}: a code block that is never closed"
        before = _MARK.match(lines[i - 1]) if i else None
        code = "".join(line.removeprefix(indent) + "\n" for line in lines[i + 1 : end])
        blocks.append(CodeBlock(page, i + 1, lang, code, before.group(1) if before else ""))
        i = end + 1
    return blocks


def doc_pages(root: Path) -> list[Path]:
    """The pages whose code blocks are tested: the README and every page of docs/."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


# `agentcron` (or `.venv/bin/agentcron`) as a command word: at a line's start, after a space,
# `(` or `"` (so not inside a URL such as `postgresql://agentcron:...@db/agentcron`).
_INVOCATION = re.compile(r"(?:^|(?<=[\s(\"]))(?:[\w.~-]*/)*agentcron(?=\s|$)")
_COMMENT = re.compile(r"(?:^|\s)#.*$")
_END = re.compile(r";|&&|\|\|")


def agentcron_invocations(shell: str) -> list[list[str]]:
    """The words after each `agentcron` of a shell block (comments dropped, continued lines
    joined, up to `;`, `&&`, `||` or the `)` of a `$(...)`); a lone `|` stays a word."""
    calls: list[list[str]] = []
    for line in shell.replace("\\\n", " ").splitlines():
        line = _COMMENT.sub("", line)
        for found in _INVOCATION.finditer(line):
            rest = line[found.end() :]
            if line[: found.start()].endswith("$("):
                rest = rest.split(")", 1)[0]
            calls.append(shlex.split(_END.split(rest, 1)[0]))
    return calls


def _option(command: Command, word: str) -> TyperOption | None:
    options = (p for p in command.params if isinstance(p, TyperOption))
    return next((o for o in options if word in (*o.opts, *o.secondary_opts)), None)


def cli_problems(cli: TyperGroup, words: list[str]) -> list[str]:
    """What in `agentcron WORDS` the command line `cli` (`typer.main.get_command(app)`) lacks: a subcommand or an
    option. Optional parts may be in brackets (`[--db FILE|URL]`), alternatives separated by
    `|`: a lone `|` followed by an option continues the same command, one followed by a
    sibling subcommand names that one (`jobs show ID | run ID`); any other `|` is a pipe."""
    problems: list[str] = []
    path: list[Command] = [cli]
    names = ["agentcron"]
    value_next = False
    for i, raw in enumerate(words):
        if raw == "|":
            following = words[i + 1] if i + 1 < len(words) else ""
            parent = path[-2] if len(path) > 1 else None
            if following.lstrip("[").startswith("-"):
                continue
            if isinstance(parent, TyperGroup) and following in parent.commands:
                path.pop()
                names.pop()
                continue
            break  # a pipe into another program
        word = raw.strip("[]")
        if value_next or not word:
            value_next = False
            continue
        command = path[-1]
        if word.startswith("-"):
            for alternative in word.split("|"):
                name = alternative.split("=", 1)[0]
                option = _option(command, name)
                if option is None and name not in ("--help", "-h"):
                    problems.append(f"`{' '.join(names)}` has no option {name}")
                elif option is not None and not option.is_flag:
                    value_next = "=" not in alternative
            if problems:
                break  # whether an unknown option takes a value is unknown: stop here
        elif isinstance(command, TyperGroup):
            sub = command.commands.get(word)
            if sub is None:
                problems.append(f"`{' '.join(names)}` has no command {word!r}")
                break
            path.append(sub)
            names.append(word)
    if isinstance(path[-1], TyperGroup) and not problems:
        problems.append(f"`{' '.join(names)}` names a group, not a command")
    return problems
