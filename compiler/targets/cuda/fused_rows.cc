// SPDX-License-Identifier: Apache-2.0
// Generated row kernels: one warp a row up to 1,024 columns (four rows a block), up to 32 warps a
// row beyond, the row in registers, as kernels.cu's layernorm/softmax warp kernels; f32 arithmetic
// on f32, f16 or bf16 storage.
#include "compiler/targets/cuda/fused_rows.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

namespace kiln::compiler::cuda {

const char* row_op_name(RowOp op) {
  switch (op) {
    case RowOp::kLayerNorm: return "LayerNormalization";
    case RowOp::kSoftmax: return "Softmax";
    case RowOp::kLogSoftmax: return "LogSoftmax";
    case RowOp::kReduceSum: return "ReduceSum";
    case RowOp::kReduceMean: return "ReduceMean";
    case RowOp::kReduceMax: return "ReduceMax";
  }
  return "?";
}

bool row_op_reduces(RowOp op) {
  return op == RowOp::kReduceSum || op == RowOp::kReduceMean || op == RowOp::kReduceMax;
}

RowLaunch row_launch_shape(const RowKernelSpec& spec) {
  RowLaunch l;
  if (spec.cols <= 1024) {
    l.threads_y = 4;
    l.blocks = (spec.rows + l.threads_y - 1) / l.threads_y;
  } else {
    l.threads_x = 32 * static_cast<int>(std::min<int64_t>(32, (spec.cols + 511) / 512));
    l.blocks = spec.rows;
  }
  return l;
}

namespace {

// The chain, or the identity of input 0 when it has no ops.
ElementwiseChain or_identity(const ElementwiseChain& chain) {
  ElementwiseChain c = chain;
  if (c.ops.empty()) c.ops.push_back(ChainOp::of(Unary::kIdentity, ChainOperand::input(0)));
  return c;
}

// Sum and max over a row's threads: warp shuffles, then across the row's `warps` through shared
// memory.
std::string row_reductions(int warps) {
  std::string src = R"(#define NEG_MAX __int_as_float(0xff7fffff)
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
)";
  for (const char* kind : {"sum", "max"}) {
    const bool max = kind[0] == 'm';
    src += fmt::format("__device__ __forceinline__ float row_{}(float v) {{\n  v = warp_{}(v);\n",
                       kind, kind);
    if (warps > 1) {
      src += fmt::format(
          "  __shared__ float part[{}];\n"
          "  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;\n"
          "  __syncthreads();\n  v = part[0];\n"
          "  for (int w = 1; w < {}; ++w) v = {};\n  __syncthreads();\n",
          warps, warps, max ? "fmaxf(v, part[w])" : "v + part[w]");
    }
    src += "  return v;\n}\n";
  }
  return src;
}

}  // namespace

Result<std::string> fused_row_source(const RowKernelSpec& spec, const std::string& name) {
  if (spec.rows <= 0 || spec.cols <= 0 || spec.cols > kMaxGeneratedRow) {
    return invalid_argument_error(fmt::format(
        "fused {} kernel: {} rows of {} columns (rows must be positive, columns 1 to {})",
        row_op_name(spec.op), spec.rows, spec.cols, kMaxGeneratedRow));
  }
  if (spec.prologue.elem != spec.elem || spec.epilogue.elem != spec.elem ||
      spec.prologue.inputs < 1 || spec.epilogue.inputs < 1) {
    return invalid_argument_error(fmt::format(
        "fused {} kernel: the prologue and epilogue need the kernel's element type and an input",
        row_op_name(spec.op)));
  }
  const ElementwiseChain prologue = or_identity(spec.prologue);
  const ElementwiseChain epilogue = or_identity(spec.epilogue);
  const RowLaunch shape = row_launch_shape(spec);
  const int64_t tpr = shape.threads_x;
  const int64_t per = (spec.cols + tpr - 1) / tpr;
  const bool layernorm = spec.op == RowOp::kLayerNorm;

  std::string params;
  for (int i = 0; i < prologue.inputs; ++i)
    params += fmt::format("const T* __restrict__ in{}, ", i);
  if (layernorm) params += "const float* __restrict__ scale, const float* __restrict__ bias, ";
  params += "T* __restrict__ out";
  if (spec.write_prologue) params += ", T* __restrict__ mid";
  for (int i = 1; i < epilogue.inputs; ++i) params += fmt::format(", const T* __restrict__ e{}", i);

  // The epilogue on result `y`, its inputs read at element `at` of the output.
  auto store_result = [&](const std::string& at, const std::string& y) {
    std::string args = y;
    for (int i = 1; i < epilogue.inputs; ++i) {
      args += ", " +
              load_code(spec.elem, fmt::format("e{}", i), access_offset(epilogue.access_of(i), at));
    }
    return fmt::format("out[{}] = {};", at, store_code(spec.elem, "epilogue(" + args + ")"));
  };
  // A loop over the thread's elements k of the row, column j; `body` where j is in the row.
  auto each = [&](const std::string& body, const std::string& outside = {}) {
    std::string s = fmt::format(
        "#pragma unroll\n  for (int k = 0; k < {}; ++k) {{\n    const int j = threadIdx.x + k * "
        "{};\n    if (j < {}) {{\n      {}\n    }}",
        per, tpr, spec.cols, body);
    if (!outside.empty()) s += fmt::format(" else {{\n      {}\n    }}", outside);
    return s + "\n  }\n";
  };
  const std::string cols_f = fmt::format("(float){}", spec.cols);

  std::string src = kernel_prelude(spec.elem);
  src += row_reductions(static_cast<int>(tpr / 32));
  KILN_ASSIGN_OR_RETURN(std::string pro, chain_function_source(prologue, "prologue"));
  KILN_ASSIGN_OR_RETURN(std::string epi, chain_function_source(epilogue, "epilogue"));
  src += pro + epi;
  src += fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n"
      "  const long long row = blockIdx.x * {}LL + threadIdx.y;\n"
      "  if (row >= {}LL) return;\n  float v[{}];\n",
      tpr * shape.threads_y, name, params, shape.threads_y, spec.rows, per);
  // Read the row through the prologue (storing its value when asked).
  std::string loads;
  for (int i = 0; i < prologue.inputs; ++i) {
    loads += (i > 0 ? ", " : "") + load_code(spec.elem, fmt::format("in{}", i),
                                             access_offset(prologue.access_of(i), "i"));
  }
  std::string read = fmt::format("const long long i = row * {}LL + j;\n      v[k] = prologue({});",
                                 spec.cols, loads);
  if (spec.write_prologue) read += "\n      mid[i] = " + store_code(spec.elem, "v[k]") + ";";
  const bool max_pad =
      spec.op == RowOp::kSoftmax || spec.op == RowOp::kLogSoftmax || spec.op == RowOp::kReduceMax;
  src += "  " + each(read, max_pad ? "v[k] = NEG_MAX;" : "v[k] = 0.0f;");
  const std::string write_row =
      fmt::format("const long long i = row * {}LL + j;\n      ", spec.cols);

  switch (spec.op) {
    case RowOp::kLayerNorm:
      src += "  float s = 0.0f;\n  " + each("s += v[k];");
      src += fmt::format("  const float mean = row_sum(s) / {};\n  float q = 0.0f;\n  ", cols_f);
      src += each("const float d = v[k] - mean;\n      q += d * d;");
      src +=
          fmt::format("  const float inv = rsqrtf(row_sum(q) / {} + __int_as_float(0x{:08x}));\n  ",
                      cols_f, std::bit_cast<uint32_t>(spec.epsilon));
      src += each(write_row + "const float y = (v[k] - mean) * inv * scale[j]" +
                  (spec.has_bias ? " + bias[j]" : "") + ";\n      " + store_result("i", "y"));
      break;
    case RowOp::kSoftmax:
    case RowOp::kLogSoftmax: {
      const bool log = spec.op == RowOp::kLogSoftmax;
      src += "  float m = NEG_MAX;\n  " + each("m = fmaxf(m, v[k]);");
      src += "  m = row_max(m);\n  float s = 0.0f;\n  ";
      src += each(log ? "s += expf(v[k] - m);" : "v[k] = expf(v[k] - m);\n      s += v[k];");
      src += log ? "  const float ls = logf(row_sum(s));\n  " : "  s = row_sum(s);\n  ";
      src += each(write_row + store_result("i", log ? "v[k] - m - ls" : "v[k] / s"));
      break;
    }
    case RowOp::kReduceSum:
    case RowOp::kReduceMean:
    case RowOp::kReduceMax: {
      const bool max = spec.op == RowOp::kReduceMax;
      src += fmt::format("  float r = {};\n  ", max ? "NEG_MAX" : "0.0f");
      src += each(max ? "r = fmaxf(r, v[k]);" : "r += v[k];");
      src += max ? "  r = row_max(r);\n" : "  r = row_sum(r);\n";
      if (spec.op == RowOp::kReduceMean) src += fmt::format("  r = r / {};\n", cols_f);
      src += "  if (threadIdx.x == 0) " + store_result("row", "r") + "\n";
      break;
    }
  }
  src += "}\n";
  return src;
}

Result<std::unique_ptr<FusedRowKernel>> FusedRowKernel::create(const RowKernelSpec& spec,
                                                               const std::string& cache_dir) {
  const std::string name = "kiln_fused_row";
  KILN_ASSIGN_OR_RETURN(const std::string source, fused_row_source(spec, name));
  std::unique_ptr<FusedRowKernel> k(new FusedRowKernel());
  KILN_ASSIGN_OR_RETURN(k->module_, NvrtcModule::load(source, {name}, cache_dir));
  k->shape_ = row_launch_shape(spec);
  k->pointers_ = static_cast<size_t>(std::max(spec.prologue.inputs, 1)) +
                 (spec.op == RowOp::kLayerNorm ? 2 : 0) + 1 + (spec.write_prologue ? 1 : 0) +
                 static_cast<size_t>(std::max(spec.epilogue.inputs, 1) - 1);
  return k;
}

Status FusedRowKernel::launch(const std::vector<const void*>& pointers, void* stream) const {
  if (pointers.size() != pointers_) {
    return invalid_argument_error(fmt::format(
        "fused row kernel: {} pointers given, the kernel takes {}", pointers.size(), pointers_));
  }
  std::vector<const void*> values = pointers;
  std::vector<void*> args;
  for (const void*& p : values) args.push_back(static_cast<void*>(&p));
  return module_->launch(0, shape_.blocks, shape_.threads_x, shape_.threads_y, args.data(), stream);
}

}  // namespace kiln::compiler::cuda
