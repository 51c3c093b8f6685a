#!/bin/bash
# Builds Tilewright for one Python interpreter in its own venv (under $2, default /tmp/tw-pyv)
# and runs one kernel on cpu and ascend910b with it. Usage: tests/pyversions/run.sh PYTHON [DIR]
# (e.g. /root/.pyenv/versions/3.9.18/bin/python). Not part of `make test`: a full build per version.
set -e
PY=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=${2:-/tmp/tw-pyv}/$($PY -c 'import sys; print("%d.%d" % sys.version_info[:2])')
$PY -m venv "$D/venv"
"$D/venv/bin/pip" install --quiet --upgrade pip
"$D/venv/bin/pip" install --quiet numpy ml_dtypes nanobind scikit-build-core ninja
(cd "$ROOT" && "$D/venv/bin/pip" install --quiet --no-build-isolation --no-deps -Cbuild-dir="$D/build" .)
cd "$D" && TW_CACHE_DIR="$D/cache" "$D/venv/bin/python" "$ROOT/tests/pyversions/one_kernel.py"
