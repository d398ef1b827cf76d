#!/usr/bin/env bash
# Build kafkalog._native with AddressSanitizer + UBSan in a scratch copy of src/, then run the
# records and compaction tests (their native-core runs) and the differential fuzzing of the two
# cores under it (the records', and the append pipeline's: tests/storage/test_native_append.py,
# tests/storage/test_append_request.py, tests/storage/test_append_producers.py,
# tests/storage/test_append_compressed.py; the Spark reader's
# compiled runs against its per-batch path: tests/spark/test_slice_read_compiled.py).
# Usage: scripts/sanitize.sh [extra pytest arguments]   (PYTHON= the interpreter, default .venv)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
py=${PYTHON:-.venv/bin/python}
py="$(cd "$(dirname "$py")" && pwd)/$(basename "$py")"  # absolute, keeping the venv's symlink
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
cp -r src setup.py pyproject.toml README.md LICENSE MANIFEST.in "$build/"
rm -f "$build"/src/kafkalog/_native*.so
(cd "$build" && KAFKALOG_SANITIZE=1 "$py" setup.py -q build_ext --inplace >/dev/null)
# CPython is not built with the sanitizers: their runtimes are preloaded. Leak checking is off
# (the interpreter keeps objects alive at exit); any other report aborts the run.
export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export PYTHONPATH="$build/src"
unset KAFKALOG_PUREPYTHON
export KAFKALOG_TEST_CORES=native  # the pure-core runs of the same tests execute no C
"$py" -c 'import kafkalog.native as n, sys; sys.exit(0 if n.ext is not None and n.ext.SANITIZED else "the sanitized core did not load")'
cd "$root"
"$py" -m pytest -p no:cacheprovider tests/records tests/compaction tests/storage/test_native_append.py \
    tests/storage/test_append_request.py tests/storage/test_append_producers.py tests/storage/test_append_compressed.py \
    tests/spark/test_slice_read_compiled.py "$@"
