// SPDX-License-Identifier: Apache-2.0
// Conv on oneDNN: direct convolution with weights packed at compile time and activations in the
// layouts the primitive prefers (reordered from and to plain NC(D)HW), bias and fused Relu inside.
#include "compiler/ops/nn.h"
#include "compiler/ops/nn_util.h"
#include "compiler/targets/cpu/dnnl_kernel.h"

namespace kiln::compiler::cpu {

using dnnl::memory;

std::optional<ConvSetup> conv_setup(const Node& node, bool allow_bf16) {
  const auto& op = node.attrs<ops::Conv>();
  if (op.activation && *op.activation != "Relu") return std::nullopt;
  std::optional<StaticShapes> shapes =
      allow_bf16 ? static_float_shapes(node) : static_f32_shapes(node);
  if (!shapes || node.num_inputs() < 2 || !shapes->inputs[1]) return std::nullopt;
  const Shape& x = *shapes->inputs[0];
  const Shape& w = *shapes->inputs[1];
  const Shape& y = shapes->output;
  const int spatial = x.rank() - 2;
  if (spatial < 1 || spatial > 3 || w.rank() != x.rank() || y.rank() != x.rank()) {
    return std::nullopt;
  }
  const int64_t groups = op.group;
  if (groups < 1 || x[1] % groups != 0 || w[0] % groups != 0 || w[1] * groups != x[1]) {
    return std::nullopt;
  }
  const std::vector<int64_t> in(x.begin() + 2, x.end());
  std::vector<int64_t> kernel(w.begin() + 2, w.end());
  if (op.kernel_shape && *op.kernel_shape != kernel) return std::nullopt;
  Result<WindowGeometry> g =
      forward_window(in, kernel, {op.auto_pad, op.strides, op.dilations, op.pads});
  if (!g.ok() || g->out != std::vector<int64_t>(y.begin() + 2, y.end())) return std::nullopt;
  const bool has_bias = node.has_input(2);
  if (has_bias && (shapes->inputs[2]->rank() != 1 || (*shapes->inputs[2])[0] != w[0])) {
    return std::nullopt;
  }
  ConvSetup s;
  s.src = to_dims(x);
  s.dst = to_dims(y);
  // Grouped weights [g, O/g, I/g, k...] are the ONNX [O, I/g, k...] array, reshaped.
  s.weights = to_dims(w);
  if (groups > 1) {
    s.weights[0] = w[0] / groups;
    s.weights.insert(s.weights.begin(), groups);
  }
  s.user_weights = plain_desc(s.weights, node.input(1)->tensor_type().dtype);
  s.weights_const = node.input(1)->constant_value();
  s.has_bias = has_bias;
  if (has_bias) s.bias = to_dims(*shapes->inputs[2]);
  s.bias_const = has_bias ? node.input(2)->constant_value() : nullptr;
  s.strides = to_dims(g->strides);
  for (int64_t d : g->dilations) s.dilates.push_back(d - 1);
  s.pad_begin = to_dims(g->pad_begin);
  s.pad_end = to_dims(g->pad_end);
  s.relu = op.activation.has_value();
  return s;
}

namespace {

// The layouts a convolution reads and writes when they are not the plain NC(D)HW of the tensors:
// the input is reordered into `src` and the output out of `dst` around the primitive.
struct Reorders {
  std::optional<dnnl::reorder> to_src;
  std::optional<dnnl::reorder> from_dst;
};

class ConvKernel final : public DnnlKernel {
 public:
  ConvKernel(dnnl::engine engine, StaticShapes shapes, dnnl::convolution_forward::primitive_desc pd,
             std::optional<memory> packed_weights, memory::desc user_weights, bool has_bias,
             Reorders reorders)
      : DnnlKernel(std::move(engine), std::move(shapes)),
        pd_(std::move(pd)),
        conv_(pd_),
        packed_weights_(std::move(packed_weights)),
        user_weights_(std::move(user_weights)),
        has_bias_(has_bias),
        reorders_(std::move(reorders)) {}

 private:
  void execute(ref::KernelContext& ctx, dnnl::stream& stream) const override {
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.output(0);
    memory src;
    if (reorders_.to_src) {
      memory plain = wrap(plain_desc(x.shape()), x);
      src = memory(pd_.src_desc(), engine());
      reorders_.to_src->execute(stream, plain, src);
    } else {
      src = wrap(pd_.src_desc(), x);
    }
    memory dst = reorders_.from_dst ? memory(pd_.dst_desc(), engine()) : wrap(pd_.dst_desc(), y);
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, src},
        {DNNL_ARG_DST, dst},
        {DNNL_ARG_SCRATCHPAD, scratchpad(pd_)},
    };
    if (packed_weights_) {
      args[DNNL_ARG_WEIGHTS] = *packed_weights_;
    } else {
      args[DNNL_ARG_WEIGHTS] = wrap(user_weights_, ctx.input(1));
    }
    if (has_bias_) args[DNNL_ARG_BIAS] = wrap(pd_.bias_desc(), ctx.input(2));
    conv_.execute(stream, args);
    if (reorders_.from_dst) {
      memory plain = wrap(plain_desc(y.shape()), y);
      reorders_.from_dst->execute(stream, dst, plain);
    }
  }

  dnnl::convolution_forward::primitive_desc pd_;
  dnnl::convolution_forward conv_;
  std::optional<memory> packed_weights_;
  memory::desc user_weights_;
  bool has_bias_;
  Reorders reorders_;
};

std::unique_ptr<ref::NodeKernel> build(const Node& node, const dnnl::engine& engine) {
  std::optional<ConvSetup> setup = conv_setup(node);
  if (!setup) return nullptr;
  const auto& op = node.attrs<ops::Conv>();
  std::optional<StaticShapes> shapes = static_f32_shapes(node);
  const Shape& x = *shapes->inputs[0];
  const Shape& y = shapes->output;
  const memory::desc& user_weights = setup->user_weights;
  const memory::desc any_weights(setup->weights, memory::data_type::f32, memory::format_tag::any);
  const Tensor* w_const = setup->weights_const;
  const bool has_bias = setup->has_bias;
  const memory::desc bias = has_bias ? plain_desc(setup->bias) : memory::desc();
  const ConvSetup* g = &*setup;

  // With constant weights oneDNN picks the activation layouts too (blocked ones run its fastest
  // kernels); this slice reorders into and out of them around each Conv.
  const bool pick_layouts = w_const != nullptr;
  const memory::desc plain_x = plain_desc(x);
  const memory::desc plain_y = plain_desc(y);
  auto any = [](const Shape& s) {
    return memory::desc(to_dims(s), memory::data_type::f32, memory::format_tag::any);
  };
  dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
      pick_layouts ? any(x) : plain_x, w_const != nullptr ? any_weights : user_weights, bias,
      pick_layouts ? any(y) : plain_y, g->strides, g->dilates, g->pad_begin, g->pad_end);
  dnnl::primitive_attr attr = scratchpad_attr();
  if (op.activation) {
    dnnl::post_ops post;
    post.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(post);
  }
  dnnl::convolution_forward::primitive_desc pd(desc, attr, engine);
  std::optional<memory> packed;
  if (w_const != nullptr) {
    packed = pack(engine, user_weights, w_const->raw_data(), pd.weights_desc());
  }
  Reorders reorders;
  if (pd.src_desc() != plain_x) {
    reorders.to_src = dnnl::reorder({engine, plain_x, engine, pd.src_desc()});
  }
  if (pd.dst_desc() != plain_y) {
    reorders.from_dst = dnnl::reorder({engine, pd.dst_desc(), engine, plain_y});
  }
  return std::make_unique<ConvKernel>(engine, std::move(*shapes), std::move(pd), std::move(packed),
                                      user_weights, has_bias, std::move(reorders));
}

}  // namespace

std::unique_ptr<ref::NodeKernel> make_conv_kernel(const Node& node, const dnnl::engine& engine) {
  try {
    return build(node, engine);
  } catch (const dnnl::error&) {
    return nullptr;  // a combination oneDNN does not implement: the ref kernel runs it
  }
}

}  // namespace kiln::compiler::cpu
