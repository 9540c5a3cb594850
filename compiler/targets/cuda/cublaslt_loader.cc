// SPDX-License-Identifier: Apache-2.0
// Definitions of the cublasLt* functions kiln calls, forwarding to libcublasLt.so through dlopen.
#include "compiler/targets/cuda/cublaslt_loader.h"

#include <cublasLt.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <string>

namespace kiln::compiler::cuda {
namespace {

constexpr const char* kLibrary = "libcublasLt.so." KILN_CUBLASLT_SOVERSION;

struct Library {
  void* handle = nullptr;
  std::string error;
};

const Library& library() {
  static const Library lib = [] {
    Library l;
    l.handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (l.handle == nullptr) {
      const char* reason = dlerror();
      l.error = reason != nullptr ? reason : "unknown loader error";
    }
    return l;
  }();
  return lib;
}

template <class Fn>
Fn symbol(const char* name) {
  const Library& lib = library();
  return lib.handle == nullptr ? nullptr : reinterpret_cast<Fn>(dlsym(lib.handle, name));
}

}  // namespace

Status load_cublaslt() {
  const Library& lib = library();
  if (lib.handle != nullptr) return Status();
  return unavailable_error(fmt::format(
      "target cuda: cannot load {} ({}); install the CUDA toolkit's cuBLAS or add its lib64 folder "
      "to LD_LIBRARY_PATH",
      kLibrary, lib.error));
}

}  // namespace kiln::compiler::cuda

// Each forwarder looks its symbol up once; a missing library or symbol reads as NOT_INITIALIZED.
#define KILN_CUBLASLT_FORWARD(name, params, args)                                \
  cublasStatus_t CUBLASWINAPI name params {                                      \
    static const auto fn = kiln::compiler::cuda::symbol<decltype(&name)>(#name); \
    return fn == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : fn args;              \
  }

KILN_CUBLASLT_FORWARD(cublasLtCreate, (cublasLtHandle_t * handle), (handle))
KILN_CUBLASLT_FORWARD(cublasLtDestroy, (cublasLtHandle_t handle), (handle))
KILN_CUBLASLT_FORWARD(cublasLtMatmul,
                      (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                       const void* a, cublasLtMatrixLayout_t a_desc, const void* b,
                       cublasLtMatrixLayout_t b_desc, const void* beta, const void* c,
                       cublasLtMatrixLayout_t c_desc, void* d, cublasLtMatrixLayout_t d_desc,
                       const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes,
                       cudaStream_t stream),
                      (handle, desc, alpha, a, a_desc, b, b_desc, beta, c, c_desc, d, d_desc, algo,
                       workspace, workspace_bytes, stream))
KILN_CUBLASLT_FORWARD(cublasLtMatmulAlgoGetHeuristic,
                      (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                       cublasLtMatrixLayout_t a_desc, cublasLtMatrixLayout_t b_desc,
                       cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
                       cublasLtMatmulPreference_t preference, int requested,
                       cublasLtMatmulHeuristicResult_t results[], int* returned),
                      (handle, desc, a_desc, b_desc, c_desc, d_desc, preference, requested, results,
                       returned))
KILN_CUBLASLT_FORWARD(cublasLtMatmulDescCreate,
                      (cublasLtMatmulDesc_t * desc, cublasComputeType_t compute,
                       cudaDataType_t scale),
                      (desc, compute, scale))
KILN_CUBLASLT_FORWARD(cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc), (desc))
KILN_CUBLASLT_FORWARD(cublasLtMatmulDescSetAttribute,
                      (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                       const void* buf, size_t size),
                      (desc, attr, buf, size))
KILN_CUBLASLT_FORWARD(cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * pref), (pref))
KILN_CUBLASLT_FORWARD(cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))
KILN_CUBLASLT_FORWARD(cublasLtMatmulPreferenceSetAttribute,
                      (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                       const void* buf, size_t size),
                      (pref, attr, buf, size))
KILN_CUBLASLT_FORWARD(cublasLtMatrixLayoutCreate,
                      (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows,
                       uint64_t cols, int64_t ld),
                      (layout, type, rows, cols, ld))
KILN_CUBLASLT_FORWARD(cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t layout), (layout))
KILN_CUBLASLT_FORWARD(cublasLtMatrixLayoutSetAttribute,
                      (cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                       const void* buf, size_t size),
                      (layout, attr, buf, size))
KILN_CUBLASLT_FORWARD(cublasLtMatmulAlgoCheck,
                      (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                       cublasLtMatrixLayout_t a_desc, cublasLtMatrixLayout_t b_desc,
                       cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
                       const cublasLtMatmulAlgo_t* algo, cublasLtMatmulHeuristicResult_t* result),
                      (handle, desc, a_desc, b_desc, c_desc, d_desc, algo, result))

// The version for the tuning fingerprint; 0 when the library is missing.
size_t CUBLASWINAPI cublasLtGetVersion() {
  static const auto fn =
      kiln::compiler::cuda::symbol<decltype(&cublasLtGetVersion)>("cublasLtGetVersion");
  return fn == nullptr ? 0 : fn();
}
