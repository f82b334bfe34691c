"""``fastrag serve``: the knowledge base as a service (``pip install "fastrag-engine[serve]"``).

An ASGI application (Starlette, run by uvicorn) over the public
:class:`~fastrag.KnowledgeBase` API: native JSON endpoints, an
OpenAI-compatible ``/v1/chat/completions``, ``/v1/models`` and
``/v1/embeddings``, MCP tools at ``/mcp``, and a page at ``/`` that shows the
retrieved chunks before the answer. Modules:

- :mod:`~fastrag.serve.app` — the application and its routes;
- :mod:`~fastrag.serve.schemas` — request bodies and their validation;
- :mod:`~fastrag.serve.keys` — API keys, callers and principals;
- :mod:`~fastrag.serve.registry` — the served knowledge bases and the switch to new snapshots;
- :mod:`~fastrag.serve.metrics` — Prometheus metrics;
- :mod:`~fastrag.serve.mcp` — MCP tools and resources;
- :mod:`~fastrag.serve.run` — starting uvicorn (workers, binding rules);
- :mod:`~fastrag.serve.protocol` — uvicorn's HTTP protocol with a deadline on each request's
  head and a cap on connections;
- ``static/`` — the page's HTML, CSS and JavaScript (no CDN).
"""

from __future__ import annotations

from .app import create_app
from .settings import ServeSettings

__all__ = ["ServeSettings", "create_app"]
