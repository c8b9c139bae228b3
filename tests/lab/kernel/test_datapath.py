"""Which data path a run takes, and the one-line errors when the asked-for one cannot run."""

from __future__ import annotations

import pytest

from prober.lab.infra import datapath
from prober.lab.infra.datapath import DataPathError, choose


@pytest.mark.parametrize("platform", ["aws", "gcp", "azure", "none"])
def test_the_l4_platforms_take_the_kernel_path_by_default(platform: str) -> None:
    assert choose(platform, None) == (True, None)
    assert choose(platform, "kernel") == (True, None)
    assert choose(platform, "haproxy") == (False, None)


def test_bare_metal_runs_haproxy_and_refuses_the_kernel_path() -> None:
    assert choose("metal", None) == (False, None)
    with pytest.raises(DataPathError, match=r"^--lb kernel: metal's API LB is HAProxy on the"):
        choose("metal", "kernel")


def test_without_namespaces_the_default_says_why_and_falls_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Stands for a machine without root: the probe for namespaces is what changes there.
    monkeypatch.setattr(datapath, "kernel_unavailable", lambda: "cannot make a namespace")
    assert choose("aws", None) == (
        False,
        "kernel LBs unavailable: cannot make a namespace; HAProxy stands in for them",
    )
    with pytest.raises(DataPathError, match=r"^--lb kernel: cannot make a namespace$"):
        choose("aws", "kernel")


def test_an_unknown_path_is_named() -> None:
    with pytest.raises(DataPathError, match=r"^--lb: 'ebpf' is not one of kernel, haproxy$"):
        choose("aws", "ebpf")
