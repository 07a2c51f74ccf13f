"""The bounds of limits.py: a session's or a job's own runner URL."""

from __future__ import annotations

import pytest

from agentcron.errors import InvalidInputError
from agentcron.limits import MAX_RUNNER_URL_CHARS, check_runner_url


def test_a_runner_url_is_http_or_https_with_a_host_and_bounded() -> None:
    assert check_runner_url(None) is None
    assert check_runner_url("https://agent.example/turn") == "https://agent.example/turn"
    assert check_runner_url("http://[::1]:8080/turn") == "http://[::1]:8080/turn"
    too_long = "http://a/" + "x" * MAX_RUNNER_URL_CHARS
    for bad in ("ftp://a/t", "a/t", "http:///t", "http://a b/t", "http://[::1/t", too_long):
        with pytest.raises(InvalidInputError, match="runner_url"):
            check_runner_url(bad)
