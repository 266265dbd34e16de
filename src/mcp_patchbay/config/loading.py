"""Loading the config file: reading it, its top level, and the ``Config`` it makes.

:func:`load_config` reads the file; :func:`parse_config` takes its text: JSON
(``jsontext``), the top-level keys, the ``"patchbay"`` settings, and the server entries of
both shapes, ``mcpServers`` then ``servers``, each built by ``entries``, then the
``"profiles"`` (``profiles``, which also fills in the gateway's access rules that name one). A top-level key
that is not ours is a mistake when it reads as one of ours (misspelt, VS Code's ``mcp``
wrapper, an entry out of place), else a client's own, ignored: a client's file can be used
as it is. A mistake in the file as a whole is collected with the others and raised as one
:class:`ConfigError`; a mistake inside an entry only disables that entry. The fast path's one
switch is decided here (``settings.fast_path_switch``: the setting, its old keys, ``$PATCHBAY_FAST_PATH``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from mcp_patchbay.bounded_read import FileRefused, read_config
from mcp_patchbay.config.entries import build_entry
from mcp_patchbay.config.gateway import GatewayOAuth, GatewaySettings
from mcp_patchbay.config.jsontext import JsonObject, duplicate_keys, parse_json
from mcp_patchbay.config.keys import SHAPES, TOP_LEVEL_KEYS
from mcp_patchbay.config.models import Config, OAuthSettings, RemoteSpec, ServerEntry, StdioSpec
from mcp_patchbay.config.problems import ConfigError, ConfigProblem, did_you_mean, key_path, quote, validation_problems
from mcp_patchbay.config.profiles import apply_profile, parse_profiles, resolve_access_profiles
from mcp_patchbay.config.settings import OLD_SWITCHES, Settings, fast_path_switch
from mcp_patchbay.config.variables import expand_strings
from mcp_patchbay.config.withheld import asked, held, withheld

__all__ = ["load_config", "parse_config"]

logger = logging.getLogger(__name__)


def _top_level_problem(key: str, value: object) -> ConfigProblem | None:
    """A top-level key that is not ours: a mistake when it reads as one of ours (misspelt, VS Code's
    ``mcp`` wrapper, a server entry out of place); else None, a client's own key, ignored."""
    if key == "mcp" and isinstance(value, dict):
        message = "unknown top-level key 'mcp' (VS Code's settings.json shape): move its 'servers' to the top level"
    elif isinstance(value, dict) and ("command" in value or "url" in value):
        message = f"unknown top-level key {quote(key)}: server entries go inside 'mcpServers'"
    elif hint := did_you_mean(key, TOP_LEVEL_KEYS):
        message = f"unknown top-level key {quote(key)}{hint}"
    else:
        return None
    return ConfigProblem("", message)


def parse_config(text: str, path: Path, environ: Mapping[str, str] | None = None) -> Config:
    """Parse config file contents; ``path`` names the file in messages and in ``Config.path``.

    ``environ`` (default ``os.environ``) supplies ``${VAR}`` values and ``$PATCHBAY_FAST_PATH``. Raises ConfigError.
    """
    path = Path(path).absolute()
    env: Mapping[str, str] = os.environ if environ is None else environ
    data = parse_json(text, path)
    if not isinstance(data, JsonObject):
        raise ConfigError(path, "", 'expected a JSON object at the top level, like {"mcpServers": {...}}')

    fatal: list[ConfigProblem] = [
        ConfigProblem(key_path(key), "key given more than once") for key in data.duplicates if key in TOP_LEVEL_KEYS
    ]
    ignored: list[str] = []
    for key, value in data.items():
        if key in TOP_LEVEL_KEYS:
            continue
        problem = _top_level_problem(key, value)
        if problem is None:
            ignored.append(key)
        else:
            fatal.append(problem)

    settings = _settings(data, path, env, fatal)
    gateway = _gateway(data, env, fatal)

    entries: list[ServerEntry] = []
    raws: dict[str, object] = {}
    first_shape: dict[str, str] = {}
    for shape in SHAPES:
        if shape not in data:
            continue
        servers = data[shape]
        if not isinstance(servers, JsonObject):
            fatal.append(ConfigProblem(shape, "expected an object mapping server names to entries"))
            continue
        fatal.extend(
            ConfigProblem(key_path(shape, name), f"server name {quote(name)} given more than once")
            for name in servers.duplicates
        )
        for name, raw in servers.items():
            if name in first_shape:
                fatal.append(
                    ConfigProblem(
                        key_path(shape, name), f"server name {quote(name)} is already used in {first_shape[name]}"
                    )
                )
                continue
            first_shape[name] = shape
            entries.append(build_entry(shape, name, raw, path, env))
            raws[name] = raw

    entries = _withhold(data, env, gateway, entries, raws)
    profiles = parse_profiles(data, list(first_shape), fatal)
    gateway = resolve_access_profiles(gateway, profiles, fatal)

    if fatal:
        raise ConfigError.from_problems(path, fatal)
    return Config(
        path=path,
        settings=settings,
        servers=tuple(entries),
        gateway=gateway,
        ignored_keys=tuple(ignored),
        profiles=profiles,
    )


def _settings(data: JsonObject, path: Path, env: Mapping[str, str], fatal: list[ConfigProblem]) -> Settings:
    """The ``"patchbay"`` object (the defaults without one), with the fast path's one switch
    decided (``fast_path_switch``); its problems are added to ``fatal``."""
    old_switches = _old_switches(data, path, fatal)
    settings = Settings()
    raw = data.get("patchbay")
    if "patchbay" in data and not isinstance(raw, JsonObject):
        fatal.append(ConfigProblem("patchbay", "expected an object"))
    elif isinstance(raw, JsonObject):
        fatal.extend(duplicate_keys(raw, ("patchbay",)))
        try:
            settings = Settings.model_validate(raw)
        except ValidationError as exc:
            fatal.extend(validation_problems(exc, ("patchbay",), {}, Settings.model_fields))
    given = settings.fast_path if isinstance(raw, JsonObject) and "fast_path" in raw else None
    fast_path = fast_path_switch(given, old_switches, env)
    return settings if fast_path is settings.fast_path else settings.model_copy(update={"fast_path": fast_path})


def _old_switches(data: JsonObject, path: Path, fatal: list[ConfigProblem]) -> dict[str, bool]:
    """The old keys of ``fast_path`` the file still has (``OLD_SWITCHES``), by dotted path, taken out
    of their objects (the models no longer know them), each with a warning naming the file and key."""
    found: dict[str, bool] = {}
    for section, key in OLD_SWITCHES:
        raw = data.get(section)
        if not isinstance(raw, JsonObject) or key not in raw:
            continue
        value = raw.pop(key)
        dotted = key_path(section, key)
        if not isinstance(value, bool):
            fatal.append(ConfigProblem(dotted, "expected true or false"))
            continue
        found[dotted] = value
        logger.warning(
            "%s: %s is deprecated: it is read as patchbay.fast_path, now the one switch of every fast path; "
            "set that instead",
            path,
            dotted,
        )
    return found


def _withhold(
    data: JsonObject,
    env: Mapping[str, str],
    gateway: GatewaySettings | None,
    entries: list[ServerEntry],
    raws: Mapping[str, object],
) -> list[ServerEntry]:
    """Each stdio entry with its ``withheld``: the names of ``env`` the proxy holds for its own use
    (``config.withheld``: the gateway's tokens, client secrets, remote servers' headers) that it does not name."""
    secrets: set[str] = set()  # as expanded: a ${secret:NAME}'s value is known only now
    if gateway is not None:
        secrets.update(gateway.tokens.values())
        secrets.update(gateway.request_state_keys)
    for entry in entries:
        if isinstance(entry.spec, RemoteSpec):
            secrets.update(entry.spec.headers.values())
            if isinstance(entry.spec.oauth, OAuthSettings) and entry.spec.oauth.client_secret is not None:
                secrets.add(entry.spec.oauth.client_secret)
    holding = held(data, env).with_values(secrets)
    kept: list[ServerEntry] = []
    for entry in entries:
        spec = entry.spec
        if isinstance(spec, StdioSpec):
            spec = spec.model_copy(update={"withheld": withheld(env, holding, asked(raws[entry.name]))})
        kept.append(entry if spec is entry.spec else dataclasses.replace(entry, spec=spec))
    return kept


def _gateway(data: JsonObject, env: Mapping[str, str], fatal: list[ConfigProblem]) -> GatewaySettings | None:
    """The ``"gateway"`` object, variables expanded; its problems are added to ``fatal``."""
    if "gateway" not in data:
        return None
    raw = data["gateway"]
    if not isinstance(raw, JsonObject):
        fatal.append(ConfigProblem("gateway", "expected an object"))
        return None
    fatal.extend(duplicate_keys(raw, ("gateway",)))
    problems: list[ConfigProblem] = []
    expanded = expand_strings(dict(raw), env, ("gateway",), problems)
    if problems:
        fatal.extend(problems)
        return None
    try:
        return GatewaySettings.model_validate(expanded)
    except ValidationError as exc:
        # validation_problems never quotes what was given (the object holds tokens).
        keys_for = {"oauth": GatewayOAuth.model_fields}
        fatal.extend(validation_problems(exc, ("gateway",), keys_for, GatewaySettings.model_fields))
        return None


def load_config(path: str | Path, environ: Mapping[str, str] | None = None, profile: str | None = None) -> Config:
    """Read and parse the config file at ``path`` (a regular file within ``$PATCHBAY_MAX_CONFIG_BYTES``:
    ``bounded_read``); a client's own top-level keys (Claude Desktop's
    ``globalShortcut``, ``preferences``) are ignored with an INFO line. ``profile``: narrow it to
    that profile (``profiles.apply_profile``). Raises ConfigError."""
    path = Path(path).absolute()
    try:
        text = read_config(path, environ)  # bounded: /dev/zero, a FIFO or a huge file is refused at once
    except FileNotFoundError:
        raise ConfigError(path, "", "file not found") from None
    except FileRefused as exc:
        hint = "; give the path of a JSON config file" if exc.kind is not None else ""
        raise ConfigError(path, "", exc.why + hint) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(path, "", f"not UTF-8 text (invalid byte at offset {exc.start})") from None
    except OSError as exc:
        raise ConfigError(path, "", f"cannot read the file: {exc.strerror or exc}") from None
    except ValueError as exc:  # the limit's variable
        raise ConfigError(path, "", str(exc)) from None
    config = parse_config(text, path, environ)
    if config.ignored_keys:
        logger.info(
            "%s: ignoring top-level keys that are not patchbay's (a client's own settings): %s",
            path,
            ", ".join(config.ignored_keys),
        )
    return config if profile is None else apply_profile(config, profile)
