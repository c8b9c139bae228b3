"""The one base of every error a user can cause, and the one place that turns it into output.

Each layer raises its own subclass (a bad config, a log that cannot be read, a cluster that
cannot be reached) with a message that is one line naming the file, field or value. The
command line catches `UserError` once, at its top (`prober.cli.dispatch`): it prints
`prober <command>: <message>` (once per problem, when it found several) and exits 2.
Nothing below the top prints such an error.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class UserError(Exception):
    """Input the command cannot use, or a place it cannot write: one line, exit 2."""

    def lines(self) -> list[str]:
        """The problems, one line each: a subclass that finds several says all of them."""
        return [str(self)]


@contextmanager
def writing(what: object) -> Iterator[None]:
    """An OSError while writing `what` is the user's to fix (--out names a file, a directory
    we may not write, a full disk): one line naming it."""
    try:
        yield
    except OSError as exc:
        raise UserError(f"cannot write {what}: {exc.strerror or exc}") from None
