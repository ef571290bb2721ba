#!/usr/bin/env bash
# Run ember's tests with the cuda backend on a GPU machine whose python has CuPy, CMake, ninja
# and pybind11 but no network (the lent H200): build ember._C in place, put the packages' src/ on
# PYTHONPATH, register ember-autograd's and ember-fx's entry points, then run pytest.
#
#   bash packages/tensor-core/tests/cuda/run_gpu_tests.sh [pytest arguments]
#   bash packages/tensor-core/tests/cuda/run_gpu_tests.sh --bench [benchmarks/run.py arguments]
#   bash packages/tensor-core/tests/cuda/run_gpu_tests.sh --python SCRIPT [arguments]
#
# Without a test path among its arguments it runs every test tree (packages/tensor-core/tests,
# packages/autograd/tests, packages/fx/tests, examples/tests; name packages/dynamo/tests to add it), with
# the given options. With --bench it runs the GPU benchmarks (`benchmarks/run.py --device cuda`, which writes BENCHMARKS_CUDA.md) instead of pytest.
# Environment: PYTHON (default python3), EMBER_BUILD_DIR (default /tmp/ember-build).
set -euo pipefail
cd "$(dirname "$0")/../../../.."  # the repository root
PY=${PYTHON:-python3}
BUILD=${EMBER_BUILD_DIR:-/tmp/ember-build}
cmake -S packages/tensor-core -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$(command -v "$PY")" -Dpybind11_DIR="$("$PY" -m pybind11 --cmakedir)" >/dev/null
cmake --build "$BUILD" -j"$(nproc)" >/dev/null
cp "$BUILD"/_C*.so packages/tensor-core/src/ember/
# Without pip, declare the distributions by hand: each needs its metadata (ember.compile asks whether
# ember-dynamo and ember-inductor are installed), and ember-autograd and ember-fx their entry points
# (ember.extensions).
SITE="$BUILD/site"
for dist in autograd fx inductor dynamo; do
  mkdir -p "$SITE/ember_$dist-0.1.0.dist-info"
  printf 'Metadata-Version: 2.1\nName: ember-%s\nVersion: 0.1.0\n' "$dist" >"$SITE/ember_$dist-0.1.0.dist-info/METADATA"
done
for dist in autograd fx; do
  printf '[ember.extensions]\n%s = ember.%s\n' "$dist" "$dist" >"$SITE/ember_$dist-0.1.0.dist-info/entry_points.txt"
done
export PYTHONPATH="packages/tensor-core/src:packages/autograd/src:packages/fx/src:packages/inductor/src:packages/dynamo/src:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export EMBER_TEST_BACKEND=cuda
if [ "${1:-}" = "--bench" ]; then
  shift
  exec "$PY" benchmarks/run.py --device cuda "$@"
fi
# --python SCRIPT [ARGS]: run a script in the same environment (e.g. benchmarks/gpt_phases.py)
if [ "${1:-}" = "--python" ]; then
  shift
  exec "$PY" "$@"
fi
# Without a test path among the arguments (options only, such as -q -n 16), run the four test trees.
has_path=0
for arg in "$@"; do
  case "$arg" in -*) ;; *) if [ -e "${arg%%::*}" ]; then has_path=1; fi ;; esac
done
if [ "$has_path" -eq 0 ]; then
  set -- "$@" packages/tensor-core/tests packages/autograd/tests packages/fx/tests examples/tests
fi
exec "$PY" -m pytest -p no:cacheprovider "$@"
