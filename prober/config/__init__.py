"""Typed, validated configuration of `prober run`: YAML, then `PROBER_<KEY>` environment
variables, then flags; every fault is one `ConfigError` line naming the file, field or value."""

from prober.config.load import ConfigError, load_config
from prober.config.model import Config, Target, with_discovered

__all__ = ["Config", "ConfigError", "Target", "load_config", "with_discovered"]
