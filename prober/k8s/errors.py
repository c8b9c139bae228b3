"""The k8s layer's one exception type, importable without loading the kubernetes client."""

from __future__ import annotations

from prober.common.errors import UserError


class ClusterError(UserError):
    """The cluster could not be read; the message is one line naming what and why."""
