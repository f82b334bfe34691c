"""Reference for :func:`fastrag.text.sentences.text_units`: every line on its own."""

from __future__ import annotations

import re

from fastrag.text.sentences import _cells, _is_row, sentence_spans


def text_units(text: str) -> list[tuple[int, int, int]]:
    """``(start, end, row)`` per unit, line by line (a row's cells, or the line's sentences)."""
    out: list[tuple[int, int, int]] = []
    row = 0
    pos = 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        cells = _cells(body)
        if _is_row(body, cells):
            first = body[cells[0][0] : cells[0][1]]
            header = first[: first.index(":") + 1] if ":" in first else first
            cuts = [0]
            cuts += [m.start() + 1 for m in re.finditer(r"\s" + re.escape(header) + r"\s", body)]
            cuts.append(len(body))
            for lo, hi in zip(cuts, cuts[1:], strict=False):
                part_cells = _cells(body[lo:hi])
                if not part_cells:
                    continue
                for s, e in part_cells:
                    out.append((pos + lo + s, pos + lo + e, row))
                row += 1
        else:
            out.extend((pos + s, pos + e, -1) for s, e in sentence_spans(body))
        pos += len(line)
    return out
