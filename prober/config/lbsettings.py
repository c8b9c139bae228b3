"""The `lb_settings` key: a cluster's own LB health checks and shutdown timing, where they are
not its platform's row of `core.budgets` (an LB set up by hand, a changed delay).

    lb_settings:
      shutdown_delay: 129s          # the kube-apiserver's exact --shutdown-delay-duration
      graceful_termination: 194s
      external-lb: {interval: 10s, timeout: 10s, unhealthy: 2, healthy: 2, connections: reset}
      service-network: {sync_delay: 2s}   # its proxies' reprogramming after T0
      internal-lb: {hairpin: true}  # a master's requests to it are answered by the master

Every field is optional; what is left out is the row's. The daemon writes the settings into
its run record, so that `prober analyze` judges each LB by them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from prober.common.values import Invalid, duration, shown, whole
from prober.config.fields import boolean
from prober.core.budgets import Flows
from prober.core.models import LB, CheckSettings, LBSettings

_TIMES = ("shutdown_delay", "graceful_termination")
_CHECK: dict[str, Callable[[object], Any]] = {
    "interval": duration(),
    "timeout": duration(),
    "unhealthy": whole(1),
    "healthy": whole(1),
    "fastinter": duration(),
    "sync_delay": duration(allow_zero=True),
    "hairpin": boolean,
}
_LBS = tuple(str(lb) for lb in LB if lb is not LB.LOCALHOST)


def lb_settings(value: object) -> LBSettings | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise Invalid(f"expected a mapping of {', '.join((*_TIMES, *_LBS))}, got {shown(value)}")
    times: dict[str, float] = {}
    lbs: dict[LB, CheckSettings] = {}
    for key, given in value.items():
        if key in _TIMES:
            times[key] = _at(f".{key}", duration(allow_zero=True), given)
        elif key in _LBS:
            lbs[LB(key)] = _check(f".{key}", given)
        else:
            known = ", ".join((*_TIMES, *_LBS))
            raise Invalid(f"unknown key {shown(key)} (known: {known})", f".{key}")
    return LBSettings(times.get("shutdown_delay"), times.get("graceful_termination"), lbs)


def _check(where: str, value: object) -> CheckSettings:
    if not isinstance(value, Mapping):
        raise Invalid(f"expected a mapping of {', '.join(_CHECK)}, connections", where)
    fields: dict[str, Any] = {}
    for key, given in value.items():
        if key in _CHECK:
            fields[key] = _at(f"{where}.{key}", _CHECK[key], given)
        elif key == "connections":
            flows = (str(Flows.RESET), str(Flows.KEPT))
            if given not in flows:
                raise Invalid(
                    f"expected {' or '.join(flows)}, got {shown(given)}", f"{where}.{key}"
                )
            fields[key] = given
        else:
            known = ", ".join((*_CHECK, "connections"))
            raise Invalid(f"unknown key {shown(key)} (known: {known})", f"{where}.{key}")
    return CheckSettings(**fields)


def _at(where: str, parse: Callable[[object], Any], value: object) -> Any:
    try:
        return parse(value)
    except Invalid as exc:
        raise Invalid(exc.problem, where + exc.sub) from None
