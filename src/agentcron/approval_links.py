"""Decision URLs of approvals: a capability per approval, for receivers without the API token.

An outbound webhook's `approval_requested` payload carries a decision URL,
`<public URL>/api/approvals/<id>/decide?token=<token>`; POSTing `{"decision": "approve" | "deny"}`
there decides that one approval, without the server's API token. The token is
`base64url(HMAC-SHA256(key, approval id))`, its key derived from a server secret (the API token:
`ApprovalLinks(secret)` derives `HMAC-SHA256(secret, "agentcron approval links v1")`), so nothing
is stored per approval, a token decides only its own approval, and rotating the API token
voids every outstanding URL. The public base URL comes from `AGENTCRON_PUBLIC_URL`
(`[server] public_url`); without it the payload's `decision_url` is null.

Tokens travel in the query string, so `RedactApprovalTokens` keeps them out of the access log.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import re
from urllib.parse import quote

# The public URL is a setting (`[server] public_url`): checked and read in config.
from agentcron.config.server import PUBLIC_URL_ENV, check_public_url, public_url_from_env

__all__ = [
    "PUBLIC_URL_ENV",
    "ApprovalLinks",
    "RedactApprovalTokens",
    "check_public_url",
    "public_url_from_env",
    "redact_tokens",
]

_DERIVE = b"agentcron approval links v1"
_TOKEN_QUERY = re.compile(r"(?<=[?&]token=)[^&\s\"]+")
MAX_TOKEN = 200  # a real token is 43 characters; longer ones are refused unread


class ApprovalLinks:
    """Makes and checks the per-approval decision tokens and URLs (pure, no storage)."""

    def __init__(self, secret: str | bytes, public_url: str | None = None) -> None:
        raw = secret.encode("utf-8") if isinstance(secret, str) else secret
        if not raw:
            raise ValueError("approval links need a non-empty server secret")
        self._key = hmac.new(raw, _DERIVE, hashlib.sha256).digest()
        self.public_url = None if public_url is None else check_public_url(public_url)

    def __repr__(self) -> str:  # never the key
        return f"ApprovalLinks(public_url={self.public_url!r})"

    def token(self, approval_id: str) -> str:
        raw = approval_id.encode("utf-8", "surrogatepass")  # any text a path may hold
        mac = hmac.new(self._key, raw, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")

    def verify(self, approval_id: str, token: str | None) -> bool:
        """True if `token` is the decision token of `approval_id` (constant-time compare)."""
        if not token or len(token) > MAX_TOKEN:
            return False
        given = token.encode("utf-8", "surrogatepass")
        return hmac.compare_digest(self.token(approval_id).encode(), given)

    def decision_url(self, approval_id: str) -> str | None:
        """Where a receiver POSTs its decision; None without a public URL."""
        if self.public_url is None:
            return None
        where = quote(approval_id, safe="")
        return f"{self.public_url}/api/approvals/{where}/decide?token={self.token(approval_id)}"


def redact_tokens(text: str) -> str:
    """`text` with every `token=<value>` query parameter's value replaced."""
    return _TOKEN_QUERY.sub("<redacted>", text)


class RedactApprovalTokens(logging.Filter):
    """For the access log (`uvicorn.access`): a decision URL's token is never written."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(
            isinstance(a, str) and "token=" in a for a in record.args
        ):
            record.args = tuple(redact_tokens(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.msg, str) and "token=" in record.msg and not record.args:
            record.msg = redact_tokens(record.msg)
        return True
