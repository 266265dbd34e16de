"""Where sign-ins are kept: one file per server URL in the user's data directory.

``$XDG_DATA_HOME/mcp-patchbay/oauth/`` on Linux (platformdirs gives the macOS and Windows
equivalents). A file holds the tokens, when the access token expires (as a time, since
``expires_in`` means nothing once stored), and the client credentials the authorization
server issued (dynamic registration) or that the config named. Files are written whole
(a temporary file renamed over the old one), created with mode 0600 in a directory of
mode 0700. Nothing here logs a token, a secret or a file's contents.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from pathlib import Path
from typing import Any, cast

from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken, ProtectedResourceMetadata
from pydantic import ValidationError

from mcp_patchbay import places
from mcp_patchbay.bounded_read import DATA_FILE_BYTES, read_bytes

logger = logging.getLogger(__name__)


def data_dir() -> Path:
    """The folder of stored sign-ins, in the proxy's data folder (``places``)."""
    return places.data_dir() / "oauth"


def file_for(server_url: str, folder: Path | None = None) -> Path:
    """The file of one server URL: its host for a person reading the folder, a hash for uniqueness."""
    host = re.sub(r"[^A-Za-z0-9.-]+", "_", server_url.split("://", 1)[-1].split("/", 1)[0])[:60]
    digest = hashlib.sha256(server_url.encode()).hexdigest()[:16]
    return (folder or data_dir()) / f"{host}-{digest}.json"


def fingerprint_of(access_token: str | None) -> str:
    """Names an access token without holding it ("" for none): what ``TokenStore.fingerprint`` and a
    served connection's refused token (``provider.UpstreamAuth.refused``) are compared by."""
    return "" if not access_token else hashlib.sha256(access_token.encode()).hexdigest()[:16]


class TokenStore:
    """The stored sign-in of one server URL; the SDK's ``TokenStorage`` protocol, plus expiry.

    Every method reads or writes the file, so a sign-in finished by another process
    (``mcp-patchbay login`` while the proxy serves) is seen at the next read; ``version``
    says whether the file changed since a given read.
    """

    def __init__(self, server_url: str, path: Path | None = None) -> None:
        self.server_url = server_url
        self.path = path or file_for(server_url)

    # --- the SDK's TokenStorage ---------------------------------------------------------

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens()

    async def set_tokens(self, tokens: OAuthToken) -> None:
        data = self._read()
        data["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        data["expires_at"] = None if tokens.expires_in is None else time.time() + int(tokens.expires_in)
        self._write(data)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info()

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        data = self._read()
        data["client_info"] = client_info.model_dump(mode="json", exclude_none=True)
        self._write(data)

    # --- ours -------------------------------------------------------------------------------

    def tokens(self) -> OAuthToken | None:
        raw = self._read().get("tokens")
        if not isinstance(raw, dict):
            return None
        try:
            return OAuthToken.model_validate(raw)
        except ValidationError:
            logger.warning("ignoring malformed tokens in the sign-in file of %s", self.server_url)
            return None

    def expires_at(self) -> float | None:
        """When the stored access token expires (seconds since the epoch), if the server said."""
        value = self._read().get("expires_at")
        return float(value) if isinstance(value, int | float) else None

    def client_info(self) -> OAuthClientInformationFull | None:
        raw = self._read().get("client_info")
        if not isinstance(raw, dict):
            return None
        try:
            return OAuthClientInformationFull.model_validate(raw)
        except ValidationError:
            logger.warning("ignoring a malformed client registration in the sign-in file of %s", self.server_url)
            return None

    def set_metadata(self, server: OAuthMetadata | None, resource: ProtectedResourceMetadata | None) -> None:
        """Keep what discovery found, so that a later process refreshes at the right token
        endpoint without a refusal to discover it from."""
        data = self._read()
        for key, value in (("authorization_server", server), ("protected_resource", resource)):
            if value is not None:
                data[key] = value.model_dump(mode="json", exclude_none=True)
        self._write(data)

    def metadata(self) -> tuple[OAuthMetadata | None, ProtectedResourceMetadata | None]:
        data = self._read()
        found: list[Any] = []
        for key, model in (("authorization_server", OAuthMetadata), ("protected_resource", ProtectedResourceMetadata)):
            raw = data.get(key)
            try:
                found.append(model.model_validate(raw) if isinstance(raw, dict) else None)
            except ValidationError:
                found.append(None)
        return found[0], found[1]

    def forget_client(self) -> None:
        """Drop the stored client registration, so that the next sign-in registers anew. Its
        tokens stay: the access token still works, and its scope is what a step-up adds to."""
        data = self._read()
        if data.pop("client_info", None) is not None:
            self._write(data)

    def signed_in(self) -> bool:
        """Tokens are stored (whether still valid is for the server to say)."""
        return self.tokens() is not None

    def version(self) -> int:
        """Changes whenever the file is written (0 when there is none): each write is a new file
        (renamed over the old one), so its inode changes even within the clock's granularity."""
        try:
            status = self.path.stat()
        except OSError:
            return 0
        return hash((status.st_mtime_ns, status.st_ino, status.st_size)) or 1

    def fingerprint(self) -> str:
        """Names the stored access token without holding it: changes only when the tokens do."""
        tokens = self.tokens()
        return fingerprint_of(tokens.access_token if tokens is not None else None)

    def forget(self) -> bool:
        """Remove the file: the tokens and the client registration. True if there was one."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    def _read(self) -> dict[str, Any]:
        try:
            raw = read_bytes(self.path, DATA_FILE_BYTES, "a sign-in file")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            logger.warning("cannot read the sign-in file of %s: %s", self.server_url, exc.strerror or exc)
            return {}
        try:
            data = json.loads(raw)
        except ValueError:
            logger.warning("ignoring the unreadable sign-in file of %s (not JSON)", self.server_url)
            return {}
        if not isinstance(data, dict):
            return {}
        stored = cast("dict[str, Any]", data)
        return stored if stored.get("server_url") == self.server_url else {}

    def _write(self, data: dict[str, Any]) -> None:
        data["server_url"] = self.server_url
        places.write_private(self.path, json.dumps(data, indent=1, sort_keys=True))


__all__ = ["TokenStore", "data_dir", "file_for", "fingerprint_of"]
