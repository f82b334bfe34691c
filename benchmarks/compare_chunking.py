"""fastrag's Chunker against the pure-Python reference, side by side, in one process.

The reference is the specification (``tests/naive/chunking.py``): ``re.sub``
white space, ``strip``, then slice windows, producing the list of chunk
strings. Both run on the same mixed English/Chinese corpus; their outputs are
compared chunk by chunk; the script prints MB/s (UTF-8 input bytes per second,
median of the repeats) and the ratio.

fastrag is timed end to end from a ``list[str]``: encoding the strings with
pyarrow, the kernel, and the result arrays. Before every repeat the strings are
copied to fresh objects, because CPython caches a string's UTF-8 form the
first time pyarrow encodes it, which would make later repeats unrealistically
cheap; the "warm" line shows that case too. The breakdown lines time the parts
separately.

Fresh memory can be expensive: in a VM whose host reclaims the guest's free
pages (Firecracker with free-page reporting, for one), the first touch of a
newly allocated buffer costs about 2 ms/MB instead of about 0.13 ms/MB, and
the output alone is 1.25x the input. Medians and bests are both printed; a
wide gap between them on the fastrag lines is that effect, not the kernel.

Usage::

    python benchmarks/compare_chunking.py --mb 100 --repeat 3
    python benchmarks/compare_chunking.py --mb 10 --threads 1 --cache /tmp/fastrag-bench
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
import pyarrow as pa
import pyarrow.feather as feather  # noqa: E402
from fastrag._native import chunking as kernels  # noqa: E402
from fastrag.datasets.synthetic import mixed_texts  # noqa: E402

from fastrag.text.chunking import Chunker  # noqa: E402
from fastrag.text.utf8 import utf8_buffers  # noqa: E402

# The pure-Python reference lives in the checkout's tests/naive; appended (not prepended)
# so that the installed fastrag, with its kernels, is the one imported.
sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))
from naive.chunking import chunk_texts  # noqa: E402

BYTES_PER_CHAR = 1.45  # a little under the mix's ~1.47, so --mb is reached


def corpus(mb: float, cache: Path | None) -> list[str]:
    """Mixed English/Chinese documents of at least ``mb`` MB of UTF-8."""
    path = cache / f"mixed_{mb:g}MB.arrow" if cache else None
    if path is not None and path.exists():
        return feather.read_table(path).column("text").to_pylist()
    texts = mixed_texts(int(mb * 1e6 / BYTES_PER_CHAR))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        feather.write_feather(pa.table({"text": pa.array(texts, pa.large_string())}), path)
    return texts


def fresh(texts: list[str]) -> list[str]:
    """New string objects with the same text (no cached UTF-8 form)."""
    return [(t + " ")[:-1] for t in texts]


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100.0, help="corpus size in MB of UTF-8 (100)")
    ap.add_argument("--repeat", type=int, default=3, help="timed repeats; medians are shown (3)")
    ap.add_argument("--threads", type=int, default=None, help="Numba threads (default: all)")
    ap.add_argument("--window", type=int, default=200)
    ap.add_argument("--overlap", type=int, default=40)
    ap.add_argument("--cache", type=Path, default=None, help="directory to cache the corpus in")
    args = ap.parse_args(argv)

    t_gen, texts = timed(lambda: corpus(args.mb, args.cache))
    n_bytes = sum(len(t.encode()) for t in texts)
    mb = n_bytes / 1e6
    chunker = Chunker(window=args.window, overlap=args.overlap)
    print(
        f"corpus: {len(texts):,} documents, {sum(map(len, texts)):,} characters, "
        f"{mb:.1f} MB UTF-8 (ready in {t_gen:.1f} s)"
    )
    kernels.warmup()
    chunker.chunk(texts[:10], threads=args.threads)  # compile/load outside the timings
    print(
        f"machine: {os.cpu_count()} CPUs, Numba threads {args.threads or numba.get_num_threads()}"
        f" ({numba.threading_layer()} layer), load average {os.getloadavg()[0]:.2f}"
    )
    print(f"chunker: {chunker}")

    ours: list[float] = []
    warm: list[float] = []
    ref: list[float] = []
    encode: list[float] = []
    kernel: list[float] = []
    back_to_back: list[float] = []
    arrow_out: list[float] = []
    to_python: list[float] = []
    chunks = expected = None
    for _ in range(args.repeat):
        cold = fresh(texts)
        dt, chunks = timed(lambda cold=cold: chunker.chunk(cold, threads=args.threads))
        ours.append(dt)
        warm.append(timed(lambda cold=cold: chunker.chunk(cold, threads=args.threads))[0])
        del cold
        # breakdown: encoding, kernel alone (Arrow input), Arrow output, Python strings
        cold = fresh(texts)
        dt, array = timed(lambda cold=cold: pa.array(cold, type=pa.large_string()))
        encode.append(dt)
        del cold
        data, offsets = utf8_buffers(array)
        kernel.append(timed(lambda array=array: chunker.chunk(array, threads=args.threads))[0])
        # again at once: the pages just freed are reused (a busy ingestion loop)
        back_to_back.append(
            timed(lambda array=array: chunker.chunk(array, threads=args.threads))[0]
        )
        arrow_out.append(timed(chunks.text_array)[0])
        dt, got = timed(chunks.texts)
        to_python.append(dt)
        del array, data, offsets, got
        cold = fresh(texts)
        dt, expected = timed(lambda cold=cold: chunk_texts(cold, args.window, args.overlap))
        ref.append(dt)
        del cold

    assert chunks is not None and expected is not None
    got = chunks.texts()
    if got != expected:
        diff = [i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b][:1]
        first = diff[0] if diff else min(len(got), len(expected))
        print(f"MISMATCH: {len(got)} chunks, {len(expected)} expected; first difference at {first}")
        return 1
    print(f"outputs identical: {len(got):,} chunks compared ({mb:.1f} MB of input)")

    def line(name: str, times: list[float], note: str = "") -> None:
        med, best = statistics.median(times), min(times)
        print(
            f"  {name:38s} {med * 1e3:8.1f} ms {mb / med:7.0f} MB/s"
            f"   (best {best * 1e3:7.1f} ms {mb / best:7.0f} MB/s)  {note}"
        )

    print(f"median of {args.repeat} (MB/s of UTF-8 input):")
    line("reference (re.sub + strip + slicing)", ref)
    line("fastrag Chunker.chunk(list[str])", ours, "<- end to end, fresh strings")
    line("fastrag, strings already UTF-8-cached", warm)
    print("  breakdown:")
    line("  pa.array(list[str]) encoding", encode)
    line("  Chunker.chunk(pa.Array) (kernel)", kernel)
    line("  the same, run again at once", back_to_back, "(memory just freed is reused)")
    line("  Chunks.text_array() (zero-copy)", arrow_out)
    line("  Chunks.texts() -> list[str]", to_python, "(not in the end-to-end time)")
    ratio = statistics.median(ref) / statistics.median(ours)
    ratio_kernel = statistics.median(ref) / statistics.median(kernel)
    print(f"speed-up, end to end: {ratio:.1f}x   (Arrow input: {ratio_kernel:.1f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
