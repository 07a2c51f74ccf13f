"""The MCP session tokens: bound to one session, signed with a key made from the API token."""

from __future__ import annotations

import jwt

from agentcron.tokens import mcp_session_of, mcp_token


def test_an_mcp_token_names_its_session_under_the_api_token_it_was_made_with() -> None:
    token = mcp_token("api", "telegram:42")
    assert mcp_session_of("api", token) == "telegram:42"
    assert mcp_session_of("another api token", token) is None  # a new API token revokes it


def test_the_api_token_itself_and_forged_tokens_bind_no_session() -> None:
    assert mcp_session_of("api", "api") is None
    assert mcp_session_of("api", "not.a.jwt") is None
    # Signed with the API token itself (not the key made from it): refused.
    api = "an API token of at least 32 bytes, as HS256 asks"
    forged = jwt.encode({"aud": "agentcron-mcp", "sub": "api:x"}, api, "HS256")
    assert mcp_session_of(api, forged) is None
    # Another audience (e.g. a token for something else) or no session: refused.
    token = mcp_token("api", "api:x")
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims == {"aud": "agentcron-mcp", "sub": "api:x"}
    unsigned = jwt.encode({"aud": "agentcron-mcp", "sub": "api:x"}, None, "none")
    assert mcp_session_of("api", unsigned) is None
