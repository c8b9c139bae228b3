"""docs/ARCHITECTURE.md is true to the code: every module it names exists, and every module
of every package is named in it. A module added, moved or removed without the doc fails here."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
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
    return _CODE.findall(DOC.read_text(encoding="utf-8"))


def _path_names(span: str) -> list[str]:
    """The paths of project files a code span names: `core/windows.py`, `lab/apiserver`."""
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


def _named() -> set[str]:
    """The modules the doc names: by path, by dotted name, as `name.py`, or as a bare name in
    its package's row of the package table."""
    named: set[str] = set()
    text = DOC.read_text(encoding="utf-8")
    for span in _spans():
        for path in _path_names(span):
            named.add(path.rstrip("/").removesuffix(".py"))
        for dotted in _dotted_names(span):
            parts = dotted.split(".")
            named.update("/".join(parts[:cut]) for cut in range(1, len(parts) + 1))
        if span.endswith(".py") and "/" not in span:
            named.update(m for m in MODULES if m.rsplit("/", 1)[-1] == span[:-3])
    for row in re.findall(r"^\| `([a-z_/]+)` \|(.*)$", text, re.MULTILINE):
        package, cells = row
        named.add(package)
        for span in _CODE.findall(cells):
            named.add(f"{package}/{span.strip().rstrip('/').removesuffix('.py')}")
    return named


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_every_module_of_the_package_is_named(package: str) -> None:
    named = _named()
    unnamed = [m for m in MODULES if m.split("/")[0] == package and m not in named]
    assert not unnamed, f"modules docs/ARCHITECTURE.md does not name: {unnamed}"
