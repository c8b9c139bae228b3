"""The report layer's JSON files on disk: written as every report writes them, read back
checked (UTF-8 text, strict JSON, the kind of file expected)."""

from __future__ import annotations

import json
from pathlib import Path

from prober.common import filekinds
from prober.core import strictjson
from prober.report.schema.errors import BadInput
from prober.report.schema.types import Document


def write_json(path: Path, document: Document) -> None:
    path.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n", encoding="utf-8")


def read_text(path: Path) -> str:
    """A report input's text, or BadInput naming the file and why not."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise BadInput(f"{path}: not UTF-8 text") from None


def read_json(path: Path, expected: str) -> dict[str, object]:
    """A JSON object that is `expected` (`filekinds.SUMMARY`, ...), or BadInput: naming the
    line and field of a number JSON has not, or what the file is if it is another kind."""
    text = read_text(path)
    try:
        doc = strictjson.loads(text)
    except ValueError as exc:
        wrong = filekinds.mismatch(path, filekinds.of_text(text), expected)
        raise BadInput(wrong or strictjson.located(str(path), exc)) from None
    wrong = filekinds.mismatch(path, filekinds.of_document(doc), expected)
    if wrong is not None:
        raise BadInput(wrong)
    if not isinstance(doc, dict):
        raise BadInput(f"{path}: expected a JSON object")
    return doc
