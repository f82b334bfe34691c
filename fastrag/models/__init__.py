"""The model layer: HTTP clients of OpenAI-compatible servers, retries, rate limits, concurrency.

Nothing above this package talks HTTP to a model directly.
"""

from .client import ChatClient, ModelClient

__all__ = ["ChatClient", "ModelClient"]
