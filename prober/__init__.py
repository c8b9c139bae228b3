"""prober: how long do the load balancers in front of kube-apiserver keep routing to a server
that is shutting down?"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("prober")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
