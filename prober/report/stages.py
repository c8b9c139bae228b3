"""The stages of `prober analyze`, in the order it runs them, and the modules of each: the one
place that says which module does which step (`analyze` runs them; a test traces a real run
and holds it to this table, `tests/report/test_pipeline_trace.py`).

Every module of the report package is in exactly one of: a stage, the helpers any stage may
call (they shape or carry what a stage hands them and judge nothing about a run), or the
modules `prober analyze` does not run (the pipeline itself and the other commands).
"""

from __future__ import annotations

from typing import Final

PACKAGE: Final = "prober.report"

STAGES: Final[dict[str, tuple[str, ...]]] = {
    # The logs read and each run replayed through the core trackers.
    "replay": ("eventfiles", "podlogs", "runs", "replay"),
    # What a run measured: its summary and its sections, its watch streams.
    "results": ("summary", "samenode", "connection_ages", "watches", "restarts"),
    # The history loaded, then every test judged against it.
    "verdicts": (
        "thresholds",
        "threshold_rows",
        "judging",
        "verdicts",
        "watch_verdicts",
        "budget_verdicts",
        "reset_verdicts",
        "age_verdicts",
        "early_verdicts",
        "run_verdict",
    ),
    # summary.json, junit.xml and report.html written; the run told in words.
    "documents": (
        "junit",
        "html_run",
        "capacity",
        "watch_lanes",
        "restart_table",
        "age_tables",
        "samenode_tables",
        "run_text",
    ),
}

# Called from any stage: types, I/O, words and drawing, nothing about a run worked out.
HELPERS: Final = (
    "analysis",
    "anchors",
    "bounds",
    "causes",
    "counts",
    "documents",
    "errors",
    "jsonio",
    "keys",
    "page",
    "phase_words",
    "svg",
    "tables",
    "timeline",
    "verdict_names",
)

# Not run by `prober analyze`: the pipeline itself, and the other commands' modules.
ELSEWHERE: Final = (
    "__init__",
    "analyze",
    "stages",
    "export",
    "history",
    "html_dashboard",
    "html_thresholds",
    "origin",
    "origin_autodl",
    "origin_timeline",
    "origin_types",
    "origin_watches",
    "queryresult",
    "recommend",
    "regression",
)

_STAGE_OF: Final = {f"{PACKAGE}.{m}": stage for stage, ms in STAGES.items() for m in ms}
_UNSTAGED: Final = {f"{PACKAGE}.{m}" for m in (*HELPERS, *ELSEWHERE)}


class UnplacedModule(LookupError):
    """A report module the table does not name: add it to a stage, or to the helpers."""


def stage_of(module: str) -> str | None:
    """The stage a module of the report package belongs to; None for a helper, for the
    pipeline and the other commands, and for any module outside the package."""
    if module in _STAGE_OF:
        return _STAGE_OF[module]
    if module in _UNSTAGED or not module.startswith(f"{PACKAGE}."):
        return None
    raise UnplacedModule(f"{module} is in no stage and is no helper: see report.stages")
