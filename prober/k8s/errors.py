"""The k8s layer's one exception type, importable without loading the kubernetes client."""


class ClusterError(Exception):
    """The cluster could not be read; the message is one line naming what and why."""
