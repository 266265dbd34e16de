"""Where the gateway may listen: ``is_loopback`` and ``refusal``, checked before anything heavy
is imported (a refused start answers at once, not after the SDK's import)."""

from __future__ import annotations

import ipaddress

from mcp_patchbay.config import Config
from mcp_patchbay.config.gateway import GatewaySettings

__all__ = ["is_loopback", "refusal"]


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` serves this machine only (127.0.0.0/8, ::1, ``localhost``)."""
    name = host.strip().removeprefix("[").removesuffix("]")
    if name.lower().rstrip(".") == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def refusal(config: Config, host: str, port: int) -> str | None:
    """Why the gateway must not start on this address, or None: off loopback, callers sign in."""
    settings = config.gateway or GatewaySettings()
    if not is_loopback(host) and not settings.signs_in:
        return (
            f"{config.path}: serving on {host}:{port}, beyond this machine, needs a sign-in: set "
            '"gateway": {"tokens": {...}} or {"oauth": {...}} (see the README, "The HTTP gateway"), '
            "or bind 127.0.0.1"
        )
    if settings.oauth is not None and settings.url is None and not is_loopback(host):
        return (
            f"{config.path}: gateway.oauth needs gateway.url, the address clients reach the gateway at "
            "(tokens are issued for it, and the metadata clients read names it)"
        )
    return None
