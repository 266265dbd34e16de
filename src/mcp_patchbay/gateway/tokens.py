"""Who a bearer token is: ``PatchbayToken``, and the static tokens of ``gateway.tokens``.

A static token's SHA-256 is compared in constant time with every configured token's (no early
exit, no length leak); the caller is the token's name. JWTs are ``gateway.jwts``'; both answer
a ``PatchbayToken``. A refusal is logged with its reason only (``refused``), never the token.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Mapping
from typing import Literal

from mcp.server.auth.provider import AccessToken
from pydantic import Field

__all__ = ["PatchbayToken", "StaticTokens", "refused"]

logger = logging.getLogger(__name__)


class PatchbayToken(AccessToken):
    """A caller the gateway admitted: a static token's name, or a JWT's identity and claims.

    ``client_id`` is the token's name (static) or the JWT's ``client_id``/``azp`` claim;
    ``claims`` is ``None`` for a static token (``access`` tells the kinds apart by it).
    """

    token: str = Field(repr=False)
    kind: Literal["token", "jwt"]
    identity: str
    """Who, for logs and rules: the static token's name, or the ``oauth.identity_claim``."""


def refused(reason: str, *args: object) -> None:
    logger.info("gateway: bearer token refused: " + reason, *args)


class StaticTokens:
    """``gateway.tokens``, held as digests; a match costs one hash and one comparison per token."""

    def __init__(self, tokens: Mapping[str, str], scopes: list[str]) -> None:
        self._digests = [(name, hashlib.sha256(token.encode()).digest()) for name, token in tokens.items()]
        # One token object per name: admitting a caller allocates nothing. A static token is
        # trusted whole, so it carries the scopes a JWT must have.
        self._admitted = {
            name: PatchbayToken(token=token, client_id=name, subject=name, scopes=scopes, kind="token", identity=name)
            for name, token in tokens.items()
        }

    def match(self, token: str) -> PatchbayToken | None:
        digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        found: str | None = None
        for name, expected in self._digests:  # every one, whatever matched: no timing tells which
            if hmac.compare_digest(digest, expected):
                found = name
        return None if found is None else self._admitted[found]
