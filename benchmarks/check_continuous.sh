#!/usr/bin/env bash
# Check that `asv continuous` catches a regression across two commits of this repository.
#
#     benchmarks/check_continuous.sh            # 26 minutes at load 15-25 on 2 cores: one env, two builds
#     KEEP=1 benchmarks/check_continuous.sh     # keep the temporary clone (printed) to look at
#
# What it does, in a temporary clone of the current HEAD (commit first: uncommitted work is not in
# the clone), with the project's own benchmarks/asv.conf.json:
#   1. commits a deliberate 2x slowdown of one kernel: the exact top-k scan wrapper
#      (fastrag/index/exact.py, _scan_path) calls its kernel twice; batches of 1 take that path,
#      batches of 64 and more the BLAS path, which stays as it was;
#   2. runs `asv continuous -b 'ExactTopK\.time_exact_topk\(100000, 384, (1|64)\)' BASE SLOW`
#      (the batch-1 row, slowed, and the batch-64 row, not): asv builds a virtualenv
#      from the repository (pip wheel of each commit, then pip install of it with its
#      dependencies from the package index; no other network), runs the benchmark on both
#      commits and compares them;
#   3. passes (exit 0) when asv reports the batch-1 row under "PERFORMANCE DECREASED", and
#      fails (exit 1) otherwise.
# Numba compiles the kernels once per environment into a cache inside the clone (setup_cache,
# not timed). The virtualenv gets the Python version asv itself runs on. Environment variables:
# BENCH (the -b regex), FACTOR (asv's --factor, default 1.3).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
python=$(command -v python3 || command -v python)
# parameterised names are matched with their parameters: "...time_exact_topk(100000, 384, 1)"
bench=${BENCH:-'ExactTopK\.time_exact_topk\(100000, 384, (1|64)\)'}
factor=${FACTOR:-1.3}
work=$(mktemp -d "${TMPDIR:-/tmp}/fastrag-asv-continuous.XXXXXX")
if [[ -z "${KEEP:-}" ]]; then
    trap 'rm -rf "$work"' EXIT
fi
echo "work directory: $work"

git clone --quiet --no-hardlinks "$repo" "$work/repo"
cd "$work/repo"
git checkout --quiet -b asv-continuous-check "$(git -C "$repo" rev-parse HEAD)"
base=$(git rev-parse HEAD)

target='    _topk.scan_topk(queries, corpus, mask, nblocks, ids, scores)'
if [[ $(grep -cxF "$target" fastrag/index/exact.py) != 1 ]]; then
    echo "check_continuous: the scan kernel call in fastrag/index/exact.py moved; update this script" >&2
    exit 2
fi
"$python" - "$target" <<'EOF'
import sys
path, line = "fastrag/index/exact.py", sys.argv[1]
text = open(path).read()
open(path, "w").write(text.replace(line, line + "\n" + line + "  # deliberate 2x slowdown", 1))
EOF
git -c user.name="asv check" -c user.email="asv-check@example.invalid" \
    commit --quiet -am "deliberate 2x slowdown of the exact top-k scan (check_continuous.sh)"
slow=$(git rev-parse HEAD)
git --no-pager show --stat --oneline HEAD | head -3

cd benchmarks
export NUMBA_CACHE_DIR="$work/numba-cache"
asv machine --yes --machine asv-continuous-check >/dev/null
set +e
# --no-interleave-rounds: each commit is installed once, not once per round (measured here: the
# second commit's setup_cache found the kernels cached, since native/ did not change between them).
asv continuous --machine asv-continuous-check --factor "$factor" --no-interleave-rounds \
    --show-stderr -b "$bench" "$base" "$slow" 2>&1 | tee "$work/continuous.log"
status=${PIPESTATUS[0]}
set -e

echo
if [[ $status == 1 ]] && grep -q "PERFORMANCE DECREASED" "$work/continuous.log" \
    && grep -E "^[| ]*\+ .*time_exact_topk\(100000, 384, 1\)" "$work/continuous.log" >/dev/null; then
    echo "check_continuous: OK, asv continuous flagged the 2x slowdown (exit status $status)"
    exit 0
fi
echo "check_continuous: FAILED, the slowdown was not flagged (asv exit status $status)" >&2
exit 1
