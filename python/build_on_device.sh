#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Builds the kiln Python extension on another machine (the GPU machine: Ubuntu, its own Python
# and PyTorch, none of our Debian libraries) from what this machine built. Two steps:
#
#   here:   python/build_on_device.sh pack [BUILD_DIR]     (default build/ci; writes .devpack/python)
#   there:  python/build_on_device.sh build                (in the checkout; carry ".devpack")
#           .devpack/python/run python3 examples/torch/compile_backend.py --target cuda --fp16
#           (JOBS=N: parallel compiles, default every core)
#
# `pack` gathers kiln's static libraries (the compiler's layers, libkiln_pipeline.a and
# libkiln_core.a), the Debian shared
# libraries the extension links (oneDNN, ONNX, protobuf, fmt, libjpeg-turbo, ...), the CUDA
# libraries it links against (link time only: at run time the machine's own CUDA libraries are
# used, as with ../shared/tools/devpack), the header-only pybind11 and the fmt headers, and the
# compile definitions of the ci build. `build` compiles python/src/*.cc with that machine's g++
# against its Python (include dir and extension suffix from sysconfig; its own pybind11 when it
# has one) and links the packed libraries, writing .devpack/python/build/kiln/_kiln<suffix> beside links to the
# pure-Python modules of python/kiln. `run` sets PYTHONPATH and LD_LIBRARY_PATH and runs a
# command: `import kiln` then works with that machine's python3 and torch.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
pack_dir=$here/.devpack/python
cmd=${1:-}

pack() {
  local build=${1:-build/ci}
  local so
  so=$(ls "$here/$build"/python/kiln/_kiln*.so 2>/dev/null | head -1) ||
    true
  [ -n "$so" ] || { echo "pack: no $build/python/kiln/_kiln*.so; build it first:" \
    "ninja -C $build kiln_python_package" >&2; exit 1; }
  local stage
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  mkdir -p "$stage"/{lib,linkonly,include,pybind11}
  # Every layer of the compiler (ir, ops, passes, targets, ...), the pipeline and core.
  cp "$here/$build"/compiler/libkiln_*.a "$here/$build"/pipeline/libkiln_pipeline.a \
     "$here/$build"/core/libkiln_core.a "$stage/lib/"
  # Shared libraries the extension needs at run time, except glibc, libstdc++ and CUDA.
  local skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libstdc\+\+|libgcc_s|libcuda\.so|libcudart|libcublas|libcudnn|libnvrtc|libnvJitLink|libz\.so)'
  ldd "$so" | awk '/=> \//{print $1" "$3}' | while read -r name path; do
    [[ $name =~ $skip ]] && continue
    cp -L "$path" "$stage/lib/$name"
  done
  # CUDA libraries to link against; the GPU machine supplies them at run time.
  local cuda=/usr/local/cuda
  cp -L "$cuda/lib/libcudart.so" "$stage/linkonly/libcudart.so"
  cp -L "$cuda/lib/libcudnn.so" "$stage/linkonly/libcudnn.so"
  cp "$cuda/targets/x86_64-linux/lib/libcudadevrt.a" \
     "$cuda/targets/x86_64-linux/lib/libcudart_static.a" "$stage/linkonly/"
  cp -r /usr/include/fmt "$stage/include/"
  cp -r /usr/include/pybind11 "$stage/pybind11/"  # used only where the Python has no pybind11
  # The definitions the ci build compiles the extension with (they select kiln's targets).
  /usr/bin/python3 - "$here/$build/compile_commands.json" > "$stage/defines" <<'EOF'
import json, shlex, sys
entry = next(e for e in json.load(open(sys.argv[1])) if e["file"].endswith("python/src/compiler.cc"))
print(" ".join(a for a in shlex.split(entry["command"])
               if a.startswith("-D") and not a.startswith("-Dkiln_python")))
EOF
  mkdir -p "$pack_dir"
  tar -C "$stage" -cJf "$pack_dir/pack.tar.xz" lib linkonly include pybind11 defines
  cp "$0" "$pack_dir/build_on_device.sh"
  cat > "$pack_dir/run" <<'RUN'
#!/bin/bash
# run COMMAND ARGS...: with the kiln extension built by build_on_device.sh on this machine.
dir=$(cd "$(dirname "$0")" && pwd)
cuda_libs=/usr/local/cuda/lib64:/usr/local/cuda/lib:/usr/lib/x86_64-linux-gnu
for p in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) \
         /opt/torch/.venv/lib/python3*/site-packages; do
  for lib in "$p"/nvidia/*/lib; do [ -d "$lib" ] && cuda_libs=$cuda_libs:$lib; done
done
export LD_LIBRARY_PATH=$dir/build/lib:$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=$dir/build${PYTHONPATH:+:$PYTHONPATH}
exec "$@"
RUN
  chmod +x "$pack_dir/run"
  echo "packed $(du -h "$pack_dir/pack.tar.xz" | cut -f1) into $pack_dir; on the GPU machine:" \
       "python/build_on_device.sh build, then .devpack/python/run python3 ..."
}

build() {
  [ -f "$pack_dir/pack.tar.xz" ] || { echo "build: $pack_dir/pack.tar.xz is missing; run" \
    "python/build_on_device.sh pack on the build machine and carry .devpack" >&2; exit 1; }
  local py=${PYTHON:-python3}
  if ! "$py" -c 'import torch' 2>/dev/null && [ -x /opt/torch/.venv/bin/python3 ]; then
    py=/opt/torch/.venv/bin/python3
  fi
  local out=$pack_dir/build
  rm -rf "$out" && mkdir -p "$out/kiln"
  tar -C "$out" -xJf "$pack_dir/pack.tar.xz"
  local suffix includes
  suffix=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
  includes=$("$py" -c 'import sysconfig; print("-I" + sysconfig.get_paths()["include"])')
  # That Python's own pybind11 when it has one (it matches its numpy: pybind11 before 2.12 does
  # not know numpy 2's dtype layout), else Debian's, carried.
  if pybind=$("$py" -c 'import pybind11; print(pybind11.get_include())' 2>/dev/null); then
    includes="$includes -I$pybind"
  else
    includes="$includes -I$out/pybind11"
  fi
  local libs=()
  for f in "$out"/lib/*.so*; do libs+=("$f"); done
  echo "compiling the kiln extension for $("$py" --version) ($suffix) with $(g++ --version | head -1)"
  # One g++ per source, JOBS at a time (default: every core), then one link.
  local jobs=${JOBS:-$(nproc)} objs=() src obj
  mkdir -p "$out/obj"
  for src in "$here"/python/src/*.cc; do
    while (($(jobs -rp | wc -l) >= jobs)); do sleep 0.2; done
    obj=$out/obj/$(basename "${src%.cc}").o
    objs+=("$obj")
    # shellcheck disable=SC2046
    { g++ -std=c++20 -O2 -fPIC -fvisibility=hidden $(cat "$out/defines") \
        -I"$here" -isystem "$out/include" $includes -c "$src" -o "$obj" ||
        touch "$out/obj/failed"; } &
  done
  wait
  [ ! -e "$out/obj/failed" ] || { echo "build: compiling python/src failed (above)" >&2; exit 1; }
  g++ -shared "${objs[@]}" \
    -Wl,--start-group "$out"/lib/libkiln_*.a -Wl,--end-group \
    "${libs[@]}" "$out"/linkonly/libcudnn.so "$out"/linkonly/libcudart.so \
    "$out"/linkonly/libcudadevrt.a "$out"/linkonly/libcudart_static.a \
    -lgomp -lrt -lpthread -ldl -Wl,-rpath,'$ORIGIN/../lib' \
    -o "$out/kiln/_kiln$suffix"
  # The pure-Python package beside the extension (links: edits to python/kiln take effect).
  for f in "$here"/python/kiln/*; do
    case $(basename "$f") in _kiln*|__pycache__) ;; *) ln -sfn "$f" "$out/kiln/" ;; esac
  done
  echo "built $out/kiln/_kiln$suffix; run with: $pack_dir/run $py ..."
  "$pack_dir/run" "$py" -c 'import kiln, kiln.torch, torch; print("kiln", kiln.__version__,
    "targets", kiln.target_names(), "torch", torch.__version__,
    "torch.compile backend:", kiln.torch.backend_available())'
}

case "$cmd" in
  pack) shift; pack "$@" ;;
  build) build ;;
  *) sed -n '3,19p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
