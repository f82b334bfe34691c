"""Multimodal questions: a question with what was seen, fused into one text for the question path.

A :class:`MultimodalContext` carries a question and what an agent saw: image
captions, OCR text, labels an image model detected, image files (read with
Tesseract, as scanned PDF pages are: :func:`fastrag.store.loaders.ocr.ocr_image`),
or an already fused text. :meth:`MultimodalContext.fuse` makes the one text
that :meth:`KnowledgeBase.multimodal_query <fastrag.KnowledgeBase.multimodal_query>`
asks through :meth:`~fastrag.KnowledgeBase.answer` (rewrite, retrieval,
context, redaction, generation, verification and audit as for any
question)::

    question
    caption ...
    OCR text ...
    labels: a, b

The fused text is the question the answer records (``Answer.question``);
a text over the question limit is refused like any long question.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..store.loaders import LoadLimits
from ..store.loaders.ocr import ocr_image

__all__ = ["MultimodalContext"]


def _texts(name: str, values: Any) -> tuple[str, ...]:
    if isinstance(values, str):
        values = (values,)
    out = tuple(values)
    for v in out:
        if not isinstance(v, str):
            raise ConfigError(f"MultimodalContext.{name} must be strings, got {type(v).__name__}")
    return tuple(v.strip() for v in out if v.strip())


@dataclass(frozen=True)
class MultimodalContext:
    """A question with captions, OCR text, detected labels and images, or one fused text.

    Parameters
    ----------
    question : str
        What is asked ("What does this alarm mean?").
    captions : sequence of str
        Captions of the images (written by a person or an image model).
    ocr_text : sequence of str
        Text already read from the images.
    labels : sequence of str
        Objects or classes an image model detected.
    images : sequence of str, Path or bytes
        Image files (or their bytes) to read with Tesseract.
    fused : str, optional
        An already fused text: asked as it is (the other fields must be empty).
    limits : LoadLimits, optional
        OCR languages and deadline for ``images``.
    """

    question: str = ""
    captions: Sequence[str] = ()
    ocr_text: Sequence[str] = ()
    labels: Sequence[str] = ()
    images: Sequence[str | Path | bytes] = ()
    fused: str | None = None
    limits: LoadLimits = field(default_factory=LoadLimits)

    def __post_init__(self) -> None:
        if not isinstance(self.question, str):
            raise ConfigError(
                f"MultimodalContext.question must be a string, got {type(self.question).__name__}"
            )
        for name in ("captions", "ocr_text", "labels"):
            object.__setattr__(self, name, _texts(name, getattr(self, name)))
        images = (
            (self.images,) if isinstance(self.images, (str, Path, bytes)) else tuple(self.images)
        )
        for image in images:
            if not isinstance(image, (str, Path, bytes, bytearray)):
                raise ConfigError(
                    f"MultimodalContext.images must be paths or bytes, got {type(image).__name__}"
                )
        object.__setattr__(self, "images", images)
        if self.fused is not None:
            if not isinstance(self.fused, str) or not self.fused.strip():
                raise ConfigError("MultimodalContext.fused must be a non-empty string")
            if self.question.strip() or self.captions or self.ocr_text or self.labels or images:
                raise ConfigError(
                    "MultimodalContext.fused is the whole question: give it alone, "
                    "or the question with its captions, OCR text, labels and images"
                )
        elif not self.question.strip() and not (
            self.captions or self.ocr_text or self.labels or images
        ):
            raise ConfigError(
                "MultimodalContext needs a question, captions, OCR text, labels, images "
                "or a fused text"
            )

    def fuse(self) -> str:
        """The one text asked: the question, captions, OCR text (images read now), labels.

        Raises
        ------
        OcrUnavailableError
            An image is given and Tesseract is not installed.
        SourceError
            An image cannot be read.
        """
        if self.fused is not None:
            return self.fused.strip()
        parts = [self.question.strip(), *self.captions, *self.ocr_text]
        for i, image in enumerate(self.images):
            where = image if isinstance(image, (str, Path)) else f"image {i}"
            parts.append(" ".join(ocr_image(image, limits=self.limits, where=where).split()))
        if self.labels:
            parts.append("labels: " + ", ".join(self.labels))
        return "\n".join(p for p in parts if p)
