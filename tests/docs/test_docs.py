"""The README and docs/ hold what a newcomer needs, in the order they need it.

The README's first screen shows the product (the picture, the two commands, where their
outputs land); every page says whom it is for; every relative link resolves; and every word
the outputs use is in the glossary, the `summary.json` fields taken from a real summary
(the golden one), not from a hand list.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
GLOSSARY = DOCS / "glossary.md"
GOLDEN = ROOT / "tests" / "golden" / "expected"
FIRST_SCREEN = 60
PAGES = [README, *sorted(DOCS.glob("*.md"))]

# Maps in summary.json whose keys are data (apiserver ids, stream names), not field names.
DATA_KEYED = {"apiservers", "retry_after", "servers"}
# Terms of art of report.html's headings and legend, and of the daemon's pacing.
TERMS: tuple[str, ...] = ("window", "reaction", "bound", "witness", "held", "late", "rests")
TERMS += ("rise", "T0", "T1", "delay", "disruption", "early", "blind", "doomed", "same-node")
TERMS += ("felt",)
# Of those, the ones report.html itself shows (so this list cannot drift from the page).
REPORT_TERMS = ("window", "reaction", "late", "T0", "T1", "disruption", "early", "bound")

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def first_screen() -> str:
    return "".join(README.read_text().splitlines(keepends=True)[:FIRST_SCREEN])


def summary_fields(value: Any, parent: str = "") -> Iterator[str]:
    """Every key of a JSON document, recursively, but for the keys of data-keyed maps;
    a key joining phases with `|` names each."""
    if isinstance(value, dict):
        for key, item in value.items():
            if parent not in DATA_KEYED:
                yield from key.split("|")
            yield from summary_fields(item, key)
    elif isinstance(value, list):
        for item in value:
            yield from summary_fields(item, parent)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in page.read_text().splitlines() if line[:1] == "#"}


def broken_links(page: Path) -> list[str]:
    """The relative links of a page whose file, or whose heading in it, does not exist."""
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(target)
            continue
        if anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(target)
    return broken


def audience(page: Path) -> str:
    """The page's first line of prose after its title."""
    lines = [line for line in page.read_text().splitlines()[1:] if line.strip()]
    return lines[0] if lines else ""


def test_the_first_screen_shows_the_picture_the_commands_and_the_outputs() -> None:
    head = first_screen()
    assert "](docs/rollout.svg)" in head
    assert "](docs/glossary.md)" in head
    for command in ("make demo", "make test", "lab-out/<timestamp>/"):
        assert command in head
    written = [p.name for p in (GOLDEN / "analyze").iterdir()]
    for name in [*written, "events.jsonl", "lab-result.json"]:
        assert f"`{name}`" in head, name
    patterns = [t for t in re.findall(r"`([^`\s]+)`", head) if "*" in t]
    for origin in (GOLDEN / "origin").iterdir():
        assert any(fnmatch.fnmatch(origin.name, p) for p in patterns), origin.name


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_page_says_whom_it_is_for(page: Path) -> None:
    assert audience(page).startswith("For: "), audience(page)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_glossary_defines_every_summary_field() -> None:
    summary = json.loads((GOLDEN / "analyze" / "summary.json").read_text())
    fields = set(summary_fields(summary))
    assert {"reaction_lo", "t1_hi_by", "blind_seconds", "delay_early"} <= fields
    glossary = GLOSSARY.read_text()
    named = set(re.findall(r"`([\w-]+)(?:\[\])?`", glossary))  # `rows[]` names a list
    assert sorted(fields - named) == []


def test_the_glossary_defines_every_term_of_art() -> None:
    glossary = GLOSSARY.read_text().lower()
    assert [t for t in TERMS if f"**{t.lower()}**" not in glossary] == []
    report = (GOLDEN / "analyze" / "report.html").read_text()
    assert [t for t in REPORT_TERMS if t not in report] == []


def test_the_checks_catch_what_they_look_for(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# There\n\n## A `code` heading\n")
    page.write_text(
        "# Page\n\nFor: nobody\n[a](there.md) [b](gone.md) [c](there.md#a-code-heading) "
        "[d](there.md#nowhere) [e](https://example.com/x)\n"
    )
    assert broken_links(page) == ["gone.md", "there.md#nowhere"]
    assert audience(page) == "For: nobody"
    fields = set(summary_fields({"a": {"b|c": 1}, "apiservers": {"id": "n"}, "d": [{"e": 0}]}))
    assert fields == {"a", "b", "c", "apiservers", "d", "e"}
