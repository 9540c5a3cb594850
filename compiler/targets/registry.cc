// SPDX-License-Identifier: Apache-2.0
// The target list: every target this build has, by name (the top of the compiler's layers).
#include <fmt/format.h>

#include "compiler/targets/ref/ref_target.h"
#include "compiler/targets/target.h"
#ifdef KILN_HAVE_DNNL
#include "compiler/targets/cpu/cpu_target.h"
#endif
#ifdef KILN_HAVE_CUDA_TARGET
#include "compiler/targets/cuda/cuda_target.h"
#include "core/gpu.h"
#endif

namespace kiln::compiler {

std::vector<std::string> target_names() {
  std::vector<std::string> names = {"ref"};
#ifdef KILN_HAVE_DNNL
  names.push_back("cpu");
#endif
#ifdef KILN_HAVE_CUDA_TARGET
  // Listed only where it can run: built with CUDA and a GPU present (asked once per process).
  static const bool has_gpu = !list_gpus().empty();
  if (has_gpu) names.push_back("cuda");
#endif
  return names;
}

Result<std::unique_ptr<Target>> make_target(std::string_view name) {
  if (name == "ref") return make_ref_target();
#ifdef KILN_HAVE_DNNL
  if (name == "cpu") return make_cpu_target();
#endif
  if (name == "cuda") {
#ifdef KILN_HAVE_CUDA_TARGET
    return make_cuda_target();
#else
    return unavailable_error(
        "target cuda: this build has no CUDA support; rebuild where the CUDA toolkit (nvcc) and "
        "cuDNN 9 are installed (cmake -DKILN_CUDA=ON)");
#endif
  }
  std::string known;
  for (const std::string& n : target_names()) known += (known.empty() ? "" : ", ") + n;
  return not_found_error(fmt::format("unknown target \"{}\"; this build has: {}", name, known));
}

int device_count(std::string_view name) {
#ifdef KILN_HAVE_CUDA_TARGET
  if (name == "cuda") return cuda_device_count();
#endif
  return name == "cuda" ? 0 : 1;
}

Result<int> use_device(std::string_view name, int device) {
#ifdef KILN_HAVE_CUDA_TARGET
  if (name == "cuda") return cuda_use_device(device);
#endif
  const int count = device_count(name);
  if (device < 0 || device >= count) {
    return invalid_argument_error(fmt::format("target {} has {} device{}; there is no device {}",
                                              name, count, count == 1 ? "" : "s", device));
  }
  return 0;
}

}  // namespace kiln::compiler
