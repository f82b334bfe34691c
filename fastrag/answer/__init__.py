"""The answer layer: the stages after retrieval (see :mod:`.pipeline`), one per module."""

from ..options import AnswerOptions
from .audit import verify_answer
from .chat import OpenAIChatGenerator
from .conflicts import LLMConflictCheck
from .fallback import FallbackChain, Level
from .generate import ExtractiveGenerator, Generator
from .pipeline import AnswerEvent, AnswerPipeline
from .verify import LLMJudge

__all__ = [
    "AnswerEvent",
    "AnswerOptions",
    "AnswerPipeline",
    "ExtractiveGenerator",
    "FallbackChain",
    "Generator",
    "LLMConflictCheck",
    "LLMJudge",
    "Level",
    "OpenAIChatGenerator",
    "verify_answer",
]
