"""The exit codes of every `prober` command and of the lab's fake apiserver, in one place."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    # A verdict: `--check` found a failure (analyze, thresholds, audit, the lab), or the fake
    # apiserver was told to die (a kill is its verdict on itself).
    FAILED = 1
    BAD_INPUT = 2  # bad usage, a bad file, flag or value: one line on stderr names it
    INTERRUPTED = 128 + 2  # as a shell reports a process that SIGINT ended
    BROKEN_PIPE = 128 + 13  # as a shell reports a process that SIGPIPE ended
