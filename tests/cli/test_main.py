"""The `prober` entry point: help, version, exit codes, a closed pipe."""

from __future__ import annotations

import subprocess
import sys

import pytest

from prober.cli import COMMANDS, build_parser, main
from prober.common.exits import ExitCode


def test_every_command_has_help_with_an_example() -> None:
    parser = build_parser()
    for name in COMMANDS:
        text = parser._subparsers._group_actions[0].choices[name].format_help()  # type: ignore[union-attr]
        assert "example" in text.lower(), name


def test_no_command_is_bad_usage(capsys) -> None:
    assert main([]) == ExitCode.BAD_INPUT
    assert "COMMAND" in capsys.readouterr().err


FLOOD = """
import sys, types
import prober.cli as cli

def register(subparsers):
    parser = subparsers.add_parser("flood")
    parser.set_defaults(handler=lambda args: [print("x" * 1000) for _ in range(10_000)] and 0)

module = types.ModuleType("prober.cli.flood")
module.register = register
sys.modules["prober.cli.flood"] = module
cli.COMMANDS = ("flood",)
sys.exit(cli.main(["flood"]))
"""


def test_a_reader_that_leaves_early_gets_no_traceback() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", FLOOD], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    proc.stdout.read(1)
    proc.stdout.close()
    _, err = proc.communicate(timeout=30)
    assert b"Traceback" not in err, err.decode()
    assert proc.returncode == ExitCode.BROKEN_PIPE


def test_an_unknown_platform_lists_the_platforms_that_exist(capsys) -> None:
    """As --scenario lists its choices; --platform named only what was wrong."""
    with pytest.raises(SystemExit) as stopped:
        main(["lab", "--platform", "foo,aws,bar"])
    assert stopped.value.code == ExitCode.BAD_INPUT
    assert capsys.readouterr().err.splitlines()[-1] == (
        "prober lab: error: argument --platform: unknown platform 'foo', 'bar' "
        "(choose from 'aws', 'azure', 'gcp', 'metal', 'none')"
    )
