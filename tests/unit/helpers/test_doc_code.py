"""tests/helpers/doc_code.py: a page's marked python blocks, loaded as modules; every block of
the pages with its mark; the `agentcron` commands of a shell block checked against a CLI."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import typer
from typer.core import TyperGroup

from tests.helpers.doc_code import (
    agentcron_invocations,
    cli_problems,
    code_blocks,
    doc_pages,
    loaded_blocks,
    python_blocks,
)

PAGE = """# A page
<!-- recipe: one -->
```python
VALUE = 1
```
text
<!-- recipe: two-words -->
```python
def double() -> int:
    return VALUE * 2
```
"""


def test_blocks_are_found_by_name_and_an_unmarked_one_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    assert python_blocks(page, "recipe") == {
        "one": "VALUE = 1\n",
        "two-words": "def double() -> int:\n    return VALUE * 2\n",
    }
    page.write_text(PAGE + "```python\nx = 1\n```\n")
    with pytest.raises(AssertionError, match="without a recipe marker"):
        python_blocks(page, "recipe")


def test_a_block_runs_as_a_module_registered_until_the_end(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    with loaded_blocks(page, "recipe") as load:
        module = load("one")
        assert module.VALUE == 1
        assert sys.modules["page_one"] is module
        with pytest.raises(NameError):  # each block is a module of its own
            load("two-words").double()
    assert "page_one" not in sys.modules


BLOCKS = """# A page
<!-- no-test: a fragment -->
```python
x = undefined
```

- in a list:

  ```sh
  agentcron jobs add --session s   # a comment
  ```

```
plain
```
"""


def test_every_block_is_found_with_its_line_language_and_mark(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(BLOCKS)
    first, listed, plain = code_blocks(page)
    assert (first.name, first.lang, first.code, first.untested_because) == (
        "page.md:3",
        "python",
        "x = undefined\n",
        "a fragment",
    )
    assert (listed.line, listed.lang, listed.mark, listed.untested_because) == (9, "sh", "", None)
    assert listed.code == "agentcron jobs add --session s   # a comment\n"  # dedented
    assert (plain.lang, plain.code) == ("", "plain\n")
    page.write_text(BLOCKS + "```python\nnever closed\n")
    with pytest.raises(AssertionError, match=r"page.md:16: a code block that is never closed"):
        code_blocks(page)


def test_the_pages_are_the_readme_and_the_docs(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    for name in ("README.md", "docs/b.md", "docs/a.md", "docs/notes.txt"):
        (tmp_path / name).write_text("")
    assert doc_pages(tmp_path) == [tmp_path / n for n in ("README.md", "docs/a.md", "docs/b.md")]


def test_the_agentcron_invocations_of_a_shell_block() -> None:
    shell = (
        "T=$(agentcron token); H=x   # agentcron in a comment\n"
        '.venv/bin/agentcron jobs add --message "check the build" \\\n  --when 9 && echo ok\n'
        "export AGENTCRON_DB=postgresql://agentcron:pw@db/agentcron AGENTCRON_TOKEN=x\n"
        'S="$(agentcron token --runner)" npm start;  agentcron sessions list | show KEY\n'
    )
    assert agentcron_invocations(shell) == [
        ["token"],
        ["jobs", "add", "--message", "check the build", "--when", "9"],
        ["token", "--runner"],
        ["sessions", "list", "|", "show", "KEY"],
    ]


def small_cli() -> TyperGroup:
    root = typer.Typer()
    jobs = typer.Typer()
    root.add_typer(jobs, name="jobs")

    @root.callback()
    def main(config: str = typer.Option("", "--config")) -> None: ...

    @root.command()
    def serve(port: int = 8321, demo: bool = False) -> None: ...

    @jobs.command("list")
    def list_jobs(
        session: str = "", enabled: bool = typer.Option(True, "--enabled/--disabled")
    ) -> None: ...

    @jobs.command("rm")
    def rm(job_id: str) -> None: ...

    command = typer.main.get_command(root)
    assert isinstance(command, TyperGroup)
    return command


@pytest.mark.parametrize(
    ("line", "problems"),
    [
        ("serve --port 1 --demo", []),
        ("[--config FILE] serve [--port 8321] [--demo]", []),
        ("jobs list [--session KEY] [--enabled|--disabled] | rm ID", []),
        ("jobs list --session K | --enabled", []),
        ("jobs list --json | jq .", ["`agentcron jobs list` has no option --json"]),
        ("jobs rm ID | sort", []),  # a pipe into another program
        ("jobs remove ID", ["`agentcron jobs` has no command 'remove'"]),
        ("serve --porte 1", ["`agentcron serve` has no option --porte"]),
        ("--conf F serve", ["`agentcron` has no option --conf"]),
        ("jobs list | --sesion K", ["`agentcron jobs list` has no option --sesion"]),
        ("jobs", ["`agentcron jobs` names a group, not a command"]),
        ("serve --help", []),
    ],
)
def test_the_commands_and_options_a_line_names_must_exist(line: str, problems: list[str]) -> None:
    assert cli_problems(small_cli(), line.split()) == problems
