"""Which data path a lab run's LBs take: the kernel's (pass-through, as the clouds' LBs and
kube-proxy are) or HAProxy's (a proxy that terminates TCP, as bare metal really runs)."""

from __future__ import annotations

from prober.common.errors import UserError
from prober.lab.infra.kernel.lbs import kernel_unavailable

PATHS = ("kernel", "haproxy")
# The platforms whose API LBs are L4 pass-through. Bare metal runs HAProxy on the masters.
L4_PLATFORMS = frozenset({"aws", "gcp", "azure", "none"})


class DataPathError(UserError, ValueError):
    """The data path asked for cannot run here or for this platform."""


def choose(platform: str, asked: str | None) -> tuple[bool, str | None]:
    """(kernel?, a line saying why the kernel path is not taken, if it was the default)."""
    if asked == "haproxy":
        return False, None
    if asked is not None and asked != "kernel":
        raise DataPathError(f"--lb: {asked!r} is not one of {', '.join(PATHS)}")
    if platform not in L4_PLATFORMS:
        if asked == "kernel":
            raise DataPathError(
                f"--lb kernel: {platform}'s API LB is HAProxy on the masters, not a "
                "pass-through LB; run it with --lb haproxy"
            )
        return False, None
    why = kernel_unavailable()
    if why is None:
        return True, None
    if asked == "kernel":
        raise DataPathError(f"--lb kernel: {why}")
    return False, f"kernel LBs unavailable: {why}; HAProxy stands in for them"
