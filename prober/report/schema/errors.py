"""The one error the report layer raises for input it cannot use."""

from __future__ import annotations

from prober.common.errors import UserError


class BadInput(UserError):
    """Input we cannot use. The message is one line that names the file and the problem."""
