"""The one error the report layer raises for input it cannot use."""

from __future__ import annotations


class BadInput(Exception):
    """Input we cannot use. The message is one line that names the file and the problem."""
