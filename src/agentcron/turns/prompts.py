"""Named, versioned prompt templates shipped in the package; each is referenced by its sha256."""

from __future__ import annotations

import hashlib
import re
import string
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from agentcron.errors import AgentcronError

_NAME = re.compile(r"^(?P<id>[a-z0-9_.]+)\.v(?P<version>\d+)\.txt$")


class PromptError(AgentcronError, LookupError):
    """A template is missing, or a variable it needs was not given."""


# A template's text cut once into its pieces: (False, literal text) or (True, variable name).
Pieces = tuple[tuple[bool, str], ...]


def _pieces(text: str) -> Pieces | None:
    """`text` in pieces, with `string.Template`'s syntax (`$name`, `${name}`, `$$`); None if it
    has a placeholder that syntax refuses (rendering then raises as `string.Template` does).
    """
    pieces: list[tuple[bool, str]] = []
    at = 0
    for match in string.Template.pattern.finditer(text):
        pieces.append((False, text[at : match.start()]))
        if match["escaped"] is not None:
            pieces.append((False, match["escaped"]))
        elif (name := match["named"] or match["braced"]) is not None:
            pieces.append((True, name))
        else:
            return None
        at = match.end()
    pieces.append((False, text[at:]))
    return tuple((var, piece) for var, piece in pieces if var or piece)


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    id: str
    version: int
    text: str
    # Made once (every fire renders a template and records its reference).
    sha256: str = field(init=False)
    _template: string.Template = field(init=False, repr=False, compare=False)
    _pieces: Pieces | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha256", hashlib.sha256(self.text.encode("utf-8")).hexdigest())
        object.__setattr__(self, "_template", string.Template(self.text))
        object.__setattr__(self, "_pieces", _pieces(self.text))

    @property
    def ref(self) -> dict[str, Any]:
        """What the transcript keeps instead of the rendered text (a new dict each time)."""
        return {"id": self.id, "version": self.version, "sha256": self.sha256}

    def render(self, variables: dict[str, Any]) -> str:
        """The text with each `$name` replaced by `str(variables[name])` (what
        `string.Template.substitute` gives, without its regular expression on every fire).
        """
        try:
            if self._pieces is None:
                return self._template.substitute({k: str(v) for k, v in variables.items()})
            return "".join([str(variables[p]) if var else p for var, p in self._pieces])
        except KeyError as exc:
            raise PromptError(f"prompt {self.id} v{self.version} needs variable {exc}") from exc


@cache
def _all() -> dict[str, list[PromptTemplate]]:
    found: dict[str, list[PromptTemplate]] = {}
    for entry in resources.files("agentcron.turns").joinpath("templates").iterdir():
        match = _NAME.match(entry.name)
        if match:
            template = PromptTemplate(match["id"], int(match["version"]), entry.read_text("utf-8"))
            found.setdefault(template.id, []).append(template)
    for versions in found.values():
        versions.sort(key=lambda t: t.version)
    return found


def get_prompt(prompt_id: str, version: int | None = None) -> PromptTemplate:
    """The template `prompt_id` at `version` (default: the newest)."""
    versions = _all().get(prompt_id)
    if not versions:
        raise PromptError(f"no prompt template {prompt_id!r}; known: {sorted(_all())}")
    if version is None:
        return versions[-1]
    for template in versions:
        if template.version == version:
            return template
    raise PromptError(f"prompt {prompt_id!r} has no version {version}")
