"""One self-contained HTML page: inline CSS and script, and a policy that forbids the network."""

from __future__ import annotations

import re

from prober.report.format.svg import esc

# Nothing may be fetched at view time: the report must read the same offline, in a CI
# artifact viewer, years later.
_POLICY = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

# The timelines' classes (`report.documents.timeline`): a page's, and a picture's of its own.
SVG_CSS = """svg text { font: 12px system-ui, sans-serif; fill: #1b1b1b; }
svg .tick { fill: #333; } svg .axis-title { font-weight: 600; }
svg .axis { stroke: #333; } svg .grid { stroke: #e6e6e6; }
svg .row { stroke: #bbb; } svg .label { font-weight: 600; }
"""

_CSS = (
    """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1b1b1b;
       margin: 24px auto; max-width: 1360px; padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; }
h3 { font-size: 15px; margin: 18px 0 4px; }
.meta { color: #555; margin: 0 0 12px; }
table { border-collapse: collapse; margin: 6px 0 12px; display: block; max-width: 100%;
        overflow-x: auto; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 10px 3px 0; text-align: left;
         vertical-align: top; }
th { font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.passed { color: #0a6b2d; font-weight: 600; } .failed { color: #b00020; font-weight: 600; }
.skipped { color: #666; font-weight: 600; } .by-design { color: #8a5a00; font-weight: 600; }
details > summary { cursor: pointer; color: #0072b2; font-size: 12px; }
.outcome { border-left: 4px solid #b00020; padding: 6px 12px; background: #fdf3f4; }
.outcome.clean { border-left-color: #0a6b2d; background: #f1f8f3; }
.outcome ul { margin: 4px 0; padding-left: 18px; }
.why { color: #444; font-size: 12px; }
.legend { display: flex; flex-wrap: wrap; gap: 6px 18px; margin: 8px 0; }
.legend span { display: inline-flex; align-items: center; gap: 6px; }
.swatch { vertical-align: middle; }
"""
    + SVG_CSS
    + """\
.note { background: #fff6e0; border-left: 4px solid #e69f00; padding: 6px 10px; margin: 6px 0; }
.explain { background: #f4f7fb; border-left: 4px solid #0072b2; padding: 8px 12px; }
figure { margin: 4px 0 10px; } figcaption { color: #555; font-size: 12px; }
select { font: inherit; }
"""
)


def page(title: str, body: str, script: str = "") -> str:
    tail = f"<script>\n{script}\n</script>\n" if script else ""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_POLICY}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        f"{body}\n{tail}</body>\n</html>\n"
    )


def status_cell(status: str, why: str = "", more: tuple[str, ...] = ()) -> str:
    """A verdict's outcome and why, with every further finding behind a disclosure."""
    detail = f'<div class="why">{linked(why)}</div>' if why else ""
    if more:
        items = "".join(f"<li>{linked(m)}</li>" for m in more)
        detail += (
            f'<details class="why"><summary>all {len(more)} findings</summary>'
            f"<ul>{items}</ul></details>"
        )
    return f'<td><span class="{esc(status)}">{esc(status)}</span>{detail}</td>'


def linked(text: str) -> str:
    """`text` escaped, each `report.html#anchor` it names a link to that place on the page."""
    return _ANCHOR.sub(lambda m: f'<a href="#{m[1]}">{m[0]}</a>', esc(text))


_ANCHOR = re.compile(r"report\.html#([A-Za-z0-9_.-]+)")
