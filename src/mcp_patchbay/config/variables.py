"""``${VAR}`` and ``${secret:NAME}`` expansion: the environment and the keyring in the config's values.

``${VAR}``, ``${VAR:-default}`` and VS Code's ``${env:VAR}`` are expanded in ``command``,
``args``, ``env`` values, ``cwd``, ``url``, header values and ``oauth.client_secret``
(:func:`expand_entry`), and in every string of the ``"gateway"`` object (:func:`expand_strings`).
``${secret:NAME}`` is expanded in the same places, from the OS keyring (``secretstore``, which
loads ``keyring`` only then). An unset variable, a secret the keyring does not hold, a system
with no keyring, and VS Code's own ``${input:...}`` and ``${workspaceFolder}`` forms, are
problems; a message never contains a variable's or a secret's value. One pass: a value put in
is never expanded again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, cast

from mcp_patchbay.config.problems import ConfigProblem, key_path, quote
from mcp_patchbay.config.withheld import VARIABLE

__all__ = ["expand", "expand_entry", "expand_strings"]

_VSCODE_INPUT = re.compile(r"\$\{(?:input|command|config):[^}]*\}")
_VSCODE_VARIABLES: Final = frozenset(
    {"workspaceFolder", "workspaceFolderBasename", "workspaceRoot", "userHome", "pathSeparator", "cwd", "file"}
)


def expand(text: str, environ: Mapping[str, str], key: str, problems: list[ConfigProblem]) -> str:
    """Expand ``${VAR}``, ``${VAR:-default}`` (default when unset or empty), ``${env:VAR}`` and
    ``${secret:NAME}``."""
    if "${" not in text:
        return text
    for match in _VSCODE_INPUT.finditer(text):
        problems.append(
            ConfigProblem(
                key,
                f"{quote(match.group(0))} is a VS Code input, which patchbay cannot ask for; "
                "use ${VAR} with an environment variable instead",
            )
        )

    def replace(match: re.Match[str]) -> str:
        if match.group("secret") is not None:
            return _secret(match.group("secret"), key, problems)
        name, default = match.group("name"), match.group("default")
        value = environ.get(name)
        if default is not None and not value:
            return default
        if value is None:
            if name in _VSCODE_VARIABLES:
                message = (
                    f"'${{{name}}}' is a VS Code variable, which patchbay does not expand; "
                    "use a literal path or an environment variable"
                )
            else:
                message = f"environment variable {quote(name)} is not set (use ${{{name}:-default}} for a fallback)"
            problems.append(ConfigProblem(key, message))
            return ""
        return value

    return VARIABLE.sub(replace, text)


def _secret(name: str, key: str, problems: list[ConfigProblem]) -> str:
    """The keyring's secret ``name``; a problem (saying what to do) when there is none."""
    from mcp_patchbay.config import secretstore

    wrong = secretstore.name_problem(name)
    if wrong is not None:
        problems.append(ConfigProblem(key, f"${{secret:{name}}}: {wrong}" if name.isprintable() else wrong))
        return ""
    try:
        value = secretstore.read(name)
    except secretstore.KeyringUnavailable as exc:
        problems.append(
            ConfigProblem(
                key,
                f"secret {quote(name)} cannot be read: {exc}. Where no keyring exists (a headless Linux, a "
                f"container), put the value in an environment variable and write ${{VAR}} here instead",
            )
        )
        return ""
    if value is None:
        problems.append(
            ConfigProblem(
                key,
                f"secret {quote(name)} is not in the keyring: store it with 'mcp-patchbay secret set {name}' "
                "(or use ${VAR} with an environment variable)",
            )
        )
        return ""
    return value


def expand_entry(
    data: dict[str, Any], environ: Mapping[str, str], prefix: tuple[str, str], problems: list[ConfigProblem]
) -> None:
    """Expand variables in place where the values have the right types (pydantic reports the rest)."""
    for key in ("command", "cwd", "url"):
        if isinstance(data.get(key), str):
            data[key] = expand(data[key], environ, key_path(*prefix, key), problems)
    args = data.get("args")
    if isinstance(args, list):
        data["args"] = [
            expand(a, environ, key_path(*prefix, "args", i), problems) if isinstance(a, str) else a
            for i, a in enumerate(cast("list[object]", args))
        ]
    for key in ("env", "headers"):
        mapping = data.get(key)
        if isinstance(mapping, dict):
            data[key] = {
                k: expand(v, environ, key_path(*prefix, key, k), problems) if isinstance(v, str) else v
                for k, v in cast("dict[str, object]", mapping).items()
            }
    oauth = data.get("oauth")
    if isinstance(oauth, dict) and isinstance(secret := cast("dict[str, object]", oauth).get("client_secret"), str):
        path = key_path(*prefix, "oauth", "client_secret")
        data["oauth"] = {**cast("dict[str, object]", oauth), "client_secret": expand(secret, environ, path, problems)}


def expand_strings(
    value: Any, environ: Mapping[str, str], prefix: tuple[str | int, ...], problems: list[ConfigProblem]
) -> Any:
    """``value`` with variables expanded in every string inside it (the ``"gateway"`` object)."""
    if isinstance(value, str):
        return expand(value, environ, key_path(*prefix), problems)
    if isinstance(value, dict):
        items = cast("dict[str, Any]", value).items()
        return {k: expand_strings(v, environ, (*prefix, k), problems) for k, v in items}
    if isinstance(value, list):
        return [expand_strings(v, environ, (*prefix, i), problems) for i, v in enumerate(cast("list[Any]", value))]
    return value
