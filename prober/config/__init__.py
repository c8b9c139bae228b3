"""Typed, validated configuration of `prober run`: YAML, then `PROBER_<KEY>` environment
variables, then flags; every fault is one `ConfigError` line naming the file, field or value."""

from prober.config.load import ConfigError, load_config, service_account
from prober.config.model import Config, Credentials, Target, with_discovered

__all__ = [
    "Config",
    "ConfigError",
    "Credentials",
    "Target",
    "load_config",
    "service_account",
    "with_discovered",
]
