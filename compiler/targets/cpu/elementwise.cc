// SPDX-License-Identifier: Apache-2.0
// Relu, Add and Mul on oneDNN's eltwise and binary primitives over plain f32 tensors.
#include "compiler/targets/cpu/dnnl_kernel.h"

namespace kiln::compiler::cpu {

namespace {

using dnnl::memory;

class EltwiseKernel final : public DnnlKernel {
 public:
  EltwiseKernel(dnnl::engine engine, StaticShapes shapes, dnnl::eltwise_forward::primitive_desc pd)
      : DnnlKernel(std::move(engine), std::move(shapes)), pd_(std::move(pd)), eltwise_(pd_) {}

 private:
  void execute(ref::KernelContext& ctx, dnnl::stream& stream) const override {
    eltwise_.execute(stream, {{DNNL_ARG_SRC, wrap(pd_.src_desc(), ctx.input(0))},
                              {DNNL_ARG_DST, wrap(pd_.dst_desc(), ctx.output(0))},
                              {DNNL_ARG_SCRATCHPAD, scratchpad(pd_)}});
  }

  dnnl::eltwise_forward::primitive_desc pd_;
  dnnl::eltwise_forward eltwise_;
};

class BinaryKernel final : public DnnlKernel {
 public:
  BinaryKernel(dnnl::engine engine, StaticShapes shapes, dnnl::binary::primitive_desc pd,
               bool swapped)
      : DnnlKernel(std::move(engine), std::move(shapes)),
        pd_(std::move(pd)),
        binary_(pd_),
        swapped_(swapped) {}

 private:
  void execute(ref::KernelContext& ctx, dnnl::stream& stream) const override {
    const int first = swapped_ ? 1 : 0;
    binary_.execute(stream, {{DNNL_ARG_SRC_0, wrap(pd_.src0_desc(), ctx.input(first))},
                             {DNNL_ARG_SRC_1, wrap(pd_.src1_desc(), ctx.input(1 - first))},
                             {DNNL_ARG_DST, wrap(pd_.dst_desc(), ctx.output(0))},
                             {DNNL_ARG_SCRATCHPAD, scratchpad(pd_)}});
  }

  dnnl::binary::primitive_desc pd_;
  dnnl::binary binary_;
  bool swapped_;  // the broadcast operand is input 0 (Add and Mul commute)
};

// `s` with leading 1s up to `rank` dims (at least one dim).
memory::dims broadcast_dims(const Shape& s, int rank) {
  memory::dims dims(static_cast<size_t>(std::max(rank, 1) - s.rank()), 1);
  for (int i = 0; i < s.rank(); ++i) dims.push_back(s[i]);
  return dims;
}

std::unique_ptr<ref::NodeKernel> build_eltwise(const Node& node, const dnnl::engine& engine) {
  std::optional<StaticShapes> shapes = static_f32_shapes(node);
  if (!shapes || node.kind() != OpKind::kRelu || node.num_inputs() != 1) return nullptr;
  const memory::desc md = plain_desc(shapes->output);
  dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference,
                                   dnnl::algorithm::eltwise_relu, md, 0.0f, 0.0f);
  dnnl::eltwise_forward::primitive_desc pd(desc, scratchpad_attr(), engine);
  return std::make_unique<EltwiseKernel>(engine, std::move(*shapes), std::move(pd));
}

std::unique_ptr<ref::NodeKernel> build_binary(const Node& node, const dnnl::engine& engine) {
  std::optional<StaticShapes> shapes = static_f32_shapes(node);
  if (!shapes || node.num_inputs() != 2) return nullptr;
  dnnl::algorithm algorithm;
  if (node.kind() == OpKind::kAdd) {
    algorithm = dnnl::algorithm::binary_add;
  } else if (node.kind() == OpKind::kMul) {
    algorithm = dnnl::algorithm::binary_mul;
  } else {
    return nullptr;
  }
  const Shape& y = shapes->output;
  // oneDNN broadcasts only its second operand: the first must have the output's shape.
  bool swapped = false;
  if (*shapes->inputs[0] != y) {
    if (*shapes->inputs[1] != y) return nullptr;
    swapped = true;
  }
  const Shape& other = *shapes->inputs[swapped ? 0 : 1];
  if (other.rank() > y.rank()) return nullptr;
  const memory::desc dst = plain_desc(y);
  dnnl::binary::desc desc(algorithm, dst, plain_desc(broadcast_dims(other, y.rank())), dst);
  dnnl::binary::primitive_desc pd(desc, scratchpad_attr(), engine);
  return std::make_unique<BinaryKernel>(engine, std::move(*shapes), std::move(pd), swapped);
}

}  // namespace

std::unique_ptr<ref::NodeKernel> make_eltwise_kernel(const Node& node, const dnnl::engine& engine) {
  try {
    return build_eltwise(node, engine);
  } catch (const dnnl::error&) {
    return nullptr;  // a combination oneDNN does not implement: the ref kernel runs it
  }
}

std::unique_ptr<ref::NodeKernel> make_binary_kernel(const Node& node, const dnnl::engine& engine) {
  try {
    return build_binary(node, engine);
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

}  // namespace kiln::compiler::cpu
