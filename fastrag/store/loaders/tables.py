"""Tables of a PDF page, with or without ruling lines (for :mod:`.pdf`).

Ruled tables are pdfplumber's (``page.find_tables()``, its line strategy).
Tables drawn without lines are found from the words' layout: a line of the
page splits into *segments* where the gap between two words is wider than
``GAP`` times the font size (a word space is about a quarter of it, a
table's cell padding more than it); a run of at least ``MIN_ROWS``
consecutive lines (no wider apart than ``LEADING`` line heights) whose
segments start at the same two or more column positions (within
``ALIGN`` points, each column used by half the lines at least) is a table,
its first line the header. A line whose first column is empty continues the
row above it (a cell wrapped onto a second line). Prose never qualifies: its
lines are one segment each.

pdfplumber's own text strategy (``vertical_strategy="text"``,
``horizontal_strategy="text"``, its default tolerances) was tried on a
generated manual like those of ``benchmarks/eval_tables.py`` first: it draws a
column edge wherever three words line up, so cells that begin with the same
phrase ("Check the coolant tank level ...") were cut word by word and the
prose around the table was taken in as rows. The gaps between words are
what a reader sees as columns, so they decide here.
"""

from __future__ import annotations

import statistics
from typing import Any

__all__ = ["ALIGN", "GAP", "LEADING", "MIN_ROWS", "page_tables"]

GAP = 0.9
"""A gap between words wider than this many font sizes separates two cells."""
ALIGN = 4.0
"""Segments starting within this many points of each other are in one column."""
LEADING = 2.6
"""Lines further apart than this many line heights are not in one table."""
MIN_ROWS = 3
"""A table has its header and at least two more lines."""

Box = tuple[float, float, float, float]


def page_tables(page: Any) -> list[tuple[Box, list[list[str]]]]:
    """``(bbox, rows)`` of every table on a pdfplumber page, in no particular order.

    ``rows`` are lists of cell texts, the header first; ``bbox`` is
    ``(x0, top, x1, bottom)``: the characters inside it are the table's.
    """
    out: list[tuple[Box, list[list[str]]]] = []
    for table in page.find_tables():
        out.append((tuple(table.bbox), table.extract()))
    boxes = [b for b, _ in out]
    words = [
        w
        for w in page.extract_words(extra_attrs=["size"])
        if not _inside(w, boxes) and w["text"].strip()
    ]
    out.extend(_text_tables(words))
    return out


def _inside(word: dict[str, Any], boxes: list[Box]) -> bool:
    x = (word["x0"] + word["x1"]) / 2
    y = (word["top"] + word["bottom"]) / 2
    return any(x0 <= x <= x1 and top <= y <= bottom for x0, top, x1, bottom in boxes)


def _lines(words: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Words grouped into lines (tops within a third of the font size), top to bottom."""
    lines: list[list[dict[str, Any]]] = []
    for w in sorted(words, key=lambda w: (round(w["top"], 1), w["x0"])):
        if lines and abs(w["top"] - lines[-1][0]["top"]) <= float(w.get("size", 10)) / 3:
            lines[-1].append(w)
        else:
            lines.append([w])
    for line in lines:
        line.sort(key=lambda w: w["x0"])
    return lines


def _segments(line: list[dict[str, Any]]) -> list[tuple[float, float, str]]:
    """``(x0, x1, text)`` of the runs of a line's words closer than a cell gap."""
    out: list[list[Any]] = []
    for w in line:
        gap = GAP * float(w.get("size", 10))
        if out and w["x0"] - out[-1][1] <= gap:
            out[-1][1] = w["x1"]
            out[-1][2] += " " + w["text"]
        else:
            out.append([w["x0"], w["x1"], w["text"]])
    return [(a, b, t) for a, b, t in out]


def _columns(runs: list[list[tuple[float, float, str]]]) -> list[float]:
    """Column starts used by at least half the lines of a run (two or more), else []."""
    starts = sorted(x0 for segs in runs for x0, _, _ in segs)
    clusters: list[list[float]] = []
    for x in starts:
        if clusters and x - clusters[-1][-1] <= ALIGN:
            clusters[-1].append(x)
        else:
            clusters.append([x])
    need = len(runs) / 2
    cols = [min(c) for c in clusters if len(c) >= need]
    return cols if len(cols) >= 2 else []


def _text_tables(words: list[dict[str, Any]]) -> list[tuple[Box, list[list[str]]]]:
    lines = _lines(words)
    out: list[tuple[Box, list[list[str]]]] = []
    i = 0
    while i < len(lines):
        if len(_segments(lines[i])) < 2:
            i += 1
            continue
        # The run of lines from i on: multi-segment lines, and single-segment lines that
        # continue a cell (they start right of the first column), close together.
        j = i + 1
        height = statistics.median(w["bottom"] - w["top"] for w in lines[i])
        while j < len(lines):
            gap = lines[j][0]["top"] - lines[j - 1][0]["bottom"]
            if gap > LEADING * height:
                break
            here = _segments(lines[j])
            if len(here) < 2 and here[0][0] <= lines[i][0]["x0"] + ALIGN:
                break  # a line of prose starting at the left edge
            j += 1
        run = lines[i:j]
        segs = [_segments(line) for line in run]
        cols = _columns([s for s in segs if len(s) >= 2])
        if not cols or sum(len(s) >= 2 for s in segs) < MIN_ROWS:
            i = j if j > i + 1 else i + 1
            continue
        rows: list[list[str]] = []
        for line_segs in segs:
            cells = [""] * len(cols)
            for x0, _, text in line_segs:
                k = max((c for c in range(len(cols)) if cols[c] <= x0 + ALIGN), default=0)
                cells[k] = f"{cells[k]} {text}".strip()
            if rows and not cells[0]:
                rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells, strict=True)]
            else:
                rows.append(cells)
        if len(rows) >= MIN_ROWS and all(rows[0]):
            flat = [w for line in run for w in line]
            box = (
                min(w["x0"] for w in flat) - 0.5,
                min(w["top"] for w in flat) - 0.5,
                max(w["x1"] for w in flat) + 0.5,
                max(w["bottom"] for w in flat) + 0.5,
            )
            out.append((box, rows))
        i = j
    return out
