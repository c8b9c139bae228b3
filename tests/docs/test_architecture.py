"""docs/ARCHITECTURE.md is true to the code: every file and name it cites exists, and the
module index (docs/modules.md) is the one the code makes."""

from __future__ import annotations

import dataclasses
import importlib
import re
import tomllib
from pathlib import Path

from prober.core import models
from prober.core.models import RECORD_TYPES
from tests.docs import modules

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
# The docs that hold the design beside it; what they cite is checked alike.
DESIGN = (DOC, ROOT / "docs" / "lab.md", ROOT / "docs" / "watches.md")
PROBER = ROOT / "prober"
# Where a path the doc names may lie, besides prober/.
TREES = ("tests", "deploy", "bench", "scripts", "docs")

_CODE = re.compile(r"`([^`\n]+)`")
_DOTTED = re.compile(r"(?:prober\.)?([a-z_0-9]+(?:\.[A-Za-z_0-9]+)+)")
_FILE_TYPES = {"html", "txt", "json", "jsonl", "xml", "svg", "md", "yaml", "gz"}
_PATH = re.compile(r"[a-z_0-9]+(?:/[A-Za-z_0-9.*-]+)+/?")


def _modules() -> list[str]:
    """Every module of `prober`, as `pkg/sub/name` (packages as `pkg/sub`)."""
    found = []
    for path in sorted(PROBER.rglob("*.py")):
        relative = path.relative_to(PROBER).with_suffix("")
        if relative.name == "__init__":
            relative = relative.parent
        if relative.parts and relative.name != "__main__":
            found.append(relative.as_posix())
    return found


MODULES = _modules()
PACKAGES = {m.split("/")[0] for m in MODULES if "/" in m}


def _spans() -> list[str]:
    return [s for doc in DESIGN for s in _CODE.findall(doc.read_text(encoding="utf-8"))]


def _path_names(span: str) -> list[str]:
    """The paths of project files a code span names: `core/windows.py`, `fakeapiserver`."""
    return [p for p in _PATH.findall(span) if p.split("/")[0] in PACKAGES | set(TREES)]


def _dotted_names(span: str) -> list[str]:
    """Dotted names that start at a package: `daemon.pipeline`, `core.samenode.Placement`."""
    if "/" in span or " " in span.strip():
        return []
    match = _DOTTED.fullmatch(span.strip().rstrip("()"))
    if match is None or match.group(1).split(".")[0] not in PACKAGES:
        return []
    if match.group(1).rsplit(".", 1)[-1] in _FILE_TYPES:  # `report.html` is a file
        return []
    return [match.group(1)]


def _exists(path: str) -> bool:
    base = ROOT if path.split("/", maxsplit=1)[0] in TREES else PROBER
    if "*" in path:
        return any(base.glob(path))
    target = base / path.rstrip("/")
    return target.exists() or target.with_suffix(".py").exists()


def _resolves(dotted: str) -> bool:
    """`pkg.mod[.attr...]`: a module, or a name a module defines."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        name = "prober." + ".".join(parts[:cut])
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        obj: object = module
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return cut > 1 or len(parts) > 1
    return False


def test_every_path_the_doc_names_exists() -> None:
    missing = sorted({p for s in _spans() for p in _path_names(s) if not _exists(p)})
    assert not missing, f"docs/ARCHITECTURE.md names files that are not there: {missing}"


def test_every_dotted_name_the_doc_names_resolves() -> None:
    missing = sorted({d for s in _spans() for d in _dotted_names(s) if not _resolves(d)})
    assert not missing, f"docs/ARCHITECTURE.md names what the code lacks: {missing}"


def test_the_module_index_is_made_from_the_code() -> None:
    """docs/modules.md names every module with its docstring's first sentence, as made now:
    a module added, moved or renamed without `make golden` fails here."""
    assert modules.INDEX.read_text(encoding="utf-8") == modules.render(), (
        "docs/modules.md is not the code's: run `make golden` and review the diff"
    )


def test_every_module_says_what_it_is_for() -> None:
    assert "(no docstring)" not in modules.render()


def _event_log_rows() -> dict[str, tuple[str, str]]:
    """The event log table of the doc: kind -> (model, fields cell)."""
    text = DOC.read_text(encoding="utf-8")
    table = text[text.index("| kind | model | fields |") :].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([a-z_]+)` \| `([A-Za-z]+)` \| (.*) \|$", table, re.MULTILINE)
    return {kind: (model, cells) for kind, model, cells in rows}


def test_the_event_log_table_is_the_codecs() -> None:
    """Every record kind the codec writes has its row, under its model's name, and the row
    names every field of the model: a field added to a record without the doc fails here."""
    rows = _event_log_rows()
    assert {cls.KIND for cls in RECORD_TYPES} <= set(rows)
    for kind, (model, cells) in rows.items():
        cls = getattr(models, model, None)
        assert cls is not None, f"the {kind} row names {model}, which core.models lacks"
        assert kind == cls.KIND, (kind, model)
        named = set(_CODE.findall(cells))
        # A field the codec writes as several keys (`stream_id`: `stream`, `lb`, ...) is
        # named by them.
        written = [k for f in dataclasses.fields(cls) for k in f.metadata.get("keys", [f.name])]
        missing = [k for k in written if k not in named]
        assert not missing, f"the {kind} row does not name the fields {missing}"


def test_the_layers_drawn_are_the_contracts() -> None:
    """Section 1's picture of the layers is the first import-linter contract, in its order."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = contracts["contracts"][0]["layers"]
    text = DOC.read_text(encoding="utf-8")
    block = text[text.index("## 1. Layers") :].split("```")[1]
    names = re.compile(r"prober\.\w+(?:\s*\|\s*prober\.\w+)*")
    drawn = [names.match(line.strip()) for line in block.strip().splitlines()]
    assert [re.sub(r"\s*\|\s*", " | ", m.group(0)) for m in drawn if m] == layers
