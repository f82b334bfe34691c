"""Scanned pages and figures: text read with Tesseract, captions bound to their images.

**OCR.** A PDF page without a text layer (no characters, at least one
image: a scan) is rendered at :data:`DPI` with pypdfium2 (through
pdfplumber, which ships it) and read by the ``tesseract`` program in the
languages of :attr:`LoadLimits.ocr_languages <fastrag.store.loaders.LoadLimits>`
that are installed (English and Simplified Chinese by default: Debian's
``tesseract-ocr tesseract-ocr-eng tesseract-ocr-chi-sim``). Its document
says ``ocr: true``. Image files (a :class:`~fastrag.MultimodalContext`'s
images) are read by :func:`ocr_image` the same way.

Tesseract is called as a program (``tesseract - - -l eng+chi_sim --dpi
300``, the image on stdin, the text on stdout), not through pytesseract:
pytesseract wraps this same call (with temporary files) and would add a
dependency for one line of ``subprocess``; calling it directly gives the
deadline (:attr:`LoadLimits.ocr_seconds`) and errors that name the page.
``OMP_THREAD_LIMIT=1`` is set for it unless the environment sets it, so
concurrent loads do not oversubscribe the cores.

Tesseract is looked for only when a page needs it: a missing program or
missing language data raises :class:`~fastrag.errors.OcrUnavailableError`
naming the page and the packages to install (or ``LoadLimits(ocr=False)``,
which refuses a PDF without any text layer as before).

Tesseract's output is tidied: lines of a paragraph are joined (without a
space between Chinese characters, whose spaces Tesseract inserts),
paragraphs are kept apart (a paragraph that starts in lower case after one
without end punctuation continues it).

**Figures.** An image on a page with a text layer whose nearest line below
(or else above), within :data:`CAPTION_GAP` points, starts like a caption
(``Figure 3``, ``Fig. 3``, ``图 3``, ``圖3``) becomes a figure: the caption
(with the lines that continue it) is taken out of the page's running text
and becomes its own document ``<id>#page=<n>&figure=<k>`` with metadata
``page``, ``figure`` (k, from 1 on the page), ``image_sha256`` (SHA-256 of
the image's stream as embedded in the PDF: for a JPEG, the bytes of the
JPEG file), ``image_bbox`` (``[x0, top, x1, bottom]`` in points),
``caption``, and ``section``: the caption (as a table row's section is its
table's caption or heading), so a hit on the figure shows it as where it
stands (``hit.metadata["section"]``, ``fastrag ask``'s citations), and
``where={"section": ...}`` finds it (a document's own ``section`` is the
section of its chunks that have no heading path). A
question on the caption therefore retrieves, and an answer cites, a hit
that names the figure's image.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import OcrUnavailableError, SourceError
from ._common import DEFAULT_LIMITS, LoadLimits, clean, require

__all__ = [
    "CAPTION_GAP",
    "DPI",
    "INSTALL_HINT",
    "bind_figures",
    "figure_documents",
    "needs_ocr",
    "ocr_image",
    "ocr_page",
    "tidy",
]

DPI = 300
"""Resolution scanned pages are rendered at for Tesseract."""
CAPTION_GAP = 36.0
"""Largest distance in points (half an inch) between an image and its caption line."""
INSTALL_HINT = (
    "install Tesseract with its English and Chinese data (Debian/Ubuntu: apt-get install "
    "tesseract-ocr tesseract-ocr-eng tesseract-ocr-chi-sim; macOS: brew install tesseract "
    "tesseract-lang), or turn OCR off with LoadLimits(ocr=False)"
)
_PACKAGES = {"eng": "tesseract-ocr-eng", "chi_sim": "tesseract-ocr-chi-sim"}
_CAPTION = re.compile(r"^(?:fig(?:ure)?\.?|图|圖)\s*[0-9０-９一二三四五六七八九十IVXivx]", re.I)
_CJK = "\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f"
_ENDS = ".!?:;。！？：；"
_CJK_GAP = re.compile(rf"(?<=[{_CJK}]) +(?=[{_CJK}])")


def _binary(where: object) -> str:
    found = shutil.which("tesseract")
    if found is None:
        raise OcrUnavailableError(
            f"{where} needs OCR and Tesseract is not installed: {INSTALL_HINT}"
        )
    return found


@functools.cache
def _installed(binary: str) -> frozenset[str]:
    """The languages a Tesseract program has data for (``tesseract --list-langs``)."""
    try:
        out = subprocess.run(
            [binary, "--list-langs"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OcrUnavailableError(f"{binary} --list-langs failed: {exc}") from exc
    lines = (out.stdout or out.stderr).splitlines()
    return frozenset(line.strip() for line in lines[1:] if line.strip())


def _languages(binary: str, wanted: str, where: object) -> str:
    """The ``+``-joined languages of ``wanted`` that are installed (at least one)."""
    installed = _installed(binary)
    usable = [lang for lang in wanted.split("+") if lang in installed]
    if not usable:
        packages = " ".join(
            _PACKAGES.get(lang, f"tesseract-ocr-{lang}") for lang in wanted.split("+")
        )
        raise OcrUnavailableError(
            f"{where} needs OCR and Tesseract has no data for {wanted!r} (installed: "
            f"{', '.join(sorted(installed)) or 'none'}): apt-get install {packages}"
        )
    return "+".join(usable)


def tidy(raw: str) -> str:
    """Tesseract's text as paragraphs: lines joined, spaces between CJK characters removed."""
    paragraphs: list[str] = []
    for block in re.split(r"\n\s*\n", raw.replace("\f", "\n")):
        lines = [clean(line) for line in block.splitlines() if line.strip()]
        if not lines:
            continue
        text = lines[0]
        for line in lines[1:]:
            joins_cjk = re.match(rf"[{_CJK}]", line) and re.search(rf"[{_CJK}]$", text)
            text += line if joins_cjk else " " + line
        text = _CJK_GAP.sub("", text)
        if paragraphs and text[0].islower() and paragraphs[-1][-1] not in _ENDS:
            paragraphs[-1] += " " + text  # a sentence Tesseract broke across a gap
        else:
            paragraphs.append(text)
    return "\n\n".join(paragraphs)


def ocr_image(
    image: Any,
    *,
    limits: LoadLimits = DEFAULT_LIMITS,
    dpi: int | None = None,
    where: object = "an image",
) -> str:
    """The text Tesseract reads in an image, tidied (see :func:`tidy`).

    Parameters
    ----------
    image : PIL.Image.Image, bytes or path
        The image (any format Pillow reads, for bytes and paths).
    limits : LoadLimits, optional
        ``ocr_languages`` and ``ocr_seconds`` (``ocr`` is the caller's to check).
    dpi : int, optional
        The image's resolution, when known (a rendered page).
    where : object
        What errors call the image.

    Raises
    ------
    OcrUnavailableError
        Tesseract or every asked-for language's data is missing.
    SourceError
        The image cannot be read, or Tesseract failed or missed its deadline.
    """
    binary = _binary(where)
    languages = _languages(binary, limits.ocr_languages, where)
    Image = require("PIL.Image", "pdf", "reading images for OCR")

    try:
        if isinstance(image, (bytes, bytearray)):
            picture = Image.open(io.BytesIO(image))
        elif isinstance(image, (str, Path)):
            picture = Image.open(image)
        else:
            picture = image
        picture.load()
        gray = picture.convert("L")  # also drops an alpha channel Tesseract would misread
    except Image.DecompressionBombError as exc:  # more pixels than Pillow will decode
        raise SourceError(f"{where}: the image has too many pixels ({exc})") from exc
    except (OSError, ValueError) as exc:  # UnidentifiedImageError is an OSError
        raise SourceError(f"{where}: not a readable image ({type(exc).__name__}: {exc})") from exc
    buffer = io.BytesIO()
    gray.save(buffer, "PNG", compress_level=1)
    cmd = [binary, "-", "-", "-l", languages, "--psm", "3"]
    if dpi:
        cmd += ["--dpi", str(int(dpi))]
    env = dict(os.environ)
    env.setdefault("OMP_THREAD_LIMIT", "1")
    try:
        out = subprocess.run(
            cmd, input=buffer.getvalue(), capture_output=True, timeout=limits.ocr_seconds,
            env=env, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        raise SourceError(
            f"{where}: OCR took longer than {limits.ocr_seconds:g} s (LoadLimits.ocr_seconds)"
        ) from exc
    except OSError as exc:
        raise OcrUnavailableError(
            f"{where}: Tesseract could not be run ({exc}): {INSTALL_HINT}"
        ) from exc
    if out.returncode != 0:
        detail = out.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SourceError(
            f"{where}: Tesseract failed (exit {out.returncode}): {' '.join(detail[-3:])[:300]}"
        )
    return tidy(out.stdout.decode("utf-8", "replace"))


def needs_ocr(page: Any, n_chars: int) -> bool:
    """Whether a pdfplumber page is a scan: no characters, at least one image."""
    return n_chars == 0 and bool(page.images)


def ocr_page(page: Any, *, limits: LoadLimits = DEFAULT_LIMITS, where: object) -> str:
    """The text of a scanned pdfplumber page: rendered at :data:`DPI`, read by Tesseract."""
    try:
        rendered = page.to_image(resolution=DPI).original
    except Exception as exc:  # pypdfium2 raises its own types on a damaged page
        raise SourceError(
            f"{where}: cannot be rendered for OCR ({type(exc).__name__}: {exc})"
        ) from exc
    return ocr_image(rendered, limits=limits, dpi=DPI, where=where)


def _image_sha256(image: dict[str, Any]) -> str | None:
    stream = image.get("stream")
    try:
        data = stream.get_rawdata() if stream is not None else None
    except Exception:  # a damaged stream: the figure is kept without a hash
        return None
    return hashlib.sha256(data).hexdigest() if data is not None else None


def bind_figures(
    images: Sequence[dict[str, Any]], items: list[tuple[float, str, Any]]
) -> tuple[list[tuple[float, str, Any]], list[dict[str, Any]]]:
    """Bind each captioned image to its caption lines; the items without those lines.

    Parameters
    ----------
    images : sequence of dict
        pdfplumber's ``page.images`` (``x0``, ``top``, ``x1``, ``bottom``, ``stream``).
    items : list of tuple
        The page's ``(top, kind, payload)`` items; a ``"line"`` payload has
        ``text``, ``top``, ``bottom`` and ``size``.

    Returns
    -------
    tuple
        The items with the caption lines removed, and per figure (in
        reading order) ``{"caption", "image_sha256", "image_bbox", "image_name"}``.
    """
    lines = [i for i, (_, kind, p) in enumerate(items) if kind == "line"]
    taken: set[int] = set()
    found: list[tuple[float, list[int], dict[str, Any]]] = []
    for image in images:
        best: tuple[float, int] | None = None
        for i in lines:
            p = items[i][2]
            if i in taken or not _CAPTION.match(clean(p["text"])):
                continue
            below = p["top"] - image["bottom"]
            above = image["top"] - p["bottom"]
            # A caption below wins over one above at the same distance.
            gap = below if below >= -2 else (above + 0.5 if above >= -2 else None)
            if gap is not None and gap <= CAPTION_GAP and (best is None or gap < best[0]):
                best = (gap, i)
        if best is None:
            continue
        first = best[1]
        group = [first]
        height = max(items[first][2]["bottom"] - items[first][2]["top"], 1.0)
        for i in lines[lines.index(first) + 1 :]:  # the lines that continue the caption
            p, prev = items[i][2], items[group[-1]][2]
            if (
                len(group) >= 4 or i in taken or _CAPTION.match(clean(p["text"]))
                or not 0 <= p["top"] - prev["bottom"] <= 0.6 * height
                or abs(p["size"] - items[first][2]["size"]) > 0.5
            ):  # fmt: skip
                break
            group.append(i)
        taken.update(group)
        caption = clean(" ".join(items[i][2]["text"] for i in group))
        bbox = [round(float(image[k]), 2) for k in ("x0", "top", "x1", "bottom")]
        figure = {
            "caption": caption,
            "image_sha256": _image_sha256(image),
            "image_bbox": bbox,
            "image_name": str(image.get("name") or ""),
        }
        found.append((items[first][0], group, figure))
    found.sort(key=lambda f: f[0])
    kept = [item for i, item in enumerate(items) if i not in taken]
    return kept, [f for _, _, f in found]


def figure_documents(
    page_doc: dict[str, Any], figures: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One document per figure of a page: its caption, with the page's metadata and the image's."""
    out = []
    for k, figure in enumerate(figures, 1):
        doc = {key: value for key, value in page_doc.items() if key not in ("id", "text")}
        doc.update(id=f"{page_doc['id']}&figure={k}", text=figure["caption"], figure=k, **figure)
        doc["section"] = figure["caption"]  # what a citation shows beside the page
        if doc["image_sha256"] is None:
            del doc["image_sha256"]
        out.append(doc)
    return out
