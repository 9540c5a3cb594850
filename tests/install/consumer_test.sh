#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs a kiln build into a temporary prefix (cmake --install), then builds
# tests/install/consumer against that prefix twice, with find_package(kiln) and with pkg-config,
# and runs both: each compiles the digit model and serves the example repository (consumer.cc).
# Fails when the installed CMake or pkg-config files, or the consumer's compile lines, point back
# into the source or build tree.
# Usage: consumer_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: consumer_test.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d -t kiln-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }
echo "== installed into $prefix: $(find "$prefix" -type f | wc -l) files"
for f in "$prefix"/lib/cmake/kiln/*.cmake "$prefix"/lib/pkgconfig/kiln-*.pc; do
  if grep -q "$source_dir" "$f"; then
    grep -n "$source_dir" "$f" | head -3
    fail "$f refers to the source tree $source_dir"
  fi
done
for name in core compiler pipeline server client; do
  [[ -f $prefix/lib/pkgconfig/kiln-$name.pc ]] || fail "no kiln-$name.pc"
done

echo "== find_package(kiln): cmake -S tests/install/consumer -DCMAKE_PREFIX_PATH=$prefix"
cmake -S "$here/consumer" -B "$tmp/cmake" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; fail "configure the consumer"; }
cmake --build "$tmp/cmake" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "build the consumer"; }
if ninja -C "$tmp/cmake" -t commands | grep -qE -- "-(I|isystem) ?($source_dir|$build)"; then
  fail "the consumer was compiled with an include folder in kiln's source or build tree"
fi
out=$(KILN_CACHE_DIR=$tmp/cache "$tmp/cmake/kiln_consumer" "$source_dir/examples") ||
  { echo "$out"; fail "kiln_consumer (find_package) failed"; }
echo "$out" | tail -2

echo "== pkg-config: g++ consumer.cc \$(pkg-config --cflags --libs kiln-compiler kiln-pipeline kiln-client)"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
flags=$(pkg-config --cflags --libs kiln-compiler kiln-pipeline kiln-client)
g++ -O1 -o "$tmp/pc_consumer" "$here/consumer/consumer.cc" $flags >"$tmp/pc.log" 2>&1 ||
  { cat "$tmp/pc.log"; echo "flags: $flags"; fail "build the consumer with pkg-config"; }
out=$(KILN_CACHE_DIR=$tmp/cache "$tmp/pc_consumer" "$source_dir/examples") ||
  { echo "$out"; fail "kiln_consumer (pkg-config) failed"; }
echo "$out" | tail -2
echo "PASS"
