"""What clients make of what the proxy serves: the name they send to their model and its
limit, and what of an error result they show the model.

Clients prefix a tool's name with the name they registered the proxy under (Claude Code
sends ``mcp__NAME__tool`` and the model API refuses names over 64 characters), so the
longest exposed name the proxy may use follows from that name (``name_budget``), and
``check --as NAME`` names every exposed name some client cannot take (``over_limits``).
Gemini CLI shows the model an error result's text and then its structured content again, so
the proxy's message reached its model twice; to the clients in ``TEXT_ONLY_ERRORS`` an error
is its text alone (``errors_as_text``). Codex shows the structured content in place of the
text (Claude Code does so for successful results only, and shows an error's text), so to them,
and to every other client, an error keeps both, each with the whole message. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mcp_patchbay.catalog.naming import MIN_MAX_LENGTH


@dataclass(frozen=True, slots=True)
class ClientLimit:
    """How a client turns the name it registered the proxy under and an exposed name into the
    name it sends to its model, and the longest such name that works."""

    client: str
    form: str
    """``{server}`` is the registered name, ``{tool}`` the exposed name."""
    limit: int
    consequence: str

    def length(self, registered_as: str, exposed: str) -> int:
        return len(self.form.format(server=registered_as, tool=exposed))


CLIENT_LIMITS: tuple[ClientLimit, ...] = (
    ClientLimit("Claude Code", "mcp__{server}__{tool}", 64, "the model API refuses every request"),
    ClientLimit("Cursor", "{server}{tool}", 60, "Cursor caps server name plus tool name at 60"),
    ClientLimit("Gemini CLI", "mcp_{server}_{tool}", 63, "Gemini CLI cuts the name in the middle"),
)
"""The clients whose limits are known (November 2026): the strictest sets the budget."""


TEXT_ONLY_ERRORS: frozenset[str] = frozenset({"gemini-cli-mcp-client"})
"""The ``clientInfo.name`` of clients that show an error result's text and its structured content both."""


def errors_as_text(client_name: str | None) -> bool:
    """Whether an error result for this client is its text alone (its message said once)."""
    return client_name in TEXT_ONLY_ERRORS


def name_budget(max_length: int, registered_as: str | None) -> int:
    """The longest exposed name: ``max_length``, shortened so that every client in
    ``CLIENT_LIMITS`` takes the names of a proxy registered as ``registered_as``; never
    below ``MIN_MAX_LENGTH`` (a name that long cannot fit; ``over_limits`` says so)."""
    if registered_as is None:
        return max_length
    room = min(c.limit - c.length(registered_as, "") for c in CLIENT_LIMITS)
    return max(MIN_MAX_LENGTH, min(max_length, room))


@dataclass(frozen=True, slots=True)
class OverLimit:
    """An exposed name too long for a client once the client has prefixed it."""

    exposed: str
    client: str
    sent: str
    length: int
    limit: int
    consequence: str


def over_limits(names: Iterable[str], registered_as: str) -> list[OverLimit]:
    """Every (name, client) pair where the name the client sends is over the client's limit."""
    found: list[OverLimit] = []
    for name in names:
        for client in CLIENT_LIMITS:
            length = client.length(registered_as, name)
            if length > client.limit:
                sent = client.form.format(server=registered_as, tool=name)
                found.append(OverLimit(name, client.client, sent, length, client.limit, client.consequence))
    return found


__all__ = ["CLIENT_LIMITS", "ClientLimit", "OverLimit", "name_budget", "over_limits"]
