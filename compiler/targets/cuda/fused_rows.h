// SPDX-License-Identifier: Apache-2.0
// Row kernels (LayerNorm, Softmax, LogSoftmax, trailing-axis ReduceSum/Mean/Max) generated with an
// elementwise prologue chain computed as the row is read and an epilogue chain on the results,
// compiled through NVRTC like the fused elementwise chains (fused_elementwise.h). Plain C++.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/targets/cuda/fused_elementwise.h"
#include "core/status.h"

namespace kiln::compiler::cuda {

enum class RowOp : int32_t {
  kLayerNorm,
  kSoftmax,
  kLogSoftmax,
  kReduceSum,
  kReduceMean,
  kReduceMax
};

// "LayerNormalization", "Softmax", .. (the ONNX op's name).
const char* row_op_name(RowOp op);
// Whether the op writes one value a row (the reductions) instead of a row.
bool row_op_reduces(RowOp op);

// One generated kernel: x = prologue(inputs) over `rows` rows of `cols`, y = op(x) a row (with
// `epsilon` and f32 scale/bias for LayerNorm), out = epilogue(y, its other inputs).
struct RowKernelSpec {
  RowOp op = RowOp::kSoftmax;
  Elem elem = Elem::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  float epsilon = 1e-5f;
  bool has_bias = false;  // LayerNorm: a bias after the scale
  // Over [rows, cols], inputs read through its access; no ops: input 0 as it is.
  ElementwiseChain prologue;
  // Also store the prologue's value (contiguous [rows, cols]): a second output.
  bool write_prologue = false;
  // Over the output ([rows, cols], or [rows] for a reduction): input 0 is op's result (not read
  // from memory), inputs 1.. read through their access; no ops: op's result as it is.
  ElementwiseChain epilogue;
};

// The widest row the generated kernels hold (in registers, 32 elements a thread at most).
constexpr int64_t kMaxGeneratedRow = 32768;

// Whether a chain input read through `access` (over [rows, cols]) is contiguous along each row,
// with each row's start a multiple of 8 elements (a contiguous input, a bias [cols] broadcast over
// the rows).
bool row_access_vectorizes(const TensorAccess& access, int64_t cols);
// Whether the kernel gets a vectorized variant: cols % 8 == 0 and every input and output read or
// written along the rows does so contiguously (row_access_vectorizes).
bool row_kernel_vectorizes(const RowKernelSpec& spec);

// Checks the spec and returns the source of `extern "C" __global__` kernel `name` (an element a
// thread at a time, columns j = lane + k * threads) and, where row_kernel_vectorizes, `name`_v8
// (16-byte chunks of 8 elements, chunk c = lane + k * threads; every pointer 16-byte aligned), each
// taking, in this order: the prologue's inputs, for LayerNorm scale and bias (const float*, bias
// may be null), out, with write_prologue the prologue's output, then epilogue inputs 1.. (T*, const
// T*). Rows and columns are baked in; see row_launch_shape for its launch.
Result<std::string> fused_row_source(const RowKernelSpec& spec, const std::string& name);

struct RowLaunch {
  int64_t blocks = 0;
  int threads_x = 32;  // threads a row
  int threads_y = 1;   // rows a block
};
RowLaunch row_launch_shape(const RowKernelSpec& spec);

// A generated row kernel loaded into the current device.
class FusedRowKernel {
 public:
  // Generates, compiles (or reads from the cache) and loads the kernel for the current device.
  static Result<std::unique_ptr<FusedRowKernel>> create(const RowKernelSpec& spec,
                                                        const std::string& cache_dir = {});
  // Queues the kernel on `stream` (a cudaStream_t); `pointers` in fused_row_source's order.
  Status launch(const std::vector<const void*>& pointers, void* stream) const;
  bool compiled() const { return module_->compiled(); }

 private:
  FusedRowKernel() = default;
  std::unique_ptr<NvrtcModule> module_;
  RowLaunch shape_;
  bool vec8_ = false;         // module_ has the 8-elements-a-chunk kernel
  std::vector<bool> packed_;  // a pointer each: read or written in 16-byte packs by that kernel
};

}  // namespace kiln::compiler::cuda
