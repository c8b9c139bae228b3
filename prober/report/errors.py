"""The one error the report layer raises for input it cannot use, and the exit codes."""

from __future__ import annotations

EXIT_OK = 0
EXIT_VERDICT_FAILED = 1
EXIT_BAD_INPUT = 2


class BadInput(Exception):
    """Input we cannot use. The message is one line that names the file and the problem."""
