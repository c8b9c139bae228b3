"""report.html's estimates as a reader sees them (`inbounds`): its words and its timelines.

Words: every piece of text (a table cell, a verdict's message, an explained line, a mark's
title) read as shown (`inbounds.read_text`).

Timelines: what is drawn, in pixels, as `timeline` groups each mark with its band. A
`disruption-interval` group: the bar's left end must lie in the `start` band, its right end
in the `end` band (unless the bar is only the least width drawn, whose right end stands for
nothing); a `reaction` group: the bracket's end (its path's `H`) in the reaction's band; a
`window` group: the T0 line in T0's band; an `instance-t1` group (the capacity lanes,
`capacity`): the T1 line in T1's band. A band is drawn only where it meets the view; a
mark without its band is not held. Positions are the attributes' decimals, the band's right
edge its x plus its width.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from prober.lab.judges.inbounds.text import Checked, check_text
from prober.report.documents.timeline import LEAST

# The timeline's groups, and the mark and band classes inside each.
_GROUPS = ("disruption-interval", "reaction", "window", "instance-t1")
# A line held to its band: the group, the line's class and the band's, what the line is.
_LINES = {"window": ("t0", "t0-bound", "the T0 line"), "instance-t1": ("t1", "t1-bound", "T1")}
_PATH_END = re.compile(r"H(-?[\d.]+)")


@dataclass(slots=True)
class _Group:
    kind: str
    title: str = ""
    marks: list[dict[str, str]] = field(default_factory=list)

    def first(self, css: str, **extra: str) -> dict[str, str] | None:
        for mark in self.marks:
            if mark.get("class") == css and all(mark.get(k) == v for k, v in extra.items()):
                return mark
        return None


def _span(rect: dict[str, str]) -> tuple[float, float]:
    x = float(rect["x"])
    return x, round(x + float(rect["width"]), 6)


class _Page(HTMLParser):
    def __init__(self, file: str) -> None:
        super().__init__(convert_charrefs=True)
        self.file = file
        self.checked = Checked()
        self._hidden = 0  # inside <script> or <style>
        self._groups: list[_Group | None] = []  # every open <g>, None for those not held
        self._view = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag in ("script", "style"):
            self._hidden += 1
        elif tag == "svg" and "aria-label" in found:
            self._view = found["aria-label"]
        elif tag == "g":
            kind = found.get("class")
            self._groups.append(_Group(kind) if kind in _GROUPS else None)
        elif tag == "title":
            self._in_title = True
        elif tag in ("rect", "line", "path") and self._group is not None:
            self._group.marks.append(found)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._hidden -= 1
        elif tag == "title":
            self._in_title = False
        elif tag == "g" and self._groups:
            group = self._groups.pop()
            if group is not None:
                self._hold(group)

    def handle_data(self, data: str) -> None:
        if self._hidden:
            return
        group = self._group
        if self._in_title and group is not None and not group.title:
            group.title = data.strip()
        self.checked.add(check_text(self.file, data, "text"))

    @property
    def _group(self) -> _Group | None:
        return next((g for g in reversed(self._groups) if g is not None), None)

    def _hold(self, group: _Group) -> None:
        where = f"timeline {self._view!r}, {group.title!r}"
        if group.kind == "disruption-interval":
            bar = group.first("disruption")
            if bar is None:
                return
            left, right = _span(bar)
            drawn = [("start", left)]
            if float(bar["width"]) > LEAST:
                drawn.append(("end", right))
            for edge, x in drawn:
                band = group.first("disruption-bound", **{"data-edge": edge})
                if band is not None:
                    self.checked.hold(self.file, f"{where}: its {edge} at x", x, *_span(band))
        elif group.kind == "reaction":
            bracket, band = group.first("reaction"), group.first("reaction-bound")
            end = None if bracket is None else _PATH_END.search(bracket.get("d", ""))
            if end is not None and band is not None:
                x = float(end[1])
                self.checked.hold(self.file, f"{where}: the bracket's end at x", x, *_span(band))
        else:
            css, band_css, what = _LINES[group.kind]
            line, band = group.first(css), group.first(band_css)
            if line is not None and band is not None:
                x = float(line["x1"])
                self.checked.hold(self.file, f"{where}: {what} at x", x, *_span(band))


def check_html(file: str, text: str) -> Checked:
    """Every estimate report.html shows with its bound, in its words and in its drawings."""
    page = _Page(file)
    page.feed(text)
    page.close()
    return page.checked
