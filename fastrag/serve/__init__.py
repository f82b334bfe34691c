"""``fastrag serve``: the knowledge base as a service (``pip install "fastrag-engine[serve]"``).

An ASGI application (Starlette, run by uvicorn) over the public
:class:`~fastrag.KnowledgeBase` API: native JSON endpoints, an
OpenAI-compatible ``/v1/chat/completions``, ``/v1/models`` and
``/v1/embeddings``, MCP tools at ``/mcp``, and a page at ``/`` that shows the
retrieved chunks before the answer. Modules:

- :mod:`~fastrag.serve.app` — the application factory (security headers, warm-up, watcher);
- :mod:`~fastrag.serve.service` — what every route shares (keys, admission, deadlines, errors);
- :mod:`~fastrag.serve.routes_native` — the native JSON routes and the page;
- :mod:`~fastrag.serve.routes_openai` — the OpenAI-compatible routes;
- :mod:`~fastrag.serve.mcp_http` — the MCP tools mounted at ``/mcp``;
- :mod:`~fastrag.serve.shared` — what the routes, MCP and the CLI share: the hit's JSON,
  the ``--llm`` generator, a request's options (imports no web framework);
- :mod:`~fastrag.serve.schemas` — request bodies and their validation;
- :mod:`~fastrag.serve.multimodal` — a request's ``multimodal`` object (base64 images, limits)
  as a :class:`~fastrag.MultimodalContext`;
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

from typing import TYPE_CHECKING, Any

from .settings import ServeSettings

if TYPE_CHECKING:  # imported on first use: the CLI reads .shared without the serve extra
    from .app import create_app

__all__ = ["ServeSettings", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from .app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
