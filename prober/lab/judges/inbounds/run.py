"""A lab run's outputs held to their bounds (`prober.lab.judges.inbounds.outputs`), the lab's own
with them: `lab-result.json`'s measured reactions, each beside its bound, and the report
`prober lab` prints. `prober lab --check` fails a run with an estimate outside its bound,
as it fails one whose truth lies outside it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prober.lab.judges.inbounds.outputs import READERS, Reader, check_outputs
from prober.lab.judges.inbounds.text import Checked, check_text

LAB_RESULT = "lab-result.json"
PRINTED = "prober lab's output"


def check_lab_result(file: str, doc: Mapping[str, Any]) -> Checked:
    """Each shutdown's streams: the reaction measured, and its bound."""
    checked = Checked()
    for s, shutdown in enumerate(doc["shutdowns"]):
        for r, row in enumerate(shutdown["streams"]):
            key = f"{row['lb']} {row['protocol']} {row['connection']}"
            where = f"shutdowns[{s}] ({shutdown['apiserver']}).streams[{r}] ({key}) measured"
            checked.hold(file, where, row["measured"], row["lo"], row["hi"])
    return checked


LAB_READERS: tuple[Reader, ...] = (*READERS, Reader(LAB_RESULT, check_lab_result))


def check_lab_run(out: Path, printed: str, lab_result: Mapping[str, Any]) -> Checked:
    """A run about to be reported: the files under `out`, what it printed, and its
    lab-result.json before it is written (so that what this finds can go in it)."""
    checked = check_outputs(out)
    checked.add(check_text(PRINTED, printed))
    checked.add(check_lab_result(LAB_RESULT, lab_result))
    return checked
