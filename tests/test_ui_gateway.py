"""The gateway's ``/ui`` (issue 35): served to identities an access rule names ``"admin": true``
and to nobody else, showing that replica's proxy. In memory: the gateway's own app under httpx."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from mcp_patchbay.config import Config, parse_config
from mcp_patchbay.gateway.app import Gateway
from tests.test_gateway import upstreams

pytestmark = pytest.mark.anyio

ADMIN = "alice-token-0123456789abcdef"
MEMBER = "bob-token-0123456789abcdef01"
BASE = "http://127.0.0.1:8080"


def config(access: list[dict[str, Any]]) -> Config:
    document = {
        "mcpServers": {"time": {"command": "x"}, "notes": {"command": "x"}},
        "gateway": {"tokens": {"alice": ADMIN, "bob": MEMBER}, "access": access},
        "patchbay": {"watch": False},
    }
    return parse_config(json.dumps(document), Path("/virtual/patchbay.json").resolve(), environ={})


RULES = [{"tokens": ["alice"], "admin": True}, {"tokens": ["bob"], "servers": ["time"]}]


@asynccontextmanager
async def page(access: list[dict[str, Any]]) -> AsyncIterator[httpx2.AsyncClient]:
    gateway = Gateway(config(access), "127.0.0.1", 8080, connector=upstreams())
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            await tg.start(gateway.proxy.run)
            await gateway.proxy.supervisor.wait_startup()
            async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=gateway.app), base_url=BASE) as http:
                yield http
            tg.cancel_scope.cancel()


def bearer(token: str, **more: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}", **more}


async def test_ui_serves_an_admin_and_refuses_a_member_and_a_stranger() -> None:
    async with page(RULES) as http:
        stranger = await http.get("/ui/")
        assert stranger.status_code == 401 and "time" not in stranger.text
        assert stranger.headers["www-authenticate"].startswith("Bearer")
        member = await http.get("/ui/", headers=bearer(MEMBER))
        assert member.status_code == 403 and "notes" not in member.text
        for path in ("/ui/tools", "/ui/log", "/ui/held", "/ui/static/htmx.min.js"):
            assert (await http.get(path, headers=bearer(MEMBER))).status_code == 403, path
        admin = await http.get("/ui/", headers=bearer(ADMIN))
        assert admin.status_code == 200
        assert "HTTP gateway (this replica)" in admin.text and '<th scope="row">notes</th>' in admin.text
        assert 'href="/ui/tools' in admin.text and 'src="/ui/static/htmx.min.js"' in admin.text
        tools = await http.get("/ui/tools", headers=bearer(ADMIN))
        assert "time__now" in tools.text and "notes__add" in tools.text
        assert (await http.get("/ui/static/htmx.min.js", headers=bearer(ADMIN))).status_code == 200


async def test_an_admins_post_from_another_origin_or_without_its_form_token_is_refused() -> None:
    async with page(RULES) as http:
        shown = (await http.get("/ui/", headers=bearer(ADMIN))).text
        token = re.search(r'name="form_token" value="([^"]+)"', shown)[1]  # type: ignore[index]
        fields = {"config": "x", "server": "notes", "on": "0", "form_token": token}
        evil = await http.post("/ui/server", data=fields, headers=bearer(ADMIN, origin="https://evil.example"))
        assert evil.status_code == 403
        del fields["form_token"]
        bare = await http.post("/ui/server", data=fields, headers=bearer(ADMIN, origin=BASE))
        assert bare.status_code == 403
        other = await http.post("/ui/server", data={**fields, "form_token": token}, headers=bearer(MEMBER, origin=BASE))
        assert other.status_code == 403


async def test_without_an_admin_rule_there_is_no_page() -> None:
    async with page([{"tokens": ["alice"]}, {"tokens": ["bob"], "servers": ["time"]}]) as http:
        assert (await http.get("/ui/", headers=bearer(ADMIN))).status_code == 404


def test_admins_are_named_by_token_or_by_a_claims_values() -> None:
    from mcp.server.auth.provider import AccessToken

    from mcp_patchbay.config.gateway import GatewaySettings
    from mcp_patchbay.gateway.access import AccessPolicy

    settings = GatewaySettings.model_validate(
        {
            "tokens": {"alice": ADMIN, "bob": MEMBER},
            "oauth": {"issuer": "https://id.example.com"},
            "access": [
                {"tokens": ["alice"], "admin": True},
                {"claim": "groups", "values": ["ops"], "admin": True},
                {"tokens": ["bob"], "claim": "groups", "values": ["eng"]},
            ],
        }
    )
    policy = AccessPolicy(settings)

    def jwt(**claims: Any) -> AccessToken:
        return AccessToken(token="a.b.c", client_id="alice", scopes=[], claims={"sub": "x", **claims})

    assert policy.is_admin(AccessToken(token="t" * 20, client_id="alice", scopes=[]))
    assert not policy.is_admin(AccessToken(token="t" * 20, client_id="bob", scopes=[]))
    assert policy.is_admin(jwt(groups=["eng", "ops"]))
    assert not policy.is_admin(jwt(groups=["eng"]))  # a JWT never matches a token rule by its client_id
    assert not policy.is_admin(None) and not AccessPolicy(None).is_admin(jwt(groups=["ops"]))
