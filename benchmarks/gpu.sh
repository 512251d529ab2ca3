#!/usr/bin/env bash
# The one command for a bare GPU machine (benchmarks/gpu.py says what it runs and prints):
#     bash benchmarks/gpu.sh [gpu.py's options]
# The GPU machine has torch and numpy but not gymnasium; carry its wheels in .whl (benchmarks/README.md, "On a GPU").
# Output goes to $OUT (the device tool's folder) or runs/gpu: gpu.log (all it prints), gpu_results.json, curve_s<seed>.pt.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c "import gymnasium" 2>/dev/null; then
    [ -d .whl ] || { echo "gymnasium is missing and no .whl folder of wheels was carried" >&2; exit 2; }
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 MINIRL_DATA=${MINIRL_DATA:-/tmp/minirl-data}
out=${OUT:-runs/gpu}
mkdir -p "$out"
exec > >(tee -a "$out/gpu.log") 2>&1  # everything below, also into gpu.log
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv || true
if python3 -c "import pytest" 2>/dev/null; then  # the tests that need a GPU (they skip on a CPU); ~15 s
    python3 -m pytest -q -o addopts="" -p no:cacheprovider tests/test_capture.py tests/test_seeds.py > "$out/pytest.log" 2>&1 \
        && echo "tests on this GPU: $(tail -n 1 "$out/pytest.log")" || echo "tests on this GPU FAILED: $(tail -n 1 "$out/pytest.log") (pytest.log)"
fi
python3 benchmarks/gpu.py --out "$out" "$@"
