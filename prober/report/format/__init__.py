"""Text tables, SVG and HTML pages, anchors and words: shaping, judging nothing."""
