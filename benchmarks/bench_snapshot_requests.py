"""8 HTTP clients asking two kept snapshots at once for 20 s: requests, errors, mixed answers.

Uses the two-snapshot knowledge base of ``tests/test_snapshot_requests.py``
and the in-process server of ``tests/serve_harness.py``; an answer is mixed
when its snapshot id, or any of its hits, is not the requested snapshot's.

    python benchmarks/bench_snapshot_requests.py --seconds 20 --clients 8
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))

import httpx  # noqa: E402
from serve_harness import ThreadServer  # noqa: E402
from test_snapshot_requests import NEW, OLD, Q, _versions  # noqa: E402

from fastrag.serve import ServeSettings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    path = pathlib.Path(tempfile.mkdtemp()) / "fanuc"
    old, new = _versions(path)
    wanted = {old: {d["id"] for d in OLD}, new: {d["id"] for d in NEW}}
    names = {old: "fanuc-0imd-v3.2", new: "fanuc-0imd-v3.3"}
    settings = ServeSettings(kbs=(("fanuc", str(path)),), reload_interval=0, engine_threads=2)
    counts = {"requests": 0, "errors": 0, "mixed": 0}
    lock = threading.Lock()
    with ThreadServer(settings) as server:
        stop = time.monotonic() + args.seconds

        def client(i: int) -> None:
            sid = old if i % 2 else new
            with httpx.Client(base_url=server.url, timeout=30) as http:
                while time.monotonic() < stop:
                    body = {"question": Q, "k": 8, "snapshot": names[sid]}
                    r = http.post("/v1/answer", json=body)
                    with lock:
                        counts["requests"] += 1
                        if r.status_code != 200:
                            counts["errors"] += 1
                            continue
                        got = r.json()
                        docs = {h["doc_id"] for h in got["hits"]}
                        counts["mixed"] += got["snapshot"] != sid or not docs <= wanted[sid]

        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    print(counts)


if __name__ == "__main__":
    main()
