"""tests/helpers/doc_code.py: a page's marked python blocks, loaded as modules."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers.doc_code import loaded_blocks, python_blocks

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
