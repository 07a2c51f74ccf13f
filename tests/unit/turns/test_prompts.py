"""turns/prompts.py: a template renders what `string.Template.substitute` renders, from pieces cut
once; a missing variable is a PromptError naming it; every shipped template renders.
"""

from __future__ import annotations

import string

import pytest

from agentcron.turns.prompts import PromptError, PromptTemplate, _all, get_prompt

VARIABLES = {"name": "daily", "n": 3, "when": "09:00", "x": "$notavar"}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "plain text, no variable",
        "$name",
        "${name}",
        "Job $name fired at ${when}.",
        "$name$n$when",
        "${name}s and $name's",
        "costs $$5 for $name",
        "$$",
        "$$name is not a variable, $name is",
        "trailing dollar sign at the end: $name $$",
        "a value with a dollar: $x stays as given",
        "multi\nline $name\n\n${when}\n",
        "unicode ✓ $name — ${when}",
    ],
)
def test_render_is_what_string_template_substitute_gives(text: str) -> None:
    expected = string.Template(text).substitute({k: str(v) for k, v in VARIABLES.items()})
    assert PromptTemplate("t", 1, text).render(VARIABLES) == expected


@pytest.mark.parametrize("text", ["a $ alone", "bad ${ brace", "$1digit"])
def test_a_placeholder_string_template_refuses_is_refused_alike(text: str) -> None:
    with pytest.raises(ValueError, match="Invalid placeholder") as ours:
        PromptTemplate("t", 1, text).render(VARIABLES)
    with pytest.raises(ValueError, match="Invalid placeholder") as theirs:
        string.Template(text).substitute({k: str(v) for k, v in VARIABLES.items()})
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("text", ["hello $who", "hello ${who}!"])
def test_a_missing_variable_is_a_prompt_error_naming_it(text: str) -> None:
    with pytest.raises(PromptError, match=r"prompt t v1 needs variable 'who'"):
        PromptTemplate("t", 1, text).render(VARIABLES)


def test_every_shipped_template_renders_like_string_template() -> None:
    templates = [t for versions in _all().values() for t in versions]
    assert templates
    for template in templates:
        names = {m["named"] or m["braced"] for m in string.Template.pattern.finditer(template.text)}
        variables = {name: f"<{name}>" for name in names if name}
        expected = string.Template(template.text).substitute(variables)
        assert template.render(variables) == expected, template.id
    assert get_prompt(templates[0].id).version >= 1
