"""Structure-aware chunking: fastrag against LangChain's Markdown splitter and the reference, side by side.

The corpus is real package documentation: the Markdown/reST long
descriptions (``METADATA`` bodies) of every distribution installed in this
environment, repeated until ``--mb`` MB. Three chunkers cut it at the same
size (200 characters, 40 overlap):

- fastrag ``Chunker(mode="structure")`` (the Numba kernels of
  ``native/structure.py``), from a ``list[str]`` of fresh strings and from a
  pyarrow array, and fastrag's fixed windows for reference;
- LangChain ``MarkdownTextSplitter(chunk_size=200, chunk_overlap=40)``
  (``langchain-text-splitters``), when installed;
- the pure-Python reference ``tests/naive/chunking.structure_chunks``, whose
  output fastrag's must equal chunk for chunk (checked on a sample).

Printed: MB/s (UTF-8 input bytes per second, median of ``--repeat``), the
ratio to fastrag, chunks, and the share of chunk edges that cut a word
(a letter or digit on both sides of the edge), which is what makes extractive
answers come out as fragments.

Usage::

    python benchmarks/compare_structure.py --mb 20 --repeat 3
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
import pyarrow as pa

from fastrag.text.chunking import Chunker

ROOT = Path(__file__).resolve().parents[1]


def corpus(mb: float) -> tuple[list[str], int]:
    """Long descriptions of the installed distributions, repeated to ``mb`` MB; and how many."""
    texts = []
    for dist in importlib.metadata.distributions():
        body = dist.metadata.get_payload() if dist.metadata is not None else None
        if isinstance(body, str) and len(body) > 500:
            texts.append(body)
    texts.sort()
    if not texts:
        raise SystemExit("no distribution in this environment has a long description")
    unique = len(texts)
    size = sum(len(t.encode()) for t in texts)
    out = list(texts)
    while size < mb * 1e6:
        out.extend(texts)
        size += sum(len(t.encode()) for t in texts)
    return out, unique


def fresh(texts: list[str]) -> list[str]:
    """New string objects (no cached UTF-8 form)."""
    return [(t + " ")[:-1] for t in texts]


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def cut_share(texts: list[str], spans: list[tuple[int, int, int]]) -> float:
    """Share of chunk edges (``(doc, start, end)`` into ``texts``) with a word character on both sides."""
    cuts = edges = 0
    for d, s, e in spans:
        t = texts[d]
        for pos in (s, e):
            if 0 < pos < len(t):
                edges += 1
                cuts += t[pos - 1].isalnum() and t[pos].isalnum()
    return cuts / max(1, edges)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=20.0, help="corpus size in MB of UTF-8 (20)")
    ap.add_argument("--repeat", type=int, default=3, help="timed repeats; medians are shown (3)")
    ap.add_argument("--threads", type=int, default=None, help="Numba threads (default: all)")
    ap.add_argument("--window", type=int, default=200)
    ap.add_argument("--overlap", type=int, default=40)
    ap.add_argument("--answers", type=int, default=300, help="heading questions answered (300)")
    args = ap.parse_args(argv)

    texts, unique = corpus(args.mb)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    print(
        f"corpus: {unique} package descriptions, repeated to {len(texts):,} documents, {mb:.1f} MB"
    )
    structure = Chunker(args.window, args.overlap, mode="structure")
    windows = Chunker(args.window, args.overlap)
    structure.chunk(texts[:4], threads=args.threads)  # compile/load outside the timings
    windows.chunk(texts[:4], threads=args.threads)
    print(
        f"machine: {os.cpu_count()} CPUs, Numba threads {args.threads or numba.get_num_threads()}"
        f" ({numba.threading_layer()} layer), load average {os.getloadavg()[0]:.2f}"
    )

    try:
        from langchain_text_splitters import MarkdownTextSplitter
    except ImportError:
        MarkdownTextSplitter = None  # noqa: N806
        print("LangChain: langchain-text-splitters not installed, skipped")
    sys.path.append(str(ROOT))  # tests.naive, after the installed fastrag
    from tests.naive.chunking import normalise, structure_chunks

    results: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for _ in range(args.repeat):
        cold = fresh(texts)
        dt, s_chunks = timed(lambda cold=cold: structure.chunk(cold, threads=args.threads))
        results.setdefault("fastrag structure, list[str]", []).append(dt)
        array = pa.array(fresh(texts), type=pa.large_string())
        dt, _ = timed(lambda array=array: structure.chunk(array, threads=args.threads))
        results.setdefault("fastrag structure, pyarrow array", []).append(dt)
        cold = fresh(texts)
        dt, w_chunks = timed(lambda cold=cold: windows.chunk(cold, threads=args.threads))
        results.setdefault("fastrag windows, list[str]", []).append(dt)
        if MarkdownTextSplitter is not None:
            splitter = MarkdownTextSplitter(chunk_size=args.window, chunk_overlap=args.overlap)
            cold = fresh(texts)
            dt, lc = timed(lambda cold=cold, splitter=splitter: splitter.create_documents(cold))
            results.setdefault("LangChain MarkdownTextSplitter", []).append(dt)
            counts["LangChain MarkdownTextSplitter"] = len(lc)
        counts["fastrag structure, list[str]"] = counts["fastrag structure, pyarrow array"] = len(
            s_chunks
        )
        counts["fastrag windows, list[str]"] = len(w_chunks)

    # The reference on a sample (it is slow); fastrag's chunks must equal it.
    sample = texts[: max(1, unique)]
    dt, ref = timed(lambda: [structure_chunks(t, args.window, args.overlap) for t in sample])
    sample_mb = sum(len(t.encode()) for t in sample) / 1e6
    got = structure.chunk(sample)
    ref_flat = [(s, e, c) for doc in ref for s, e, c, _ in doc]
    mine = list(zip(got.chunk_start.tolist(), got.chunk_end.tolist(), got.texts(), strict=True))
    assert mine == ref_flat, "fastrag's structure chunks differ from the reference"
    ref_rate = sample_mb / dt

    base = statistics.median(results["fastrag structure, list[str]"])
    print(f"\n{'chunker':<36} {'median s':>9} {'MB/s':>8} {'vs fastrag':>11} {'chunks':>10}")
    for name, times in results.items():
        med = statistics.median(times)
        print(f"{name:<36} {med:>9.3f} {mb / med:>8.1f} {med / base:>10.2f}x {counts[name]:>10,}")
    print(f"{'pure-Python reference (sample)':<36} {sample_mb / ref_rate:>9.3f} {ref_rate:>8.1f} "
          f"{(mb / ref_rate) / base:>10.2f}x  (equal to fastrag's: yes)")  # fmt: skip

    # Word cuts on the unique documents (normalised text for fastrag, raw for LangChain).
    norm = [normalise(t) for t in sample]
    s_one = structure.chunk(sample)
    w_one = windows.chunk(sample)
    shares = {
        "fastrag structure": cut_share(norm, list(zip(s_one.chunk_doc.tolist(), s_one.chunk_start.tolist(), s_one.chunk_end.tolist(), strict=True))),
        "fastrag windows": cut_share(norm, list(zip(w_one.chunk_doc.tolist(), w_one.chunk_start.tolist(), w_one.chunk_end.tolist(), strict=True))),
    }  # fmt: skip
    if MarkdownTextSplitter is not None:
        splitter = MarkdownTextSplitter(
            chunk_size=args.window, chunk_overlap=args.overlap, add_start_index=True
        )
        spans = []
        for d, t in enumerate(sample):
            for doc in splitter.create_documents([t]):
                s = doc.metadata["start_index"]
                spans.append((d, s, s + len(doc.page_content)))
        shares["LangChain MarkdownTextSplitter"] = cut_share(sample, spans)
    print("\nchunk edges that cut a word (unique documents):")
    for name, share in shares.items():
        print(f"  {name:<32} {share:6.1%}")
    if args.answers:
        answer_fragments(sample, args.answers, args.window, args.overlap)
    return 0


def answer_fragments(texts: list[str], n: int, window: int, overlap: int) -> None:
    """Extractive answers to heading questions: how many start or end inside a word.

    The questions are the documents' own Markdown headings (``Installation``,
    ``Quick start``, ...) prefixed with "How to" when short, asked of a
    knowledge base of each chunking; an answer sentence "cuts a word" when
    the document text continues with a letter or digit on either side of it.
    """
    import re

    import fastrag
    from tests.naive.chunking import normalise

    docs = [{"id": f"d{i}", "text": t} for i, t in enumerate(texts)]
    norm = {d["id"]: normalise(d["text"]) for d in docs}
    questions = []
    for t in texts:
        for m in re.finditer(r"^#{1,3} +(.{8,60})$", t, flags=re.MULTILINE):
            questions.append(m.group(1).strip())
    questions = sorted(set(questions))[:n]
    print(f"\nextractive answers to {len(questions)} heading questions:")
    for mode in ("windows", "structure"):
        kb = fastrag.KnowledgeBase.build(docs, chunking=mode, window=window, overlap=overlap)
        found = cut = 0
        for q in questions:
            ans = kb.answer(q, k=5)
            if not ans.found:
                continue
            found += 1
            pieces = [p.strip() for p in re.split(r"\[\d+\]", ans.text) if p.strip()]
            hits = list(ans.citations.values())
            bad = False
            for piece in pieces:
                for h in hits:
                    body = norm[h.doc_id]
                    pos = body.find(piece)
                    if pos < 0:
                        continue
                    end = pos + len(piece)
                    if (pos > 0 and body[pos - 1].isalnum() and piece[0].isalnum()) or (
                        end < len(body) and body[end].isalnum() and piece[-1].isalnum()
                    ):
                        bad = True
                    break
            cut += bad
        print(
            f"  {mode:<10} found {found:>4}, of which {cut:>4} ({cut / max(1, found):.1%}) cut a word"
        )


if __name__ == "__main__":
    sys.exit(main())
