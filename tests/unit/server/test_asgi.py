"""The OpenAPI document the app generates from its routes, against the committed snapshot.

Every answer's shape is declared once, on its route (`agentcron.views`, `server/errors.answers`);
this snapshot makes a change of any of them a visible diff in review. After a deliberate change,
refresh it and commit the new file:

    AGENTCRON_UPDATE_OPENAPI=1 pytest tests/unit/server/test_asgi.py
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from agentcron.app import AgentCron
from agentcron.server import create_app

SNAPSHOT = Path(__file__).with_name("openapi.json")
REFRESH = "AGENTCRON_UPDATE_OPENAPI"


def generated_document(tmp_path: Path) -> dict[str, Any]:
    """The app's OpenAPI document (the app is made, never started: no database is opened)."""
    app = create_app(AgentCron(db=tmp_path / "unused.db"), token="t", hook_token="h")
    doc = app.openapi()
    doc["info"].pop("version")  # a release changes it, not the API
    return doc


def as_text(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def snapshot_difference(snapshot: str, generated: str, context: int = 3) -> str:
    """A unified diff, snapshot -> generated, at most 80 lines ("" when they are the same)."""
    lines = difflib.unified_diff(
        snapshot.splitlines(),
        generated.splitlines(),
        fromfile=f"{SNAPSHOT.name} (committed)",
        tofile="generated from the routes",
        lineterm="",
        n=context,
    )
    return "\n".join(list(lines)[:80])


def test_the_generated_openapi_document_is_the_snapshot(tmp_path: Path) -> None:
    generated = as_text(generated_document(tmp_path))
    if os.environ.get(REFRESH) == "1":
        SNAPSHOT.write_text(generated, encoding="utf-8")
    committed = SNAPSHOT.read_text(encoding="utf-8") if SNAPSHOT.exists() else ""
    difference = snapshot_difference(committed, generated)
    assert not difference, (
        f"The OpenAPI document is not the committed snapshot ({SNAPSHOT}). If the change is "
        f"meant, refresh it with `{REFRESH}=1 pytest tests/unit/server/test_asgi.py` and commit "
        f"it; the diff:\n{difference}"
    )


def test_every_operation_declares_its_answers_and_errors_in_one_shape(tmp_path: Path) -> None:
    doc = generated_document(tmp_path)
    schemas = doc["components"]["schemas"]
    # FastAPI's own validation error shape is never sent: every route declares 422 as ErrorOut
    assert "HTTPValidationError" not in schemas
    assert "ValidationError" not in schemas
    operations = [(m, p, op) for p, item in doc["paths"].items() for m, op in item.items()]
    assert len(operations) >= 36
    for method, path, operation in operations:
        where = f"{method.upper()} {path}"
        success = [code for code in operation["responses"] if code.startswith("2")]
        assert success, where
        for code, answer in operation["responses"].items():
            content = answer.get("content", {})
            if code.startswith("4"):
                assert content == {
                    "application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}
                }, where
            elif path != "/metrics" and path != "/api/cron/fire":
                # a declared model, not FastAPI's empty schema of an untyped answer
                assert content["application/json"]["schema"].get("$ref"), (where, code)
        if path.startswith("/api/") and not path.endswith("/decide"):
            assert "401" in operation["responses"], where  # the token guard's


def test_the_snapshot_check_finds_a_change() -> None:
    committed = as_text({"paths": {"/a": {"get": {"responses": {"200": {}}}}}})
    changed = as_text({"paths": {"/a": {"get": {"responses": {"201": {}}}}}})
    difference = snapshot_difference(committed, changed)
    assert '-     "200": {}' in difference.splitlines()
    assert '+     "201": {}' in difference.splitlines()
    assert snapshot_difference(committed, committed) == ""


def test_the_snapshot_is_committed() -> None:
    if os.environ.get(REFRESH) == "1":
        pytest.skip("refreshing the snapshot")
    assert SNAPSHOT.is_file(), f"no {SNAPSHOT}: make it with {REFRESH}=1"


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_api_docs_load_every_asset_from_us_not_a_cdn(tmp_path: Path, page: str) -> None:
    import re

    from starlette.testclient import TestClient

    app = create_app(AgentCron(db=tmp_path / "unused.db"), token="t", hook_token="h")
    client = TestClient(app)  # outside `with`: no lifespan, nothing is started
    html = client.get(page)
    assert html.status_code == 200
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html.text)
    assets += re.findall(r"""url:\s*["']([^"']+)["']""", html.text)
    scripts = [a for a in assets if a.endswith((".js", ".css"))]
    assert scripts, html.text
    for url in assets:
        assert url.startswith("/"), f"{page} loads {url} from elsewhere"
    for url in scripts:
        got = client.get(url)
        assert got.status_code == 200, url
        assert len(got.content) > 100_000, url  # the UI's bundle, not the web UI's 404 page
    assert client.get("/openapi.json").status_code == 200
