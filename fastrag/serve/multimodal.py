"""Multimodal questions over HTTP and MCP: a request's ``multimodal`` object as a MultimodalContext.

``POST /v1/retrieve``, ``POST /v1/answer`` (streamed or not) and the MCP
``search`` and ``answer`` tools take, beside the question, what was seen::

    {"question": "What should I do about this alarm?",
     "multimodal": {"captions": ["Control panel of press 7"],
                    "ocr_text": ["ALARM SV0432"],
                    "labels": ["alarm light"],
                    "images": ["iVBORw0KGgo..."],
                    "ocr_languages": "eng"}}

Images are base64 (standard alphabet; a ``data:image/...;base64,`` prefix
is accepted) and are read with Tesseract exactly as the library reads them
(:class:`fastrag.MultimodalContext`, :func:`fastrag.store.loaders.ocr.ocr_image`),
never from a path: a remote caller cannot name a file of the server. The
fused text goes through the one question path and is the question the
answer records; an already fused text is simply sent as the question.

Limits (4xx JSON errors naming the field): at most :data:`MAX_IMAGES`
images of at most :data:`MAX_IMAGE_BYTES` decoded bytes each (the body
limit, ``--max-body``, holds first), at most :data:`MAX_TEXTS` captions,
OCR texts and labels each; a fused text over the question limit is
refused like any long question (400). An image that is not base64 or not
an image, or whose OCR misses its deadline (the server's ``--timeout``), is
a 400 ``invalid_image``; a server without Tesseract answers 501
``ocr_unavailable``.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from ..errors import ConfigError, OcrUnavailableError, RequestError, SourceError
from ..retrieve.multimodal import MultimodalContext
from ..store.loaders import LoadLimits

__all__ = ["MAX_IMAGES", "MAX_IMAGE_BYTES", "MAX_TEXTS", "context_of", "fuse"]

MAX_IMAGES = 8
"""Images one request may carry."""
MAX_IMAGE_BYTES = 16 << 20
"""Largest decoded image, in bytes."""
MAX_TEXTS = 64
"""Captions, OCR texts or labels one request may carry (each kind)."""

_DATA_URL = re.compile(r"^data:[\w.+-]+/[\w.+-]+;base64,", re.I)


def _decode(value: str, where: str) -> bytes:
    text = _DATA_URL.sub("", value.strip(), count=1)
    if len(text) > (MAX_IMAGE_BYTES * 4) // 3 + 4:
        raise RequestError(
            f"field {where!r} is over {MAX_IMAGE_BYTES:,} bytes once decoded", type="out_of_range"
        )
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise RequestError(
            f"field {where!r} is not base64 (send the image file's bytes base64-encoded)",
            type="invalid_image",
        ) from None
    if not data:
        raise RequestError(f"field {where!r} is empty", type="invalid_image")
    return data


def context_of(question: str, body: Any, *, ocr_seconds: float) -> MultimodalContext:
    """The :class:`~fastrag.MultimodalContext` of a request's question and ``multimodal`` object.

    Parameters
    ----------
    question : str
        The request's question.
    body : MultimodalBody
        The validated ``multimodal`` object (:class:`~fastrag.serve.schemas.MultimodalBody`).
    ocr_seconds : float
        Deadline of one image's OCR (the server's request timeout).

    Raises
    ------
    RequestError
        Too many items, an image that is not base64, a bad language list (400).
    """
    for name in ("captions", "ocr_text", "labels"):
        if len(getattr(body, name)) > MAX_TEXTS:
            raise RequestError(
                f"field 'multimodal.{name}' holds {len(getattr(body, name))} items; at most "
                f"{MAX_TEXTS}",
                type="out_of_range",
            )
    if len(body.images) > MAX_IMAGES:
        raise RequestError(
            f"field 'multimodal.images' holds {len(body.images)} images; at most {MAX_IMAGES}",
            type="out_of_range",
        )
    images = [_decode(v, f"multimodal.images[{i}]") for i, v in enumerate(body.images)]
    try:
        limits = LoadLimits(
            ocr_seconds=ocr_seconds,
            **({"ocr_languages": body.ocr_languages} if body.ocr_languages else {}),
        )
        return MultimodalContext(
            question, captions=body.captions, ocr_text=body.ocr_text, labels=body.labels,
            images=images, limits=limits,
        )  # fmt: skip
    except ConfigError as exc:
        raise RequestError(f"field 'multimodal': {exc}", type="invalid_value") from None


def fuse(context: MultimodalContext) -> str:
    """The fused text of ``context`` (images read now), with OCR failures as request errors.

    Raises
    ------
    RequestError
        400 ``invalid_image`` for an image Tesseract cannot read (or not in
        time); 501 ``ocr_unavailable`` when the server has no Tesseract or
        none of the languages asked for.
    """
    try:
        return context.fuse()
    except OcrUnavailableError as exc:
        raise RequestError(
            f"field 'multimodal.images': {exc}", status=501, type="ocr_unavailable"
        ) from None
    except SourceError as exc:
        raise RequestError(f"field 'multimodal.images': {exc}", type="invalid_image") from None
