"""Fixtures of the fault matrix, and its table at the end of the pytest run: one line per
fault with the samples started, recorded and lost, the result classes and the peak RSS."""

from __future__ import annotations

from typing import Any

import pytest

from tests.reliability.harness import Account

ACCOUNTS: list[Account] = []
NOTES: list[str] = []


@pytest.fixture
def report() -> Any:
    """`report(account)`: check it, print it, and keep it for the table."""

    def check(account: Account) -> Account:
        ACCOUNTS.append(account)
        print(account.line())
        assert account.problems() == []
        return account

    return check


@pytest.fixture
def notes() -> Any:
    """`notes(line)`: a line for the table that is not a fault's account (the soak)."""
    return NOTES.append


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not ACCOUNTS and not NOTES:
        return
    terminalreporter.section("reliability: every sample accounted for, per fault")
    for account in ACCOUNTS:
        terminalreporter.write_line(account.line())
        if account.did:
            terminalreporter.write_line(f"    {account.did}")
    for line in NOTES:
        terminalreporter.write_line(line)
