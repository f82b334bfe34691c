"""Scanned pages, figures and multimodal questions, with the real Tesseract (issue 24, item 3).

The scans are made here: text drawn with Pillow in a CJK font (WenQuanYi Zen Hei, which
``.ci/run`` installs with Chromium), saved as image-only PDF pages; Tesseract is Debian's
``tesseract-ocr`` with its English and Simplified Chinese data (also installed by ``.ci/run``).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont

import fastrag
from fastrag.errors import ConfigError, OcrUnavailableError, SourceError
from fastrag.store.loaders import LoadLimits, load_documents
from fastrag.store.loaders.ocr import bind_figures, tidy

FONT = Path("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc")

ENGLISH = [
    "Hydraulic press 7 maintenance log.",
    "The relief valve was replaced after",
    "the pressure dropped below 12 bar.",
]
CHINESE = ["主轴过热时请检查冷却液液位。", "冷却液液位必须保持在八成以上。"]
SCREEN = ["ALARM SV0432", "SPINDLE OVERHEAT"]


@pytest.fixture(scope="module", autouse=True)
def _tesseract():
    assert shutil.which("tesseract"), "Tesseract is not installed (.ci/run installs it)"
    if not FONT.exists():
        pytest.skip(f"{FONT} is missing (Debian: fonts-wqy-zenhei)")


def _scan(lines: list[str], size: tuple[int, int] = (1240, 420)) -> Image.Image:
    """A page of text as a scanner would give it: a grey image, no text layer."""
    font = ImageFont.truetype(str(FONT), 40)
    image = Image.new("L", size, 255)
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(lines):
        draw.text((60, 60 + 70 * i), line, font=font, fill=0)
    return image


def _scanned_pdf(path: Path) -> Path:
    english, chinese = _scan(ENGLISH), _scan(CHINESE)
    english.save(path, "PDF", resolution=150, save_all=True, append_images=[chinese])
    return path


def test_scanned_pages_are_read_marked_ocr_and_found_in_english_and_chinese(tmp_path):
    path = _scanned_pdf(tmp_path / "scan.pdf")
    docs = list(load_documents(path))
    assert [d["id"] for d in docs] == ["scan.pdf#page=1", "scan.pdf#page=2"]
    assert all(d["ocr"] is True for d in docs)
    english, chinese = docs[0]["text"], docs[1]["text"]
    assert "relief valve was replaced" in english and "12 bar" in english
    assert "冷却液液位" in chinese and " " not in chinese  # Tesseract's spaces between hanzi go
    other = [
        {"id": "other", "text": "The conveyor belt is cleaned every Friday."},
        {"id": "zh-other", "text": "传送带每周五清洁一次。"},
    ]
    kb = fastrag.KnowledgeBase.build([*docs, *other])
    answer = kb.answer("When was the relief valve replaced?")
    assert answer.found and answer.hits[0].doc_id == "scan.pdf#page=1"
    assert answer.hits[0].metadata["ocr"] is True
    assert 1 in answer.citations and "12 bar" in answer.text
    zh = kb.answer("主轴过热时应该检查什么？")
    assert zh.hits[0].doc_id == "scan.pdf#page=2"
    assert zh.found and "冷却液液位" in zh.text


def test_ocr_off_refuses_a_scan_and_a_missing_tesseract_is_named(tmp_path, monkeypatch):
    path = _scanned_pdf(tmp_path / "scan.pdf")
    with pytest.raises(SourceError, match=r"no text layer; OCR is off \(LoadLimits.ocr\)"):
        list(load_documents(path, limits=LoadLimits(ocr=False)))
    failures: list[tuple[str, str]] = []
    assert (
        list(
            load_documents(
                path,
                limits=LoadLimits(ocr=False),
                on_error=lambda p, r: failures.append((str(p), r)),
            )
        )
        == []
    )
    assert failures and "OCR is off" in failures[0][1]
    # Tesseract missing: only a page that needs OCR asks for it.
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(
        OcrUnavailableError, match=r"scan.pdf page 1 needs OCR.*apt-get install tesseract-ocr"
    ):
        list(load_documents(path))
    text_pdf = tmp_path / "text.pdf"
    _text_pdf(text_pdf)
    assert [d["id"] for d in load_documents(text_pdf)] == ["text.pdf#page=1"]
    assert issubclass(OcrUnavailableError, fastrag.errors.MissingDependencyError)


def test_ocr_language_data_missing_is_named(tmp_path):
    with pytest.raises(OcrUnavailableError, match="no data for 'klingon'.*tesseract-ocr-klingon"):
        fastrag.store.loaders.ocr.ocr_image(
            _scan(SCREEN), limits=LoadLimits(ocr_languages="klingon"), where="screen.png"
        )
    with pytest.raises(ConfigError, match="ocr_languages"):
        LoadLimits(ocr_languages="eng; rm -rf /")
    with pytest.raises(SourceError, match="not a readable image"):
        fastrag.store.loaders.ocr.ocr_image(b"not an image", where="x.png")


def _text_pdf(path: Path, figure: Path | None = None) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=11)
    pdf.multi_cell(0, 6, "Coolant system. The pump moves coolant from the tank to the spindle.")
    if figure is not None:
        pdf.image(str(figure), x=20, y=40, w=80)
        pdf.set_xy(20, 40 + 80 * 300 / 400 + 3)
        pdf.multi_cell(0, 6, "Figure 1: The blocked coolant line behind the pump.")
        pdf.set_xy(20, 120)
        pdf.multi_cell(0, 6, "Replace the filter every month to keep the line clear.")
    pdf.output(str(path))
    return path


def test_figure_caption_is_bound_to_its_image_sha256_and_cited(tmp_path):
    photo = tmp_path / "line.jpg"
    Image.new("RGB", (400, 300), (90, 140, 200)).save(photo, "JPEG", quality=80)
    path = _text_pdf(tmp_path / "manual.pdf", photo)
    docs = list(load_documents(path))
    by_id = {d["id"]: d for d in docs}
    assert list(by_id) == ["manual.pdf#page=1", "manual.pdf#page=1&figure=1"]
    figure = by_id["manual.pdf#page=1&figure=1"]
    assert figure["text"] == "Figure 1: The blocked coolant line behind the pump."
    # A JPEG is embedded as it is: the figure's hash is the JPEG file's.
    assert figure["image_sha256"] == hashlib.sha256(photo.read_bytes()).hexdigest()
    assert figure["figure"] == 1 and figure["page"] == 1 and len(figure["image_bbox"]) == 4
    page = by_id["manual.pdf#page=1"]["text"]
    assert "blocked coolant line" not in page  # the caption is the figure's, not repeated
    assert "Replace the filter every month" in page
    kb = fastrag.KnowledgeBase.build(docs)
    answer = kb.answer("Which figure shows a blocked coolant line?")
    cited = list(answer.citations.values())
    assert answer.found and cited[0].doc_id == "manual.pdf#page=1&figure=1"
    assert cited[0].metadata["image_sha256"] == figure["image_sha256"]
    # The caption is where the hit stands, as a table row's caption or heading is its section.
    assert cited[0].metadata["section"] == "Figure 1: The blocked coolant line behind the pump."
    # ... and a filter on the section finds the figure and nothing else.
    caption = {"section": "Figure 1: The blocked coolant line behind the pump."}
    assert [h.doc_id for h in kb.retrieve("coolant line", k=5, where=caption)] == [
        "manual.pdf#page=1&figure=1"
    ]


def test_bind_figures_prefers_the_caption_below_and_keeps_uncaptioned_text():
    def line(text: str, top: float) -> tuple[float, str, dict]:
        return (top, "line", {"text": text, "top": top, "bottom": top + 10, "size": 10.0})

    items = [
        line("Fig. 2 above the image", 70),
        line("Figure 3 under the image", 205),
        line("which continues here", 216),
        line("Body text.", 260),
    ]
    image = {"x0": 10, "top": 100, "x1": 200, "bottom": 200, "stream": None, "name": "Im1"}
    kept, figures = bind_figures([image], items)
    assert [f["caption"] for f in figures] == ["Figure 3 under the image which continues here"]
    assert [i[2]["text"] for i in kept] == ["Fig. 2 above the image", "Body text."]
    far = {**image, "top": 400, "bottom": 500}
    assert bind_figures([far], items)[1] == []
    only_above = bind_figures([image], [items[0], items[3]])[1]
    assert [f["caption"] for f in only_above] == ["Fig. 2 above the image"]


def test_tidy_joins_lines_and_drops_spaces_between_hanzi():
    assert tidy("Alarm SV0432\nspindle hot\n\n主轴 过 热 。\n请 检查\n\f") == (
        "Alarm SV0432 spindle hot\n\n主轴过热。请检查"
    )
    assert tidy("The valve was replaced after\n\nthe pressure dropped.\n\nNext.") == (
        "The valve was replaced after the pressure dropped.\n\nNext."
    )


def test_multimodal_query_reads_an_image_file_through_the_question_path(tmp_path):
    screen = tmp_path / "screen.png"
    _scan(SCREEN, (900, 240)).save(screen)
    docs = [
        {
            "id": "sv0432",
            "text": "Alarm SV0432 means the spindle overheats: check the coolant level.",
        },
        {"id": "ot0500", "text": "Alarm OT0500 means an axis passed its overtravel limit."},
        {"id": "belt", "text": "The conveyor belt is cleaned every Friday."},
    ]
    kb = fastrag.KnowledgeBase.build(docs)
    context = fastrag.MultimodalContext("What should I do about this alarm?", images=[screen])
    assert "SV0432" in context.fuse()
    answer = kb.multimodal_query(context)
    assert answer.hits[0].doc_id == "sv0432"
    assert answer.found and 1 in answer.citations
    # Captions, OCR text and labels given as text, and an already fused text, take the same path.
    given = fastrag.MultimodalContext(
        "What does this alarm mean?", captions=["Control panel showing alarm OT0500"],
        labels=["control panel", "alarm"],
    )  # fmt: skip
    assert kb.multimodal_query(given).hits[0].doc_id == "ot0500"
    fused = fastrag.MultimodalContext(fused="alarm OT0500 overtravel")
    assert kb.multimodal_query(fused, k=1).hits[0].doc_id == "ot0500"
    with pytest.raises(ConfigError, match="MultimodalContext"):
        fastrag.MultimodalContext()
    with pytest.raises(ConfigError, match="images"):
        fastrag.MultimodalContext("q", images=["a.png", 3])
