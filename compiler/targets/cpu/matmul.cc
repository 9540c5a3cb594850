// SPDX-License-Identifier: Apache-2.0
// MatMul and Gemm on oneDNN's matmul: constant weights (and Gemm's scaled C) are packed at
// compile time; transposed operands are read through strides; Gemm's C is the primitive's bias.
#include "compiler/ops/linalg.h"
#include "compiler/targets/cpu/dnnl_kernel.h"

namespace kiln::compiler::cpu {

namespace {

using dnnl::memory;

// How a matmul reads the node's tensors: user layouts of A, B, C and Y over the runtime data, and
// the compile-time copies that replace B and C when they are constants.
struct MatmulOperands {
  memory::desc src;
  memory::desc weights;
  memory::desc bias;  // zero desc: no bias
  memory::desc dst;
  const Tensor* weights_const = nullptr;
  const Tensor* bias_const = nullptr;
};

class MatmulKernel final : public DnnlKernel {
 public:
  MatmulKernel(dnnl::engine engine, StaticShapes shapes, dnnl::matmul::primitive_desc pd,
               MatmulOperands operands, std::optional<memory> packed_weights,
               std::optional<memory> packed_bias)
      : DnnlKernel(std::move(engine), std::move(shapes)),
        pd_(std::move(pd)),
        matmul_(pd_),
        operands_(std::move(operands)),
        packed_weights_(std::move(packed_weights)),
        packed_bias_(std::move(packed_bias)) {}

 private:
  void execute(ref::KernelContext& ctx, dnnl::stream& stream) const override {
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, wrap(operands_.src, ctx.input(0))},
        {DNNL_ARG_DST, wrap(operands_.dst, ctx.output(0))},
        {DNNL_ARG_SCRATCHPAD, scratchpad(pd_)},
    };
    args[DNNL_ARG_WEIGHTS] =
        packed_weights_ ? *packed_weights_ : wrap(operands_.weights, ctx.input(1));
    if (packed_bias_) {
      args[DNNL_ARG_BIAS] = *packed_bias_;
    } else if (operands_.bias.get_size() > 0) {
      args[DNNL_ARG_BIAS] = wrap(operands_.bias, ctx.input(2));
    }
    matmul_.execute(stream, args);
  }

  dnnl::matmul::primitive_desc pd_;
  dnnl::matmul matmul_;
  MatmulOperands operands_;
  std::optional<memory> packed_weights_;
  std::optional<memory> packed_bias_;
};

std::unique_ptr<ref::NodeKernel> build(const dnnl::engine& engine, StaticShapes shapes,
                                       MatmulOperands operands) {
  memory::desc weights = operands.weights;
  if (operands.weights_const != nullptr) {
    weights = memory::desc(operands.weights.dims(), operands.weights.data_type(),
                           memory::format_tag::any);
  }
  dnnl::matmul::desc desc(operands.src, weights, operands.bias, operands.dst);
  dnnl::matmul::primitive_desc pd(desc, scratchpad_attr(), engine);
  std::optional<memory> packed_weights;
  std::optional<memory> packed_bias;
  if (operands.weights_const != nullptr) {
    packed_weights =
        pack(engine, operands.weights, operands.weights_const->raw_data(), pd.weights_desc());
  }
  if (operands.bias_const != nullptr) {
    packed_bias = pack(engine, operands.bias, operands.bias_const->raw_data(), operands.bias);
  }
  return std::make_unique<MatmulKernel>(engine, std::move(shapes), std::move(pd),
                                        std::move(operands), std::move(packed_weights),
                                        std::move(packed_bias));
}

// Leading 1s up to `rank`.
memory::dims padded(const Shape& s, int rank) {
  memory::dims dims(static_cast<size_t>(rank - s.rank()), 1);
  for (int i = 0; i < s.rank(); ++i) dims.push_back(s[i]);
  return dims;
}

// f32, or bf16 (oneDNN's bf16 kernels: a bf16 attention's activation x activation products).
std::unique_ptr<ref::NodeKernel> build_matmul(const Node& node, const dnnl::engine& engine) {
  std::optional<StaticShapes> shapes = static_float_shapes(node);
  if (!shapes || node.num_inputs() != 2) return nullptr;
  const Shape& a = *shapes->inputs[0];
  const Shape& b = *shapes->inputs[1];
  const Shape& y = shapes->output;
  if (a.rank() < 2 || b.rank() < 2 || y.rank() != std::max(a.rank(), b.rank())) return nullptr;
  MatmulOperands operands;
  operands.weights_const = node.input(1)->constant_value();
  const int64_t k = a[a.rank() - 1];
  const int64_t n = b[b.rank() - 1];
  if (b.rank() == 2) {
    // [..., M, K] x [K, N]: one [M', K] x [K, N] product over the flattened leading dims.
    const int64_t m = k == 0 ? 0 : a.numel() / k;
    operands.src = plain_desc(memory::dims{m, k}, shapes->dtype);
    operands.weights = plain_desc(memory::dims{k, n}, shapes->dtype);
    operands.dst = plain_desc(memory::dims{m, n}, shapes->dtype);
  } else {
    operands.src = plain_desc(padded(a, y.rank()), shapes->dtype);
    operands.weights = plain_desc(padded(b, y.rank()), shapes->dtype);
    operands.dst = plain_desc(y, shapes->dtype);
  }
  return build(engine, std::move(*shapes), std::move(operands));
}

// A copy of constant `t` with every element multiplied by `scale`.
Tensor scaled(const Tensor& t, float scale) {
  Tensor out = t.clone();
  for (float& v : out.span<float>()) v *= scale;
  return out;
}

// Scaled copies of a constant B or C (alpha, beta != 1) live until build() has packed them.
std::unique_ptr<ref::NodeKernel> build_gemm(const Node& node, const dnnl::engine& engine) {
  const auto& op = node.attrs<ops::Gemm>();
  std::optional<StaticShapes> shapes = static_f32_shapes(node);
  if (!shapes || node.num_inputs() < 2) return nullptr;
  const Shape& a = *shapes->inputs[0];
  const Shape& b = *shapes->inputs[1];
  const Shape& y = shapes->output;
  if (a.rank() != 2 || b.rank() != 2 || y.rank() != 2) return nullptr;
  const int64_t m = y[0];
  const int64_t n = y[1];
  const int64_t k = op.transA ? a[0] : a[1];
  MatmulOperands operands;
  operands.src = memory::desc({m, k}, memory::data_type::f32,
                              op.transA ? memory::dims{1, m} : memory::dims{k, 1});
  operands.weights = memory::desc({k, n}, memory::data_type::f32,
                                  op.transB ? memory::dims{1, k} : memory::dims{n, 1});
  operands.dst = plain_desc(y);

  Tensor b_scaled;
  const Tensor* b_const = node.input(1)->constant_value();
  if (op.alpha != 1.0f) {
    if (b_const == nullptr) return nullptr;
    b_scaled = scaled(*b_const, op.alpha);
    b_const = &b_scaled;
  }
  operands.weights_const = b_const;

  Tensor c_scaled;
  if (node.has_input(2) && op.beta != 0.0f) {
    const Shape& c = *shapes->inputs[2];
    if (c.rank() > 2) return nullptr;
    memory::dims c_dims = padded(c, 2);
    if ((c_dims[0] != 1 && c_dims[0] != m) || (c_dims[1] != 1 && c_dims[1] != n)) return nullptr;
    operands.bias = plain_desc(c_dims);
    const Tensor* c_const = node.input(2)->constant_value();
    if (op.beta != 1.0f) {
      if (c_const == nullptr) return nullptr;
      c_scaled = scaled(*c_const, op.beta);
      c_const = &c_scaled;
    }
    operands.bias_const = c_const;
  }
  return build(engine, std::move(*shapes), std::move(operands));
}

}  // namespace

std::unique_ptr<ref::NodeKernel> make_matmul_kernel(const Node& node, const dnnl::engine& engine) {
  try {
    return build_matmul(node, engine);
  } catch (const dnnl::error&) {
    return nullptr;  // a combination oneDNN does not implement: the ref kernel runs it
  }
}

std::unique_ptr<ref::NodeKernel> make_gemm_kernel(const Node& node, const dnnl::engine& engine) {
  try {
    return build_gemm(node, engine);
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

}  // namespace kiln::compiler::cpu
