// SPDX-License-Identifier: Apache-2.0
// Elementwise chains fused into one kernel: CUDA C generated from the ops' formulas, compiled to a
// CUBIN through NVRTC (dlopen'ed), cached on disk, loaded and launched through the CUDA runtime's
// library API. Plain C++: no CUDA headers needed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/targets/cuda/kernels/elementwise.h"
#include "compiler/targets/cuda/kernels/types.h"
#include "core/status.h"

namespace kiln::compiler::cuda {

// One operand of a chain op: input tensor `index`, the value of earlier op `index`, or a constant.
struct ChainOperand {
  enum class Kind : int32_t { kInput, kValue, kScalar };
  Kind kind = Kind::kInput;
  int index = 0;
  float scalar = 0.0f;

  static ChainOperand input(int i) { return {Kind::kInput, i, 0.0f}; }
  static ChainOperand value(int i) { return {Kind::kValue, i, 0.0f}; }
  static ChainOperand constant(float v) { return {Kind::kScalar, 0, v}; }
};

// A Unary (on `a`, with its alpha/beta) or a Binary (a op b) of the chain.
struct ChainOp {
  bool is_binary = false;
  Unary unary = Unary::kIdentity;
  Binary binary = Binary::kAdd;
  float alpha = 0.0f, beta = 0.0f;
  ChainOperand a, b;

  static ChainOp of(Unary op, ChainOperand x, float alpha = 0.0f, float beta = 0.0f) {
    return {false, op, Binary::kAdd, alpha, beta, x, {}};
  }
  static ChainOp of(Binary op, ChainOperand x, ChainOperand y) {
    return {true, Unary::kIdentity, op, 0.0f, 0.0f, x, y};
  }
};

// How a chain input is read at element i of the chain's row-major result: at i (empty `dims`), or
// at the sum over result dims d of index_d * strides[d] (0 where it broadcasts), for a broadcast or
// transposed input. Baked into the generated source.
struct TensorAccess {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
  bool contiguous() const { return dims.empty(); }
};

// `inputs` tensors of element type `elem` in (each read at `access[i]`; contiguous where `access`
// is shorter), the last op's value out (computed in f32).
struct ElementwiseChain {
  Elem elem = Elem::kF32;
  int inputs = 1;
  std::vector<ChainOp> ops;
  std::vector<TensorAccess> access;
  const TensorAccess& access_of(int input) const;
};

// Checks the chain (operand indices, at least one op) and returns the CUDA C source of two
// `extern "C" __global__` kernels, `name` (an element a thread) and `name`_v8 (8 elements a thread,
// for n % 8 == 0 and pointers aligned to 8 elements; only when every input is contiguous), each
// (in0, .., out, n). Self-contained: no #include, so NVRTC needs no include path.
Result<std::string> fused_elementwise_source(const ElementwiseChain& chain,
                                             const std::string& name);

// ---- pieces of generated kernels, shared by fused_rows.cc ----

// The element loads and stores (ld_f16, st_bf16, ..) and `T`, the element type.
std::string kernel_prelude(Elem elem);
// `__device__ float fn(float x0, .., float x<inputs-1>)`: the chain's last value, after checking
// it (as fused_elementwise_source).
Result<std::string> chain_function_source(const ElementwiseChain& chain, const std::string& fn);
// The expression of element `index`'s offset into an input read through `access`.
std::string access_offset(const TensorAccess& access, const std::string& index);
// The expressions loading `pointer`[`offset`] as f32, and converting f32 `value` to the element.
std::string load_code(Elem elem, const std::string& pointer, const std::string& offset);
std::string store_code(Elem elem, const std::string& value);

// The CUDA C expression of an op on float `x` (Unary, attributes `alpha`/`beta`) or `a`, `b`
// (Binary): the same formulas as kernels/elementwise.cu's apply_unary / apply_binary.
const char* unary_formula(Unary op);
const char* binary_formula(Binary op);

// NVRTC's version ("13.0"), or an error naming the library and what to install when it cannot be
// loaded.
Result<std::string> nvrtc_version();

struct CubinOptions {
  std::string arch = "sm_90";  // --gpu-architecture
  std::string cache_dir;       // empty: nvrtc_cache_dir()
  bool use_cache = true;
};
struct Cubin {
  std::vector<char> image;
  bool compiled = false;   // false: read from the disk cache
  std::string cache_path;  // the file it was read from or written to; empty when not cached
};

// cache_root()/nvrtc: $KILN_CACHE_DIR/nvrtc, else $XDG_CACHE_HOME/kiln/nvrtc, else
// ~/.cache/kiln/nvrtc.
std::string nvrtc_cache_dir();

// The CUBIN of `source` for `options.arch`: from the disk cache (key: hash of source, arch and
// NVRTC version) or compiled by NVRTC (-default-device, no fast math) and written there atomically.
// A corrupt or truncated cache file is recompiled and an unwritable cache dir compiles without
// caching, each with a warning logged. A failed compilation's error carries NVRTC's log.
Result<Cubin> compile_cubin(const std::string& source, const CubinOptions& options);

// "sm_<major><minor>" of the current CUDA device.
Result<std::string> current_device_arch();

// Kernels of a generated source, compiled (or read from the cache) for the current device and
// loaded into it (cudaLibraryLoadData).
class NvrtcModule {
 public:
  ~NvrtcModule();
  NvrtcModule(const NvrtcModule&) = delete;
  NvrtcModule& operator=(const NvrtcModule&) = delete;

  // `kernels` are the `extern "C"` names to look up; a missing one is an error.
  static Result<std::unique_ptr<NvrtcModule>> load(const std::string& source,
                                                   const std::vector<std::string>& kernels,
                                                   const std::string& cache_dir = {});
  // Queues kernel `k` on `stream` (a cudaStream_t) with grid.x `blocks`, block (`x`, `y`) and the
  // addresses of its arguments.
  Status launch(size_t k, int64_t blocks, int x, int y, void** args, void* stream) const;
  bool compiled() const { return compiled_; }

 private:
  NvrtcModule() = default;
  void* library_ = nullptr;     // cudaLibrary_t
  std::vector<void*> kernels_;  // cudaKernel_t
  bool compiled_ = false;
};

// A chain's kernels loaded into the current device.
class FusedElementwiseKernel {
 public:
  ~FusedElementwiseKernel();
  FusedElementwiseKernel(const FusedElementwiseKernel&) = delete;
  FusedElementwiseKernel& operator=(const FusedElementwiseKernel&) = delete;

  // Generates, compiles (or reads from the cache) and loads the chain's kernels for the current
  // device.
  static Result<std::unique_ptr<FusedElementwiseKernel>> create(const ElementwiseChain& chain,
                                                                const std::string& cache_dir = {});
  // Queues out[i] = chain(inputs[..][i]) for i < n on `stream` (a cudaStream_t).
  Status launch(const std::vector<const void*>& inputs, void* out, int64_t n, void* stream) const;
  bool compiled() const { return module_->compiled(); }

 private:
  FusedElementwiseKernel() = default;
  std::unique_ptr<NvrtcModule> module_;
  bool vec8_ = false;  // module_ has the 8-elements-a-thread kernel
  int inputs_ = 0;
  int element_bytes_ = 4;
};

}  // namespace kiln::compiler::cuda
