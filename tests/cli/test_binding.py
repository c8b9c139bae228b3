"""Flags bind to a command's parameters by declaration: every keyword a command takes from
its parser has a destination of its name, so a flag renamed apart from its parameter fails
here (and at its first use) instead of running on the parameter's default."""

from __future__ import annotations

import argparse

import pytest

from prober.cli import build_parser
from prober.cli.lab import lab_options
from prober.cli.parsing import Forwarded, forward


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every command's parser, by its path (`audit summarize`)."""
    found = {}
    for action in parser._actions:  # argparse keeps no public list of its subparsers
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[name] = sub
                found |= {f"{name} {k}": v for k, v in subparsers(sub).items()}
    return found


def destinations(parser: argparse.ArgumentParser) -> set[str]:
    return {a.dest for a in parser._actions} | set(parser._defaults)


def test_every_forwarded_command_has_a_flag_for_each_keyword() -> None:
    forwarded = {
        name: sub for name, sub in subparsers(build_parser()).items()
        if isinstance(sub._defaults.get("handler"), Forwarded)
    }  # fmt: skip
    assert {"analyze", "origin", "export", "dashboard", "recommend", "audit summarize"} <= set(
        forwarded
    )
    for name, sub in forwarded.items():
        needs = sub._defaults["handler"].needs
        assert needs <= destinations(sub), f"prober {name}: no flag for {needs - destinations(sub)}"


def test_a_flag_renamed_apart_from_its_parameter_fails() -> None:
    def command(inputs: list[str], *, out: str, strict: bool, stdout: object = None) -> int:
        return 0

    parser = argparse.ArgumentParser()
    parser.add_argument("inputs", nargs="*")
    parser.add_argument("--out")
    parser.add_argument("--lenient", action="store_true")  # renamed from --strict
    handler = forward(command, "inputs")
    assert handler.needs == {"inputs", "out", "strict"}
    with pytest.raises(TypeError, match="command: no flag gives strict"):
        handler(parser.parse_args([]))


def test_the_labs_options_come_from_its_flags() -> None:
    args = build_parser().parse_args(["lab"])
    options = lab_options(args, "aws")
    assert (options.platform, options.scenario, options.servers) == ("aws", "rollout", 3)
    del args.watch_grace  # as if --watch-grace were renamed
    with pytest.raises(TypeError, match="LabOptions: no flag gives watch_grace"):
        lab_options(args, "aws")
