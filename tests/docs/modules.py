"""`docs/modules.md`: every module of `prober`, by package, with the first sentence of its
docstring. Made from the code, never by hand: `tests/docs/test_architecture.py` fails when it
is not what this prints, so a module added, moved or renamed shows in the diff of the change.

    make golden        # also runs: .venv/bin/python -m tests.docs.modules --update
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBER = ROOT / "prober"
INDEX = ROOT / "docs" / "modules.md"

HEAD = """# Module index

For: contributors looking for where a thing lives.

Every module of `prober`, by package, with the first sentence of its docstring. Generated
from the code by `tests/docs/modules.py` (`make golden`); a test holds this file to it. How the
packages fit together is in `ARCHITECTURE.md`.
"""

_SENTENCE = re.compile(r"(.+?\.)(?:\s|$)")


def first_sentence(path: Path) -> str:
    """The docstring's first sentence on one line, or what is missing."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    if not doc:
        return "(no docstring)"
    text = " ".join(doc.split("\n\n", 1)[0].split())  # the first paragraph
    match = _SENTENCE.match(text)
    return (match.group(1) if match else text).rstrip(".:;")


def render() -> str:
    lines = [HEAD]
    packages: dict[str, list[str]] = {}
    for path in sorted(PROBER.rglob("*.py")):
        relative = path.relative_to(PROBER)
        if len(relative.parts) == 1 or relative.name == "__main__.py":
            continue
        shown = (
            relative.parent.as_posix() + "/"
            if relative.name == "__init__.py"
            else (relative.as_posix())
        )
        packages.setdefault(relative.parts[0], []).append(f"- `{shown}`: {first_sentence(path)}")
    for package, entries in packages.items():
        lines += [f"## `{package}`", "", *entries, ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="write docs/modules.md anew")
    args = parser.parse_args(argv)
    text = render()
    if args.update:
        INDEX.write_text(text, encoding="utf-8")
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
