"""Every benchmark script starts from an installed fastrag (no accidental import of the checkout)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"

PROBE = textwrap.dedent(
    """
    import importlib, json, os, runpy, sys
    out = {}
    for script in sys.argv[1:]:
        sys.argv = [script, "--help"]
        try:
            suite = os.path.dirname(script)
            if os.path.basename(suite) == "benchmarks" and os.path.isfile(os.path.join(suite, "common.py")):
                sys.path.append(os.path.dirname(suite))  # the asv suite: a package
                importlib.import_module("benchmarks." + os.path.basename(script)[:-3])
            else:
                runpy.run_path(script, run_name="__main__")
            out[script] = "ran"
        except SystemExit as exc:
            out[script] = "ok" if exc.code in (0, None) else f"exit {exc.code}"
        except ModuleNotFoundError as exc:
            top = (exc.name or "").split(".")[0]
            out[script] = "ok" if top != "fastrag" and top != "tests" else f"{type(exc).__name__}: {exc}"
            if top not in ("fastrag", "tests"):
                out[script] = f"skip: {exc.name} not installed"
        except Exception as exc:  # noqa: BLE001
            out[script] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(out))
    """
)


def test_scripts_start(tmp_path):
    scripts = sorted(str(p) for p in BENCH.glob("*.py") if not p.name.startswith("_"))
    scripts += sorted(str(p) for p in (BENCH / "benchmarks").glob("bench_*.py"))  # the asv suite
    run = subprocess.run(
        [sys.executable, "-c", PROBE, *scripts], cwd=tmp_path, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads(run.stdout.strip().splitlines()[-1])
    bad = {
        Path(k).name: v
        for k, v in results.items()
        if v not in ("ok", "ran") and not v.startswith("skip")
    }
    assert not bad, bad
