"""Load the configuration: the YAML file, then `PROBER_<KEY>` variables, then flags.

Every top-level key is declared once, in `keys.KEYS` (its parser, flag, help and, from
`Config`, its default); a value keeps the name of where it came from
(`FILE: key`, `PROBER_KEY`, `--key`) so that an error names it. Environment variables that
are not keys are ignored: Kubernetes injects `PROBER_PORT` and friends for a Service named
`prober`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from prober.common.errors import UserError
from prober.config import fields as f
from prober.config.keys import PARSERS, PATH_KEYS, REMOVED, TARGET_PATH_KEYS
from prober.config.model import SERVICE_ACCOUNT_DIR, Config, Credentials, with_credentials


class ConfigError(UserError, ValueError):
    """Configuration faults, each one line naming the file and line, variable or flag, and
    the field. Every fault of a load is in one error: a user fixing a file learns them all
    from one run, not one per run."""

    def __init__(self, *problems: str) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems

    def lines(self) -> list[str]:
        return list(self.problems)


@dataclass(frozen=True, slots=True)
class _Value:
    raw: object
    where: str  # names the source and the key, e.g. "prober.yaml: workers" or "--workers"


def env_name(key: str) -> str:
    return f"PROBER_{key.upper()}"


def flag_name(key: str) -> str:
    return "--" + key.replace("_", "-")


def load_config(
    path: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, object] | None = None,
) -> Config:
    """The valid configuration from its three sources, or `ConfigError` with every fault."""
    values: dict[str, _Value] = {}
    problems: list[str] = []
    if path is not None:
        values.update(_from_file(path, problems))
    environ = os.environ if env is None else env
    for key in PARSERS:
        if environ.get(env_name(key)) is not None:
            values[key] = _Value(environ[env_name(key)], env_name(key))
    problems += [_removed(env_name(key), key) for key in REMOVED if env_name(key) in environ]
    for key, raw in (flags or {}).items():
        if key in REMOVED:
            problems.append(_removed(flag_name(key), key))
        elif key not in PARSERS:
            problems.append(f"{flag_name(key)}: not a configuration key")
        elif raw is not None:
            values[key] = _Value(raw, flag_name(key))
    parsed: dict[str, Any] = {}
    for key, value in values.items():
        try:
            parsed[key] = PARSERS[key](value.raw)
        except f.Invalid as exc:
            problems.append(f"{value.where}{exc.sub}: {exc.problem}")
        except yaml.YAMLError as exc:
            problems.append(f"{value.where}: not YAML: {_one_line(exc)}")
    if problems:  # the rules across keys need every key's value: they wait for a clean load
        raise ConfigError(*problems)
    return _check(Config(**parsed), values)


def _removed(where: str, key: str) -> str:
    return f"{where}: no longer a setting: {REMOVED[key]}"


def _from_file(path: str, problems: list[str]) -> dict[str, _Value]:
    """The file's settings, each named `FILE:LINE: key`; unknown keys go to `problems`."""
    try:
        with open(path, encoding="utf-8") as stream:
            text = stream.read()
        document = yaml.safe_load(text)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not YAML: {_one_line(exc)}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: expected a mapping of settings, got {f.shown(document)}")
    lines = _key_lines(text)
    found: dict[str, _Value] = {}
    folder = os.path.dirname(path)
    for key, raw in document.items():
        where = f"{path}:{lines[key]}" if key in lines else path
        if key in REMOVED:
            problems.append(_removed(f"{where}: {key}", key))
        elif key not in PARSERS:
            problems.append(f"{where}: unknown key {key!r}")
        else:
            found[key] = _Value(_in_folder(key, raw, folder), f"{where}: {key}")
    return found


def _in_folder(key: str, raw: object, folder: str) -> object:
    """A path the file gives, relative to the file's folder (`keys.PATH_KEYS`); anything
    that is not a path is left for the key's parser to name."""

    def joined(value: object) -> object:
        if isinstance(value, str) and value and not os.path.isabs(value):
            return os.path.join(folder, value)
        return value

    if key in PATH_KEYS:
        return joined(raw)
    if key == "targets" and isinstance(raw, list):
        return [
            {k: joined(v) if k in TARGET_PATH_KEYS else v for k, v in item.items()}
            if isinstance(item, dict)
            else item
            for item in raw
        ]
    return raw


def _key_lines(text: str) -> dict[object, int]:
    """The line of each top-level key of a YAML mapping (the text parsed already)."""
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {
        key.value: key.start_mark.line + 1
        for key, _ in node.value
        if isinstance(key, yaml.ScalarNode)
    }


def _check(config: Config, values: Mapping[str, _Value]) -> Config:
    """Rules that span several keys."""

    def where(key: str) -> str:
        return values[key].where if key in values else key

    problems = []
    if config.in_cluster and config.kubeconfig is not None:
        problems.append(f"{where('kubeconfig')}: give either in_cluster or kubeconfig, not both")
    if not config.targets and not config.discovers:
        problems.append(
            "targets: none configured; list some, or discover them with --in-cluster"
            " or --kubeconfig"
        )
    if config.localhost and not config.discovers:
        problems.append(f"{where('localhost')}: only applies with --in-cluster or --kubeconfig")
    if config.node is not None and not config.discovers:
        problems.append(
            f"{where('node')}: which apiserver runs on it comes from the identity Leases: "
            "needs --in-cluster or --kubeconfig"
        )
    if problems:
        raise ConfigError(*problems)
    # The service account's files and the kubeconfig's CA are defaults only discovery brings
    # (`in_cluster` is discovery): `with_discovered` applies them after it, in the same rule.
    return with_credentials(config)


def service_account(config: Config) -> tuple[Credentials, ...]:
    """In a pod (`in_cluster`), the service account's CA and token are the last defaults."""
    if not config.in_cluster:
        return ()
    ca = os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt")
    token = os.path.join(SERVICE_ACCOUNT_DIR, "token")
    return (
        Credentials(
            ca_file=ca if os.path.isfile(ca) else None,
            token_file=token if os.path.isfile(token) else None,
        ),
    )


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())
