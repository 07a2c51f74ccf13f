"""Schema fuzzing (issue 13): schemathesis against a real `agentcron serve` on loopback.

Every operation of the OpenAPI document gets generated requests, valid and invalid, with the
bearer token; each answer must be no 5xx, documented (status code and content type) and in
the documented schema. Requests on `{key}`, `{job_id}`, `{run_id}` and `{turn_id}` are sent
twice: as generated, and with the id of a resource that exists (so that the fuzzed query and
body reach past the 404).

The short profile runs by default: 6 examples per operation and mode, derandomized (>= 600
requests); with AGENTCRON_LONG_TESTS=1, 20 of each (>= 1,600 requests). The long one:
`AGENTCRON_FUZZ=long pytest tests/integration/test_fuzz_api.py` (or AGENTCRON_FUZZ=<examples per
operation and mode>); `AGENTCRON_FUZZ_URL=postgresql://...` runs the server on that database.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.helpers.long import long_tests_on

TOKEN = "fuzz-token"
HOOK = "fuzz-hook-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
KEY = "api:fuzz/a b"  # a key with "/" and a space: they must be reachable too
_PROFILE = os.environ.get("AGENTCRON_FUZZ", "short")
SHORT_EXAMPLES = 20 if long_tests_on() else 6
EXAMPLES = {"short": SHORT_EXAMPLES, "long": 1000}.get(_PROFILE) or int(_PROFILE)
# 36 operations, 2 modes, the id-bearing ones sent twice: ~90 requests per example and mode
MIN_REQUESTS = 80 * EXAMPLES
CHECKS = [
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
    content_type_conformance,
]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180 if _PROFILE == "short" else 7200)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Live:
    """The server under test and a few resources that exist on it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(base_url=url, headers=AUTH, timeout=30)
        self.session = requests.Session()  # schemathesis's transport, one connection pool
        self.requests = 0
        self.ids: dict[str, str] = {}

    def seed(self) -> dict[str, str]:
        """Ids of a session, a job, a run and a turn that exist (made again if deleted)."""
        self.http.post("/api/sessions", json={"key": KEY}).raise_for_status()
        job = self.ids.get("job_id")
        if job is None or self.http.get(f"/api/jobs/{job}").status_code == 404:
            made = self.http.post(
                "/api/jobs",
                json={"session_key": KEY, "name": "fuzz", "message": "m", "when": "every 1h"},
            )
            made.raise_for_status()
            self.ids["job_id"] = made.json()["id"]
        if "turn_id" not in self.ids:
            sent = self.http.post(
                f"/api/sessions/{quote(KEY, safe='')}/messages", json={"content": "hi"}
            )
            sent.raise_for_status()
            self.ids["turn_id"] = sent.json()["turn_id"]
            self.http.get(f"/api/turns/{self.ids['turn_id']}", params={"wait": 10})
        self.ids["key"] = quote(KEY, safe="")  # path parameters are sent as generated: encoded
        self.ids.setdefault("run_id", "01JUNKNOWNRUN0000000000000")
        return self.ids


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    home: Path = tmp_path_factory.mktemp("fuzz")
    port = _free_port()
    env = {
        **os.environ,
        "AGENTCRON_HOME": str(home),
        "AGENTCRON_TOKEN": TOKEN,
        "AGENTCRON_HOOK_TOKEN": HOOK,
        "AGENTCRON_OFFLINE_WPS": "0",
        "AGENTCRON_MODEL": "offline",
    }
    for name in ("AGENTCRON_WEBHOOK_URL", "AGENTCRON_TELEGRAM_TOKEN", "AGENTCRON_DATABASE_URL"):
        env.pop(name, None)
    # AGENTCRON_FUZZ_URL=postgresql://... fuzzes a server on that (empty) database instead
    where = os.environ.get("AGENTCRON_FUZZ_URL")
    store = ["--url", where] if where else ["--db", str(home / "fuzz.db")]
    command = [sys.executable, "-c", "from agentcron.cli import main; main()", "serve",
               "--port", str(port), *store, "--log-level", "warning"]  # fmt: skip
    log = (home / "server.log").open("wb")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None, (home / "server.log").read_text()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)
        live = Live(url)
        try:
            yield live
        finally:
            live.http.close()
            live.session.close()
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
        errors = [
            line
            for line in (home / "server.log").read_text(errors="replace").splitlines()
            if "Traceback" in line or "Exception in ASGI" in line
        ]
        assert not errors, (home / "server.log").read_text(errors="replace")[-5000:]


@pytest.fixture(scope="module")
def api_schema(live: Live) -> Any:
    config = schemathesis.Config.from_dict({"headers": AUTH})
    return schemathesis.openapi.from_url(f"{live.url}/openapi.json", config=config)


def _exercise(case: Any, live: Live) -> None:
    headers = {"Authorization": f"Bearer {HOOK}"} if case.path.startswith("/hooks/") else AUTH
    call = {"base_url": live.url, "session": live.session, "headers": headers, "checks": CHECKS}
    case.call_and_validate(**call)
    live.requests += 1
    names = set(case.path_parameters or {}) & {"key", "job_id", "run_id", "turn_id"}
    if names:
        ids = live.seed()
        for name in names:
            case.path_parameters[name] = ids[name]
        case.call_and_validate(**call)
        live.requests += 1


def test_every_operation_answers_as_documented(live: Live, api_schema: Any) -> None:
    """Valid and invalid requests for each operation (schemathesis's strategies driven by
    Hypothesis here: its pytest plugin does not run on pytest 9); all failures are listed.
    """
    started = time.monotonic()
    failures: list[str] = []
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 25
    short = _PROFILE == "short"
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                derandomize=short,  # the CI profile is the same run every time
                suppress_health_check=list(HealthCheck),
                database=None,
                phases=[Phase.generate] if short else [Phase.generate, Phase.shrink],
                print_blob=False,
            )
            def fuzz(case: Any) -> None:
                _exercise(case, live)

            try:
                fuzz()
            except Unsatisfiable:  # nothing invalid to make (a path with no constraints)
                assert mode is GenerationMode.NEGATIVE, operation.label
            except Exception as exc:
                failures.append(f"{operation.label} ({mode.value}): {exc}")
    took = time.monotonic() - started
    print(f"fuzz: {live.requests} requests over {len(operations)} operations in {took:.0f} s")
    assert not failures, "\n\n".join(failures)
    assert live.requests >= (MIN_REQUESTS if short else 0), live.requests
