"""The README's commands as a user types them: from a fresh folder that is not the
repository, with the default, relative out folder (`lab-out/<timestamp>/`), then the
commands docs/usage.md shows on relative paths, on what that run wrote.

`make demo` is `prober lab $(DEMO_ARGS)`: the lab here is `prober lab --check` through the
same `main`, with the test suite's time scale as DEMO_ARGS would give it. A relative path the
lab wrote into a file another process reads from another folder (a kubeconfig's CA, which a
reader resolves against the kubeconfig's folder) fails this run, and no test that passes an
absolute `tmp_path` would see it.
"""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from prober.cli import main
from prober.common.exits import ExitCode
from prober.lab import commands
from prober.lab.run import LabResult, run_lab

README = Path(__file__).resolve().parents[2] / "README.md"


@dataclass(frozen=True, slots=True)
class Typed:
    result: LabResult
    cwd: Path  # the user's folder
    out: Path  # the run's folder, relative to `cwd`, as the user finds it
    code: int
    stdout: str


async def typed_lab(folder: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Typed:
    """`prober lab --check ARGS` run in `folder` (a fresh one) with no --out. The lab's own
    result is kept as it passes from the run to its report, for the lab tests' assertions."""
    monkeypatch.chdir(folder)
    kept: list[LabResult] = []

    async def keeping(*run_args: object, **kwargs: object) -> LabResult:
        result = await run_lab(*run_args, **kwargs)  # type: ignore[arg-type]
        kept.append(result)
        return result

    monkeypatch.setattr(commands, "run_lab", keeping)
    code, stdout, stderr = await asyncio.to_thread(_main, ["lab", "--check", *args])
    assert stderr == "", stderr
    (result,) = kept
    (out,) = (folder / "lab-out").iterdir()
    return Typed(result, folder, out.relative_to(folder), code, stdout)


def _main(argv: Sequence[str]) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with redirect_stdout(stdout), redirect_stderr(stderr):
        code = main(argv)
    return code, stdout.getvalue(), stderr.getvalue()


def readme_outputs() -> list[str]:
    """What the README's table says `make demo` writes: file names, globs and folders."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## What the commands write", 1)[1].split("\n## ", 1)[0]
    names = []
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            names += re.findall(r"`([^`]+)`", first)
    return names


def missing_outputs(typed: Typed) -> list[str]:
    """The README's outputs that the run did not write, and the printed `wrote` lines that
    name no file."""
    folder = typed.cwd / typed.out
    missing = [name for name in readme_outputs() if not list(folder.glob(name.rstrip("/")))]
    for line in typed.stdout.splitlines():
        if line.startswith("wrote ") and not (typed.cwd / line.removeprefix("wrote ")).exists():
            missing.append(line)
    return missing


def docs_commands(typed: Typed) -> dict[str, tuple[int, list[str]]]:
    """docs/usage.md's commands on relative paths, in the user's folder, on the run's files:
    each one's exit code and what it wrote that is not there. `analyze` exits 1 where a
    verdict failed, which a default run may (its failures are the LBs')."""
    out = typed.out
    (typed.cwd / "history" / "run-1").mkdir(parents=True)
    (typed.cwd / "last-10-runs" / "run-1").mkdir(parents=True)
    lines = [
        f"analyze {out}/events.jsonl --out artifacts/",
        "thresholds history/ -o thresholds.json --out dashboard/",
        "thresholds --check thresholds.json last-10-runs/",
        "recommend --thresholds thresholds.json",
        f"analyze {out}/events.jsonl --thresholds thresholds.json --out artifacts/",
        f"audit summarize {out}/cluster --events {out}/events.jsonl --junit --out results",
        "origin artifacts/summary.json --out ci/",
    ]
    done: dict[str, tuple[int, list[str]]] = {}
    for line in lines:
        code, stdout, _ = _main(line.split())
        absent = [w for w in re.findall(r"^wrote (\S+)", stdout, re.M)
                  if not (typed.cwd / w).exists()]  # fmt: skip
        done[line] = (code, absent)
        if line.startswith("analyze") and "--thresholds" not in line:
            # The history the next commands read: this run's summary as one past run.
            summary = (typed.cwd / "artifacts" / "summary.json").read_bytes()
            for history in ("history", "last-10-runs"):
                (typed.cwd / history / "run-1" / "summary.json").write_bytes(summary)
    return done


ANALYZED = (ExitCode.OK, ExitCode.FAILED)  # a verdict may fail; bad input (2) may not
