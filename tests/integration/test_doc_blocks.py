"""Every code block of the README and of docs/*.md, as written (tests/helpers/doc_code.py).

Each python block runs as a script of its own (`python block.py`), in a temporary directory of
its own (so each has its own database and data directory) and must exit 0; a block that cannot
(a fragment, a server that runs until stopped) says why in a `<!-- no-test: why -->` mark. Every
`agentcron ...` command of a shell block must name subcommands and options the CLI has; every
TOML block must parse.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import typer
from standardwebhooks import Webhook
from typer.core import TyperGroup

from agentcron.cli import app
from tests.helpers.doc_code import (
    CodeBlock,
    agentcron_invocations,
    cli_problems,
    code_blocks,
    doc_pages,
)

ROOT = Path(__file__).resolve().parents[2]
BLOCKS = [block for page in doc_pages(ROOT) for block in code_blocks(page)]
PYTHON = [b for b in BLOCKS if b.lang == "python"]
SHELL = [b for b in BLOCKS if b.lang in ("sh", "bash", "shell", "console")]
TOML = [b for b in BLOCKS if b.lang == "toml"]
RUN = [b for b in PYTHON if b.untested_because is None]


def ids(blocks: list[CodeBlock]) -> list[str]:
    return [block.name for block in blocks]


def reader_environment(home: Path) -> dict[str, str]:
    """What a reader who followed the set-up has: this checkout's package, no settings of their
    own (a fresh data directory), the runner secret `agentcron token --runner` prints (the
    HTTP-runner recipes read it) and the offline model replying at once."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCRON_")}
    path = [str(ROOT / "src"), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env |= {
        "PYTHONPATH": os.pathsep.join(path),
        "AGENTCRON_HOME": str(home / "home"),
        "AGENTCRON_RUNNER_SECRET": "whsec_" + Webhook.__name__.encode().hex()[:32],
        "AGENTCRON_OFFLINE_WPS": "0",
    }
    return env


def test_the_pages_have_the_blocks_this_test_runs() -> None:
    assert len(doc_pages(ROOT)) >= 15
    assert {b.page.name for b in RUN} >= {"README.md", "getting-started.md", "schedules.md"}
    assert len(SHELL) >= 10
    # every mark on a python block is one this suite knows: a reason not to run it, or the
    # name its page's own test loads it by (test_extending_examples, test_integrations_doc)
    for block in PYTHON:
        kind = block.mark.split(":", 1)[0]
        assert block.mark == "" or kind in ("no-test", "example", "recipe"), block.name
        assert kind != "no-test" or block.untested_because, f"{block.name}: no-test without why"


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN, ids=ids(RUN))
def test_a_python_block_runs_as_written(block: CodeBlock, tmp_path: Path) -> None:
    script = tmp_path / "block.py"
    script.write_text(block.code, "utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=reader_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=45,
        check=False,
    )
    assert done.returncode == 0, (
        f"{block.name} fails as written (mark it `<!-- no-test: why -->` if it is a fragment):"
        f"\n{done.stderr[-3000:]}"
    )


@pytest.mark.parametrize("block", SHELL, ids=ids(SHELL))
def test_the_agentcron_commands_of_a_shell_block_exist(block: CodeBlock) -> None:
    cli = typer.main.get_command(app)
    assert isinstance(cli, TyperGroup)
    problems = [
        f"agentcron {' '.join(words)}: {problem}"
        for words in agentcron_invocations(block.code)
        for problem in cli_problems(cli, words)
    ]
    assert problems == [], block.name


@pytest.mark.parametrize("block", TOML, ids=ids(TOML))
def test_a_toml_block_parses(block: CodeBlock) -> None:
    assert tomllib.loads(block.code)


def test_the_development_page_shows_the_readmes_test_command() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    command = readme.split("<!-- test-command -->\n```sh\n", 1)[1].split("```", 1)[0]
    assert command in (ROOT / "docs" / "development.md").read_text("utf-8")


def test_the_readmes_links_into_the_docs_exist() -> None:
    """The README is not part of the site (whose build checks the pages' links): its own."""
    readme = (ROOT / "README.md").read_text("utf-8")
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", readme)
    assert len(targets) >= 15
    assert [target for target in targets if not (ROOT / target).exists()] == []
