"""`promtool check metrics` on an exposition, as Prometheus's own linter sees it."""

from __future__ import annotations

import subprocess


def promtool_problems(exposition: bytes) -> str:
    """Everything promtool says about the exposition; empty when it is clean."""
    checked = subprocess.run(
        ["promtool", "check", "metrics"], input=exposition, capture_output=True, check=False
    )
    said = (checked.stdout + checked.stderr).decode()
    return said or ("" if checked.returncode == 0 else f"exit {checked.returncode}")
