"""The golden fixture's texts read as sentences for people: no message ends in a connective
or a comma, a count of one takes the singular, and no figure is printed to more digits than
a person reads (seconds to two decimals in text; full precision stays in the JSON's numbers)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

EXPECTED = Path(__file__).parent / "expected"
CONNECTIVES = {
    "and", "or", "but", "when", "where", "which", "that", "because", "so", "as", "if",
    "while", "then", "with", "of", "to", "by", "for", "the", "a", "its",
}  # fmt: skip
# `1 requests`, `1 intervals`, `1 answers`: a count of one in the plural.
ONE_IN_THE_PLURAL = re.compile(r"(?<![\d.])1 (requests|intervals|answers|watches|ends|tests)\b")
# More than three decimals of a figure in a sentence, as `5.81395 s` or `37.5969 s`.
LONG_FIGURE = re.compile(r"\b\d+\.\d{4,} s\b")


def texts() -> list[str]:
    """Every message and finding of the golden run's junit.xml and summary.json verdicts."""
    found: list[str] = []
    root = ET.parse(EXPECTED / "analyze" / "junit.xml").getroot()
    for case in root.iter("testcase"):
        for child in case:
            found += [child.get("message") or "", *(child.text or "").splitlines()]
    summary = json.loads((EXPECTED / "analyze" / "summary.json").read_text())
    found += [v["message"] for v in summary["verdicts"]]
    found += summary["explained"]
    return [t for t in found if t.strip()]


@pytest.mark.parametrize("text", texts())
def test_a_message_is_a_whole_sentence(text: str) -> None:
    last = re.findall(r"[\w'-]+|[^\w\s]", text.strip())[-1]
    assert last.lower() not in CONNECTIVES, text
    assert last != ",", text
    assert not ONE_IN_THE_PLURAL.search(text), text
    assert not LONG_FIGURE.search(text), text


def test_the_printed_run_reads_as_the_junit_counts() -> None:
    printed = (EXPECTED / "stdout" / "analyze.txt").read_text().splitlines()
    root = ET.parse(EXPECTED / "analyze" / "junit.xml").getroot()
    tests, failed, skipped = (int(root.get(k, "")) for k in ("tests", "failures", "skipped"))
    passed = tests - failed - skipped
    assert f"verdicts (junit.xml): {tests} tests, {failed} failed, {passed} passed, " in (
        "\n".join(printed)
    )
    summary = json.loads((EXPECTED / "analyze" / "summary.json").read_text())
    assert summary["counts"] == {
        "tests": tests, "failed": failed, "passed": passed, "skipped": skipped, "by_design": 0,
    }  # fmt: skip
