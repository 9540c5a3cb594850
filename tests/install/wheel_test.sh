#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Python package installed as users install it, offline with Debian's pip and setuptools,
# from a kiln build (KILN_BUILD_DIR): a wheel (pip wheel --no-build-isolation) installed into a
# venv, and `pip install --no-build-isolation ./python` into another. In each, from a folder
# outside the tree, `import kiln` must come from the venv and classify the digits
# (check_wheel.py), and `kiln` on PATH must be the venv's CLI. The source tree stays clean.
# Usage: wheel_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: wheel_test.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d -t kiln-wheel.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export KILN_BUILD_DIR=$build KILN_JOBS=2 KILN_CACHE_DIR=$tmp/cache PIP_NO_INDEX=1
unset PYTHONPATH
cd "$tmp"

check_venv() {  # VENV: kiln imports from it and its bin/kiln is the CLI on PATH
  local venv=$1
  PATH=$venv/bin:$PATH "$venv/bin/python" "$here/check_wheel.py" "$venv" "$source_dir/examples" ||
    fail "check_wheel.py in $venv"
  local cli
  cli=$(PATH=$venv/bin:$PATH command -v kiln)
  [[ $cli == "$venv/bin/kiln" ]] || fail "kiln on PATH is $cli, not $venv/bin/kiln"
  local version
  version=$("$cli" --version)
  [[ $version == "kiln "* ]] || fail "kiln --version printed \"$version\""
  echo "$cli: $version"
}

echo "== pip wheel --no-build-isolation ./python"
/usr/bin/python3 -m pip wheel --no-build-isolation --no-deps -w "$tmp/dist" "$source_dir/python" \
  >"$tmp/wheel.log" 2>&1 || { cat "$tmp/wheel.log"; fail "pip wheel"; }
wheel=$(ls "$tmp"/dist/kiln-*.whl)
echo "$(basename "$wheel"): $(du -h "$wheel" | cut -f1)"
/usr/bin/python3 -m zipfile -l "$wheel" >"$tmp/contents"
for f in kiln/__init__.py 'kiln/_kiln\.cpython-[^ ]*\.so' kiln/pipeline/fn.pyi \
  kiln/client/grpc_predict_v2_pb2.py 'kiln-[^/]*\.data/scripts/kiln'; do
  grep -qE "^$f " "$tmp/contents" || fail "the wheel has no $f"
done

echo "== the wheel in a venv (--system-site-packages for Debian's numpy)"
/usr/bin/python3 -m venv --system-site-packages "$tmp/venv-wheel"
"$tmp/venv-wheel/bin/python" -m pip install --no-deps "$wheel" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "pip install the wheel"; }
check_venv "$tmp/venv-wheel"

echo "== pip install --no-build-isolation ./python in another venv"
/usr/bin/python3 -m venv --system-site-packages "$tmp/venv-source"
"$tmp/venv-source/bin/python" -m pip install --no-build-isolation --no-deps "$source_dir/python" \
  >"$tmp/source.log" 2>&1 || { cat "$tmp/source.log"; fail "pip install ./python"; }
check_venv "$tmp/venv-source"

for leftover in "$source_dir"/python/build "$source_dir"/python/*.egg-info; do
  [[ ! -e $leftover ]] || fail "building the wheel left $leftover in the source tree"
done
echo "PASS"
