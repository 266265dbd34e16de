"""Where ``${secret:NAME}`` values live: the OS keyring, through the ``keyring`` package.

Each secret is the keyring's password for the service :data:`SERVICE` and the user name
``NAME`` (macOS Keychain, Windows Credential Locker, the Secret Service of a Linux
desktop). ``keyring`` is imported only when a secret is read or written: a config without
``${secret:...}`` never loads it.

A keyring that cannot hold secrets (a headless Linux has no backend: ``keyring`` falls back
to its ``fail`` backend, or a chainer with nothing to chain) raises
:class:`KeyringUnavailable`, whose message says why; nothing is ever kept in plain text
instead. Every value read is registered with ``redaction.remember``, so no log line shows it.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Final

from mcp_patchbay.redaction import remember

if TYPE_CHECKING:
    from keyring.backend import KeyringBackend

logger = logging.getLogger(__name__)

__all__ = ["NAME_RULE", "SERVICE", "KeyringUnavailable", "backend_name", "delete", "name_problem", "read", "write"]

SERVICE: Final = "mcp-patchbay"
"""The keyring's service name for every secret of patchbay's."""

_NAME: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
NAME_RULE: Final = "letters, digits, '_', '.' and '-', at most 128, not starting with '.' or '-'"


class KeyringUnavailable(Exception):
    """No keyring backend can hold secrets here, or the keyring refused; ``str()`` says why."""


def name_problem(name: str) -> str | None:
    """What is wrong with a secret's name, or None."""
    if not name:
        return "expected a secret's name"
    if not _NAME.match(name):
        return f"a secret's name takes {NAME_RULE}"
    return None


def _backend() -> KeyringBackend:
    """The keyring's backend, if it can hold secrets (see the module doc)."""
    try:
        import keyring
    except ImportError:  # a broken install: say so rather than crash
        logger.warning("the keyring package cannot be loaded", exc_info=True)
        raise KeyringUnavailable("the keyring package cannot be loaded (reinstall mcp-patchbay)") from None
    backend = keyring.get_keyring()
    if backend.priority <= 0:  # keyring's fail backend (0), an empty chainer or the null backend (-1)
        raise KeyringUnavailable("no keyring backend is available on this system (none of the OS's keyrings was found)")
    return backend


def backend_name() -> str:
    """The backend's name, for people ("SecretService Keyring", "macOS Keyring")."""
    return _backend().name


def read(name: str) -> str | None:
    """The secret ``name``, or None when the keyring has none of that name."""
    backend = _backend()
    try:
        value = backend.get_password(SERVICE, name)
    except Exception as exc:  # backends raise their own errors too (D-Bus, OSError): none may end a config load
        # The backend's words can name paths and buses: the log has them, the reason (which may
        # reach the model as a server's status) only the kind.
        logger.warning("reading secret %r from the keyring (%s) failed", name, backend.name, exc_info=True)
        raise KeyringUnavailable(f"the keyring refused to read it ({type(exc).__name__}; the log says why)") from None
    if value is not None:
        remember(value)
    return value


def write(name: str, value: str) -> None:
    """Store ``value`` as the secret ``name`` (replacing any)."""
    from keyring.errors import KeyringError

    backend = _backend()
    try:
        backend.set_password(SERVICE, name, value)  # pyright: ignore[reportUnknownMemberType]
    except KeyringError as exc:
        raise KeyringUnavailable(f"the keyring refused to store it ({type(exc).__name__}: {exc})") from None
    remember(value)


def delete(name: str) -> bool:
    """Remove the secret ``name``; False when there was none."""
    from keyring.errors import KeyringError, PasswordDeleteError

    backend = _backend()
    try:
        if backend.get_password(SERVICE, name) is None:
            return False
        backend.delete_password(SERVICE, name)
    except PasswordDeleteError:
        return False
    except KeyringError as exc:
        raise KeyringUnavailable(f"the keyring refused to delete it ({type(exc).__name__}: {exc})") from None
    return True
