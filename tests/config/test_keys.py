"""Each configuration key is declared once (`config.keys.KEYS`): its parser, flag and help,
with the default taken from `Config`; the loader, the environment and the flags follow it."""

from __future__ import annotations

import dataclasses

import pytest

from prober.cli import build_parser
from prober.config.keys import KEYS, Flag, _unset
from prober.config.load import PARSERS
from prober.config.model import Config


def test_every_config_field_is_one_key_and_every_key_a_field() -> None:
    names = [key.name for key in KEYS]
    assert len(names) == len(set(names))
    assert set(names) == {f.name for f in dataclasses.fields(Config)}
    assert set(PARSERS) == set(names)


def _run_help() -> str:
    parser = build_parser()
    (run,) = [
        choice
        for action in parser._subparsers._group_actions  # type: ignore[union-attr]
        for name, choice in action.choices.items()
        if name == "run"
    ]
    return " ".join(run.format_help().split())


@pytest.mark.parametrize("key", KEYS, ids=lambda k: k.name)
def test_every_key_has_its_flag_and_help_and_shows_configs_default(key) -> None:
    text = _run_help()
    assert f"{key.option} " in text or text.endswith(key.option)
    assert " ".join(key.described().split()) in text


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("interval", "(100ms)"),
        ("quiet_interval", "(1s)"),
        ("summary_interval", "(1m0s)"),
        ("workers", "(2)"),
        ("listen", "(127.0.0.1:9090)"),
        ("event_log_max_size", "(32MiB)"),
        ("event_log_keep_runs", "(5)"),
        ("event_log_keep_size", "(512MiB)"),
        ("protocols", "(http1,http2)"),
    ],
)
def test_the_default_in_help_is_configs(name, shown) -> None:
    (key,) = [k for k in KEYS if k.name == name]
    assert key.described().endswith(shown)


@pytest.mark.parametrize(
    ("default", "unset"),
    [(None, True), (False, True), ("", True), ((), True), ({}, True), (0, False), (0.0, False)],
)
def test_a_zero_default_is_shown_and_an_empty_one_is_not(default, unset) -> None:
    assert _unset(default) is unset


def test_switches_and_repeated_flags_reach_the_loader_as_values() -> None:
    args = build_parser().parse_args(
        ["run", "--in-cluster", "--label", "a=1", "--label", "b=2",
         "--target", "internal-lb=https://x:6443", "--event-log-stdout"]
    )  # fmt: skip
    by_name = {k.name: k for k in KEYS}
    assert by_name["in_cluster"].flag is Flag.SWITCH
    assert args.in_cluster is True
    assert by_name["labels"].gather is not None
    assert by_name["labels"].gather(args.labels) == "a=1,b=2"
    assert by_name["targets"].gather is not None
    assert by_name["targets"].gather(args.targets) == [
        {"lb": "internal-lb", "url": "https://x:6443"}
    ]
    assert args.event_log_stdout == "all"
