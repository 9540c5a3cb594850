// SPDX-License-Identifier: Apache-2.0
// Generated row kernels: one warp a row up to 1,024 columns (four rows a block), up to 32 warps a
// row beyond, the row in registers, as kernels/rows.cu's layernorm/softmax warp kernels; f32
// arithmetic on f32, f16 or bf16 storage.
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
  std::string src = R"(#define NEG_INF __int_as_float(0xff800000)
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

bool row_access_vectorizes(const TensorAccess& access, int64_t cols) {
  if (access.contiguous()) return true;
  size_t d = access.dims.size();
  int64_t inner = 1;
  while (inner < cols && d > 0) {
    --d;
    if (access.dims[d] != 1 && access.strides[d] != inner) return false;
    inner *= access.dims[d];
  }
  if (inner != cols) return false;
  // The row's first element is a multiple of 8 elements in: 16-byte aligned with the pointer.
  for (size_t k = 0; k < d; ++k) {
    if (access.dims[k] != 1 && access.strides[k] % 8 != 0) return false;
  }
  return true;
}

bool row_kernel_vectorizes(const RowKernelSpec& spec) {
  if (spec.cols % 8 != 0) return false;
  for (int i = 0; i < spec.prologue.inputs; ++i) {
    if (!row_access_vectorizes(spec.prologue.access_of(i), spec.cols)) return false;
  }
  if (row_op_reduces(spec.op)) return true;  // one value a row out: the epilogue stays scalar
  for (int i = 1; i < spec.epilogue.inputs; ++i) {
    if (!row_access_vectorizes(spec.epilogue.access_of(i), spec.cols)) return false;
  }
  return true;
}

namespace {

// The body of kernel `name` (see fused_row_source), scalar (an element at a time, column
// j = lane + k * threads) or vectorized (8-element chunks c = lane + k * threads, 16-byte loads
// and stores; only where row_kernel_vectorizes and the pointers are aligned).
std::string row_kernel(const RowKernelSpec& spec, const ElementwiseChain& prologue,
                       const ElementwiseChain& epilogue, const std::string& name,
                       const std::string& params, bool vec) {
  const RowLaunch shape = row_launch_shape(spec);
  const int64_t tpr = shape.threads_x;
  const int64_t units = vec ? spec.cols / 8 : spec.cols;  // per row
  const int64_t per = (units + tpr - 1) / tpr;            // units a thread
  const int64_t width = vec ? 8 : 1;
  const bool layernorm = spec.op == RowOp::kLayerNorm;

  // A loop over the thread's elements k of the row, column j; `body` where j is in the row.
  auto each = [&](const std::string& body, const std::string& outside = {}) {
    std::string s;
    if (vec) {
      s = fmt::format(
          "#pragma unroll\n  for (int c = 0; c < {}; ++c) {{\n"
          "    const int ch = threadIdx.x + c * {};\n"
          "#pragma unroll\n    for (int e = 0; e < 8; ++e) {{\n"
          "      const int k = c * 8 + e, j = ch * 8 + e;\n      (void)j;\n"
          "      if (ch < {}) {{\n      {}\n      }}",
          per, tpr, units, body);
      if (!outside.empty()) s += fmt::format(" else {{\n      {}\n      }}", outside);
      return s + "\n    }\n  }\n";
    }
    s = fmt::format(
        "#pragma unroll\n  for (int k = 0; k < {}; ++k) {{\n    const int j = threadIdx.x + k * "
        "{};\n    if (j < {}) {{\n      {}\n    }}",
        per, tpr, spec.cols, body);
    if (!outside.empty()) s += fmt::format(" else {{\n      {}\n    }}", outside);
    return s + "\n  }\n";
  };
  // A loop over the thread's chunks (vec) or elements: `head` once a chunk at i0 (its first
  // element's index into the row-major [rows, cols]), `body` on each of its elements (e, k, j, i),
  // `tail` after them.
  auto chunks = [&](const std::string& head, const std::string& body, const std::string& tail) {
    if (!vec) {
      return each(fmt::format("const long long i = row * {}LL + j;\n      {}{}{}", spec.cols, head,
                              body, tail));
    }
    return fmt::format(
        "#pragma unroll\n  for (int c = 0; c < {}; ++c) {{\n"
        "    const int ch = threadIdx.x + c * {};\n    if (ch < {}) {{\n"
        "      const long long i0 = row * {}LL + ch * 8;\n      {}\n"
        "#pragma unroll\n      for (int e = 0; e < 8; ++e) {{\n"
        "        const int k = c * 8 + e, j = ch * 8 + e;\n        (void)j;\n        {}\n      }}\n"
        "      {}\n    }}\n  }}\n",
        per, tpr, units, spec.cols, head, body, tail);
  };
  // Element `e` of input `pointer` read through `access` (vec: from the chunk loaded as `pack`).
  auto element = [&](Elem elem, const std::string& pointer, const TensorAccess& access,
                     const std::string& pack) {
    if (vec) return load_code(elem, pack + ".v", "e");
    return load_code(elem, pointer, access_offset(access, "i"));
  };
  auto pack_load = [&](const std::string& pack, const std::string& pointer,
                       const TensorAccess& access) {
    return fmt::format("const P8 {} = *reinterpret_cast<const P8*>({} + {});\n      ", pack,
                       pointer, access_offset(access, "i0"));
  };
  // The epilogue on result `y` at output element `at`, its inputs read there.
  auto epilogue_of = [&](const std::string& at, const std::string& y) {
    // The row op's result rounded to the element type first, as a separate op would store it.
    std::string args = "rnd(" + y + ")";
    for (int i = 1; i < epilogue.inputs; ++i) {
      args += ", " + (vec && at != "row"
                          ? element(spec.elem, "", epilogue.access_of(i), fmt::format("q{}", i))
                          : load_code(spec.elem, fmt::format("e{}", i),
                                      access_offset(epilogue.access_of(i), at)));
    }
    return store_code(spec.elem, "epilogue(" + args + ")");
  };
  // Writes row values `y` (an expression of k, j) through the epilogue.
  auto write_row = [&](const std::string& y) {
    if (!vec) return chunks("", "out[i] = " + epilogue_of("i", y) + ";", "");
    std::string head;
    for (int i = 1; i < epilogue.inputs; ++i) {
      head += pack_load(fmt::format("q{}", i), fmt::format("e{}", i), epilogue.access_of(i));
    }
    if (layernorm) {
      head += "const F8 sc = *reinterpret_cast<const F8*>(scale + ch * 8);\n      ";
      if (spec.has_bias)
        head += "const F8 bi = *reinterpret_cast<const F8*>(bias + ch * 8);\n      ";
    }
    head += "P8 o;";
    return chunks(head, "o.v[e] = " + epilogue_of("i", y) + ";",
                  "*reinterpret_cast<P8*>(out + i0) = o;");
  };

  std::string src = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n"
      "  const long long row = blockIdx.x * {}LL + threadIdx.y;\n"
      "  if (row >= {}LL) return;\n  float v[{}];\n",
      tpr * shape.threads_y, name, params, shape.threads_y, spec.rows, per * width);
  // Read the row through the prologue (storing its value when asked).
  std::string head, loads;
  for (int i = 0; i < prologue.inputs; ++i) {
    const std::string in = fmt::format("in{}", i);
    if (vec) head += pack_load(fmt::format("p{}", i), in, prologue.access_of(i));
    loads +=
        (i > 0 ? ", " : "") + element(spec.elem, in, prologue.access_of(i), fmt::format("p{}", i));
  }
  std::string body = fmt::format("v[k] = prologue({});", loads);
  std::string tail;
  if (spec.write_prologue) {
    if (vec) {
      head += "P8 m;";
      body += " m.v[e] = " + store_code(spec.elem, "v[k]") + ";";
      tail = "*reinterpret_cast<P8*>(mid + i0) = m;";
    } else {
      body += "\n      mid[i] = " + store_code(spec.elem, "v[k]") + ";";
    }
  }
  const bool max_pad =
      spec.op == RowOp::kSoftmax || spec.op == RowOp::kLogSoftmax || spec.op == RowOp::kReduceMax;
  // Elements past the row (in a thread's last unit) hold the reductions' identity.
  src += fmt::format("#pragma unroll\n  for (int k = 0; k < {}; ++k) v[k] = {};\n  ", per * width,
                     max_pad ? "NEG_INF" : "0.0f");
  src += chunks(head, body, tail);
  const std::string cols_f = fmt::format("(float){}", spec.cols);

  switch (spec.op) {
    case RowOp::kLayerNorm:
      src += "  float s = 0.0f;\n  " + each("s += v[k];");
      src += fmt::format("  const float mean = row_sum(s) / {};\n  float q = 0.0f;\n  ", cols_f);
      src += each("const float d = v[k] - mean;\n      q += d * d;");
      src +=
          fmt::format("  const float inv = rsqrtf(row_sum(q) / {} + __int_as_float(0x{:08x}));\n  ",
                      cols_f, std::bit_cast<uint32_t>(spec.epsilon));
      src += write_row(std::string("(v[k] - mean) * inv * ") + (vec ? "sc.v[e]" : "scale[j]") +
                       (spec.has_bias ? (vec ? " + bi.v[e]" : " + bias[j]") : ""));
      break;
    case RowOp::kSoftmax:
    case RowOp::kLogSoftmax: {
      const bool log = spec.op == RowOp::kLogSoftmax;
      src += "  float m = NEG_INF;\n  " + each("m = fmaxf(m, v[k]);");
      src += "  m = row_max(m);\n  float s = 0.0f;\n  ";
      src += each(log ? "s += expf(v[k] - m);" : "v[k] = expf(v[k] - m);\n      s += v[k];");
      src += log ? "  const float ls = logf(row_sum(s));\n  " : "  s = row_sum(s);\n  ";
      src += write_row(log ? "v[k] - m - ls" : "v[k] / s");
      break;
    }
    case RowOp::kReduceSum:
    case RowOp::kReduceMean:
    case RowOp::kReduceMax: {
      const bool max = spec.op == RowOp::kReduceMax;
      src += fmt::format("  float r = {};\n  ", max ? "NEG_INF" : "0.0f");
      src += each(max ? "r = fmaxf(r, v[k]);" : "r += v[k];");
      src += max ? "  r = row_max(r);\n" : "  r = row_sum(r);\n";
      if (spec.op == RowOp::kReduceMean) src += fmt::format("  r = r / {};\n", cols_f);
      src += "  if (threadIdx.x == 0) out[row] = " + epilogue_of("row", "r") + ";\n";
      break;
    }
  }
  return src + "}\n";
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
  std::string params;
  for (int i = 0; i < prologue.inputs; ++i)
    params += fmt::format("const T* __restrict__ in{}, ", i);
  if (spec.op == RowOp::kLayerNorm) {
    params += "const float* __restrict__ scale, const float* __restrict__ bias, ";
  }
  params += "T* __restrict__ out";
  if (spec.write_prologue) params += ", T* __restrict__ mid";
  for (int i = 1; i < epilogue.inputs; ++i) params += fmt::format(", const T* __restrict__ e{}", i);

  std::string src = kernel_prelude(spec.elem);
  src += row_reductions(row_launch_shape(spec).threads_x / 32);
  KILN_ASSIGN_OR_RETURN(std::string pro, chain_function_source(prologue, "prologue"));
  KILN_ASSIGN_OR_RETURN(std::string epi, chain_function_source(epilogue, "epilogue"));
  src += pro + epi;
  src += row_kernel(spec, prologue, epilogue, name, params, false);
  if (row_kernel_vectorizes(spec)) {
    // 16-byte aligned packs of 8 elements (two 16-byte loads for f32).
    src += "struct __align__(16) P8 { T v[8]; };\nstruct __align__(16) F8 { float v[8]; };\n";
    src += row_kernel(spec, prologue, epilogue, name + "_v8", params, true);
  }
  return src;
}

Result<std::unique_ptr<FusedRowKernel>> FusedRowKernel::create(const RowKernelSpec& spec,
                                                               const std::string& cache_dir) {
  const std::string name = "kiln_fused_row";
  KILN_ASSIGN_OR_RETURN(const std::string source, fused_row_source(spec, name));
  std::unique_ptr<FusedRowKernel> k(new FusedRowKernel());
  std::vector<std::string> names = {name};
  k->vec8_ = row_kernel_vectorizes(spec);
  if (k->vec8_) names.push_back(name + "_v8");
  KILN_ASSIGN_OR_RETURN(k->module_, NvrtcModule::load(source, names, cache_dir));
  k->shape_ = row_launch_shape(spec);
  // The pointers the vectorized kernel reads or writes in 16-byte packs: all but a reduction's
  // out and epilogue inputs.
  const bool reduces = row_op_reduces(spec.op);
  k->packed_.assign(static_cast<size_t>(std::max(spec.prologue.inputs, 1)), true);
  if (spec.op == RowOp::kLayerNorm) k->packed_.insert(k->packed_.end(), {true, true});
  k->packed_.push_back(!reduces);
  if (spec.write_prologue) k->packed_.push_back(true);
  k->packed_.resize(k->packed_.size() + static_cast<size_t>(std::max(spec.epilogue.inputs, 1) - 1),
                    !reduces);
  return k;
}

Status FusedRowKernel::launch(const std::vector<const void*>& pointers, void* stream) const {
  if (pointers.size() != packed_.size()) {
    return invalid_argument_error(
        fmt::format("fused row kernel: {} pointers given, the kernel takes {}", pointers.size(),
                    packed_.size()));
  }
  // The vectorized kernel where every packed pointer is 16-byte aligned (the arena aligns buffers
  // to 64 bytes; views into them may not be).
  bool vec = vec8_;
  for (size_t i = 0; i < pointers.size(); ++i) {
    vec = vec && (!packed_[i] || reinterpret_cast<uintptr_t>(pointers[i]) % 16 == 0);
  }
  std::vector<const void*> values = pointers;
  std::vector<void*> args;
  for (const void*& p : values) args.push_back(static_cast<void*>(&p));
  return module_->launch(vec ? 1 : 0, shape_.blocks, shape_.threads_x, shape_.threads_y,
                         args.data(), stream);
}

}  // namespace kiln::compiler::cuda
