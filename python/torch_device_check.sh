#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The torch.compile backend on the GPU machine in one device call: builds the kiln extension
# there (python/build_on_device.sh), runs the device-resident tests, and times ResNet-50 through
# torch.compile(backend="kiln") against eager, Inductor and `kiln perf --device-io`.
#
#   here:   python/torch_device_check.sh pack DEST       (DEST inside the checkout the device
#                                                         tool sends, ignored by git)
#   there:  DEST/tree/python/torch_device_check.sh run [STEP...]   (device run: carry [DEST];
#           logs and JSON in $OUT; steps: tests resnet50 bench, default all; env and the
#           extension's build always run)
#
# `pack` builds kiln and the extension (build/ci), packs the extension's parts
# (build_on_device.sh pack) and the kiln CLI (../shared/tools/devpack), and copies the sources the
# extension is compiled from (python/, the C++ headers, examples/torch) into DEST/tree, so that
# the run does not depend on the sending checkout's revision. Environment: BATCH (256),
# CHECK_BATCH (8, the fp32 check), TOTAL_SECONDS (540).
set -euo pipefail
cmd=${1:-}

pack() {
  local dest=${1:?pack DEST}
  local root
  root=$(cd "$(dirname "$0")/.." && pwd)
  cd "$root"
  local devpack=${KILN_DEVPACK:-$root/../shared/tools/devpack}
  [[ -x "$devpack" ]] || devpack=/work/shared/tools/devpack
  [[ -f build/ci/build.ninja ]] || cmake --preset ci >/dev/null
  nice -n 10 ninja -C build/ci -j2 kiln kiln_python_package
  python/build_on_device.sh pack
  rm -rf "$dest" && mkdir -p "$dest/tree/.devpack"
  cp -r .devpack/python "$dest/tree/.devpack/"
  "$devpack" "$dest/cli" build/ci/tools/kiln
  # The sources build_on_device.sh compiles: python/src, the headers it includes, python/kiln.
  tar -c --exclude=__pycache__ python examples/torch bench/torch_compile.py \
    $(find core compiler pipeline -name '*.h' -o -name '*.inc') | tar -C "$dest/tree" -x
  du -sh "$dest"
}

run() {
  local tree dest out
  tree=$(cd "$(dirname "$0")/.." && pwd)
  dest=$(dirname "$tree")
  out=${OUT:-/tmp/torch_device_check}
  mkdir -p "$out"
  export PYTHONUNBUFFERED=1
  local batch=${BATCH:-256} check_batch=${CHECK_BATCH:-8} steps="$*"
  local deadline=$((SECONDS + ${TOTAL_SECONDS:-540}))
  step() {  # step NAME LIMIT COMMAND...: runs with a limit cut to what is left, logs to $out/NAME.log
    local name=$1 limit=$2; shift 2
    local left=$((deadline - SECONDS))
    ((limit > left)) && limit=$left
    if ((limit <= 5)); then echo "== $name: skipped (no time left)"; return 0; fi
    echo "== $name (limit ${limit}s)"
    local start=$SECONDS
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    tail -n 25 "$out/$name.log"
    echo "== $name: exit $rc after $((SECONDS - start))s"
  }
  set +e
  want() { [[ -z "$steps" || " $steps " == *" $1 "* ]]; }
  step env 30 bash -c 'nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv;
    python3 -c "import torch; print(\"torch\", torch.__version__, torch.cuda.get_device_name())"'
  step build 240 "$tree/python/build_on_device.sh" build
  local py=(python3)
  python3 -c 'import torch' 2>/dev/null || py=(/opt/torch/.venv/bin/python3)
  want tests && step tests 120 "$tree/.devpack/python/run" "${py[@]}" -m pytest -q -p no:cacheprovider \
    "$tree/python/tests/test_torch_device.py" "$tree/python/tests/test_pipeline_device.py"
  want resnet50 && step resnet50 420 "$tree/.devpack/python/run" "${py[@]}" \
    "$tree/examples/torch/compile_backend.py" --target cuda --fp16 --batch "$batch" \
    --compare-inductor --kiln-perf "$dest/cli/run kiln" --check-fp32 "$check_batch" \
    --json "$out/resnet50.json"
  want bench && step bench 420 "$tree/.devpack/python/run" "${py[@]}" \
    "$tree/bench/torch_compile.py" --kiln "$dest/cli/run kiln" --batch "$batch" --fp16 --rounds 3 \
    --json "$out/bench-torch-compile.json"
}

case "$cmd" in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  *) sed -n '3,17p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
