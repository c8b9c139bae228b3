"""Run `prober audit ...` through its real argument parser, registered alone, so these tests
do not depend on which other commands the shared `prober` parser holds at the moment."""

from __future__ import annotations

import argparse

from prober.cli import audit, dispatch


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="prober")
    audit.register(parser.add_subparsers(dest="command"))
    return dispatch(parser, argv)
