"""One error root: every exception class agentcron defines is an AgentcronError."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import agentcron
from agentcron.errors import AgentcronError, InvalidInputError

SRC = Path(agentcron.__file__).parent


def _modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages([str(SRC)], prefix="agentcron."):
        if ".migrations." in info.name:
            continue
        names.append(info.name)
    return names


def test_every_error_class_of_the_package_is_an_agentcron_error() -> None:
    found = []
    for name in _modules():
        module = importlib.import_module(name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if value.__module__ == name and issubclass(value, BaseException):
                found.append(value)
    assert len(found) >= 25  # the store, schedule, channel, tool, config ... errors
    strays = [
        f"{c.__module__}.{c.__qualname__}" for c in found if not issubclass(c, AgentcronError)
    ]
    assert strays == []


def test_input_errors_are_value_errors_too() -> None:
    assert issubclass(InvalidInputError, ValueError)  # callers catching ValueError still do
