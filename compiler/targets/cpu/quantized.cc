// SPDX-License-Identifier: Apache-2.0
// Integer kernels of the cpu target's programs: QLinearConv, ConvInteger, QLinearMatMul and
// MatMulInteger as oneDNN int8 convolutions and matmuls (u8/s8 sources, s8 weights packed at
// compile time, s32 accumulation, per-channel output scales and zero points), and QuantizeLinear /
// DequantizeLinear as scaled reorders that keep the layout of the region they sit in.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "compiler/ops/all_ops.h"
#include "compiler/ops/nn_util.h"
#include "compiler/targets/cpu/builder.h"
#include "compiler/targets/cpu/onednn.h"

namespace kiln::compiler::cpu {

namespace {

using dnnl::memory;
using Arg = PrimitiveStep::Arg;

const Tensor* constant_of(const Node& node, int input) {
  return node.has_input(input) ? node.input(input)->constant_value() : nullptr;
}

bool is_static(const Value* v) {
  return v != nullptr && v->type().is_tensor() && v->tensor_type().is_static();
}

DType dtype_of(const Value* v) {
  return v->tensor_type().dtype;
}

// Whether oneDNN picked its reference implementation (too slow to beat the ref kernels' caller).
bool is_reference(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).find("ref") != std::string::npos;
}

bool is_8bit(DType d) {
  return d == DType::kU8 || d == DType::kI8;
}

// A constant's values as integers (8-bit or 32-bit integer tensors); empty for other constants.
std::vector<int32_t> int_values(const Tensor* t) {
  std::vector<int32_t> out;
  if (t == nullptr) return out;
  for (int64_t i = 0; i < t->numel(); ++i) {
    switch (t->dtype()) {
      case DType::kU8: out.push_back(t->data<uint8_t>()[i]); break;
      case DType::kI8: out.push_back(t->data<int8_t>()[i]); break;
      case DType::kI32: out.push_back(t->data<int32_t>()[i]); break;
      default: return {};
    }
  }
  return out;
}

// The zero point input `i`: 0 when omitted; nullopt when it is not one constant value.
std::optional<int32_t> scalar_zero_point(const Node& node, int i) {
  if (!node.has_input(i)) return 0;
  std::vector<int32_t> v = int_values(constant_of(node, i));
  if (v.size() != 1) return std::nullopt;
  return v[0];
}

std::optional<float> scalar_scale(const Node& node, int i) {
  const Tensor* t = constant_of(node, i);
  if (t == nullptr || t->dtype() != DType::kF32 || t->numel() != 1) return std::nullopt;
  const float s = t->data<float>()[0];
  if (!(s > 0.0f) || !std::isfinite(s)) return std::nullopt;
  return s;
}

// Weights as oneDNN takes them: s8 with zero points 0. u8 weights whose zero point is 128 are
// shifted to s8 (w - 128 over zero point 0); other zero points leave the node to its ref kernel.
std::optional<std::vector<int8_t>> s8_weights(const Tensor& w, const std::vector<int32_t>& zp) {
  std::vector<int8_t> out(static_cast<size_t>(w.numel()));
  if (w.dtype() == DType::kI8) {
    for (int32_t z : zp) {
      if (z != 0) return std::nullopt;
    }
    std::memcpy(out.data(), w.raw_data(), out.size());
    return out;
  }
  if (w.dtype() != DType::kU8) return std::nullopt;
  for (int32_t z : zp) {
    if (z != 128) return std::nullopt;
  }
  const uint8_t* p = w.data<uint8_t>();
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int8_t>(p[i] - 128);
  return out;
}

memory constant_memory(const dnnl::engine& engine, const memory::desc& user, const void* data,
                       const memory::desc& layout) {
  return pack(engine, user, data, layout);
}

void add_scratch(ProgramBuilder& b, const dnnl::primitive_desc_base& pd, std::vector<Arg>& args) {
  if (int sp = b.scratch(pd.scratchpad_desc().get_size()); sp >= 0) {
    args.push_back({DNNL_ARG_SCRATCHPAD, sp, pd.scratchpad_desc(), {}});
  }
}

// A PrimitiveStep whose source zero point is read at run time from an 8-bit tensor (the output
// of DynamicQuantizeLinear) and handed to oneDNN as its runtime s32 zero point.
class RuntimeZeroPointStep final : public Step {
 public:
  RuntimeZeroPointStep(dnnl::engine engine, dnnl::primitive primitive, std::vector<Arg> args,
                       int zero_point, DType zero_point_dtype)
      : engine_(std::move(engine)),
        primitive_(std::move(primitive)),
        args_(std::move(args)),
        zero_point_(zero_point),
        zero_point_dtype_(zero_point_dtype) {}

  Status run(StepContext& ctx) const override {
    std::unordered_map<int, memory> args;
    for (const Arg& a : args_) {
      args.emplace(a.arg, a.buffer < 0
                              ? a.fixed
                              : memory(a.layout, engine_, ctx.data[static_cast<size_t>(a.buffer)]));
    }
    const void* p = ctx.data[static_cast<size_t>(zero_point_)];
    int32_t zp = zero_point_dtype_ == DType::kU8 ? *static_cast<const uint8_t*>(p)
                                                 : *static_cast<const int8_t*>(p);
    const memory::desc one({1}, memory::data_type::s32, memory::format_tag::a);
    args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, memory(one, engine_, &zp));
    primitive_.execute(*ctx.stream, args);
    return Status();
  }

 private:
  dnnl::engine engine_;
  dnnl::primitive primitive_;
  std::vector<Arg> args_;
  int zero_point_;
  DType zero_point_dtype_;
};

void add(ProgramBuilder& b, const Node& node, std::unique_ptr<Step> step,
         const std::vector<Arg>& args, int extra_read = -1) {
  step->node = &node;
  step->kind = std::string(node.op().name()) + " int8";
  add_arg_buffers(*step, args);
  if (extra_read >= 0) step->reads.push_back(extra_read);
  b.add_step(std::move(step));
}

// What a QLinearConv or ConvInteger node asks of oneDNN.
struct IntConv {
  const Value* x = nullptr;
  const Tensor* w = nullptr;
  std::vector<int32_t> w_zp;
  int32_t x_zp = 0;
  const Value* runtime_x_zp = nullptr;  // ConvInteger with a computed x_zero_point
  std::vector<float> scales;            // output scales per channel (QLinearConv)
  int32_t y_zp = 0;
  const Tensor* bias = nullptr;  // s32 [O]
  int64_t group = 1;
  std::string auto_pad;
  std::optional<std::vector<int64_t>> strides, dilations, pads, kernel_shape;
};

// A Clip of the 8-bit output `y` with constant bounds (what qdq_fusion makes of FX's ReLU6), which
// the convolution applies as an eltwise post-op; nullptr when there is none.
const Node* fusable_clip(const Value* y, float& lo, float& hi) {
  if (!is_8bit(dtype_of(y)) || y->uses().size() != 1) return nullptr;
  const auto& outputs = y->graph()->outputs();
  if (std::find(outputs.begin(), outputs.end(), y) != outputs.end()) return nullptr;
  const Node* clip = y->uses()[0].node;
  if (clip->kind() != OpKind::kClip || clip->input(0) != y) return nullptr;
  lo = dtype_of(y) == DType::kU8 ? 0.0f : -128.0f;
  hi = dtype_of(y) == DType::kU8 ? 255.0f : 127.0f;
  for (int i = 1; i < 3; ++i) {
    if (!clip->has_input(i)) continue;
    std::vector<int32_t> v = int_values(constant_of(*clip, i));
    if (v.size() != 1 || dtype_of(clip->input(i)) != dtype_of(y)) return nullptr;
    (i == 1 ? lo : hi) = static_cast<float>(v[0]);
  }
  return clip;
}

bool lower_int_conv(ProgramBuilder& b, const Node& node, const IntConv& c) {
  if (!is_static(c.x) || !is_8bit(dtype_of(c.x)) || c.w == nullptr || !b.has_buffer(c.x)) {
    return false;
  }
  const Value* yv = node.output(0);
  if (!is_static(yv)) return false;
  float clip_lo = 0.0f;
  float clip_hi = 0.0f;
  const Node* clip = fusable_clip(yv, clip_lo, clip_hi);
  const Shape& x = c.x->tensor_type().shape();
  const Shape& w = c.w->shape();
  const Shape& y = yv->tensor_type().shape();
  const int spatial = x.rank() - 2;
  if (spatial < 1 || spatial > 3 || w.rank() != x.rank() || y.rank() != x.rank()) return false;
  if (c.group < 1 || x[1] % c.group != 0 || w[0] % c.group != 0 || w[1] * c.group != x[1]) {
    return false;
  }
  std::vector<int64_t> kernel(w.begin() + 2, w.end());
  if (c.kernel_shape && *c.kernel_shape != kernel) return false;
  const std::vector<int64_t> in(x.begin() + 2, x.end());
  Result<WindowGeometry> g =
      forward_window(in, kernel, {c.auto_pad, c.strides, c.dilations, c.pads});
  if (!g.ok() || g->out != std::vector<int64_t>(y.begin() + 2, y.end())) return false;
  std::optional<std::vector<int8_t>> weights = s8_weights(*c.w, c.w_zp);
  if (!weights) return false;
  const std::optional<memory::data_type> src_dt = find_dnnl_type(dtype_of(c.x));
  const std::optional<memory::data_type> dst_dt = find_dnnl_type(dtype_of(yv));
  if (!src_dt || !dst_dt) return false;

  memory::dims wdims = to_dims(w);
  if (c.group > 1) {
    wdims[0] = w[0] / c.group;
    wdims.insert(wdims.begin(), c.group);
  }
  memory::dims dilates;
  for (int64_t d : g->dilations) dilates.push_back(d - 1);
  const memory::desc user_weights = with_type(plain_desc(wdims), memory::data_type::s8);
  const memory::desc any_weights(wdims, memory::data_type::s8, memory::format_tag::any);
  const memory::desc bias =
      c.bias != nullptr ? plain_desc(Shape{w[0]}, DType::kI32) : memory::desc();
  dnnl::primitive_attr attr = scratchpad_attr();
  if (!c.scales.empty()) {
    attr.set_output_scales(c.scales.size() == 1 ? 0 : 1 << 1, c.scales);
  }
  if (c.runtime_x_zp != nullptr) {
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  } else if (c.x_zp != 0) {
    attr.set_zero_points(DNNL_ARG_SRC, 0, {c.x_zp});
  }
  if (c.y_zp != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {c.y_zp});
  if (clip != nullptr) {
    // The post-ops act before the destination zero point is added: the bounds less it. With
    // integer bounds, clipping before the rounding equals clipping after it.
    dnnl::post_ops post;
    post.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, clip_lo - static_cast<float>(c.y_zp),
                        clip_hi - static_cast<float>(c.y_zp));
    attr.set_post_ops(post);
  }
  auto make = [&](const memory::desc& src) {
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, any_weights,
        bias, memory::desc(to_dims(y), *dst_dt, memory::format_tag::any), to_dims(g->strides),
        dilates, to_dims(g->pad_begin), to_dims(g->pad_end));
    return dnnl::convolution_forward::primitive_desc(desc, attr, b.engine());
  };
  const memory::desc x_layout = b.layout_of(c.x);
  std::optional<dnnl::convolution_forward::primitive_desc> picked;
  if (!is_row_major(x_layout)) {
    try {
      picked = make(x_layout);
      if (is_reference(*picked)) picked.reset();
    } catch (const dnnl::error&) {
      picked.reset();
    }
  }
  dnnl::convolution_forward::primitive_desc pd =
      picked ? *picked : make(memory::desc(to_dims(x), *src_dt, memory::format_tag::any));
  if (is_reference(pd)) return false;

  std::vector<Arg> args;
  args.push_back({DNNL_ARG_SRC, b.in_layout(c.x, pd.src_desc()), pd.src_desc(), {}});
  args.push_back({DNNL_ARG_WEIGHTS, -1, pd.weights_desc(),
                  constant_memory(b.engine(), user_weights, weights->data(), pd.weights_desc())});
  if (c.bias != nullptr) {
    args.push_back({DNNL_ARG_BIAS, -1, pd.bias_desc(),
                    constant_memory(b.engine(), bias, c.bias->raw_data(), pd.bias_desc())});
  }
  add_scratch(b, pd, args);
  const int zp_buffer = c.runtime_x_zp != nullptr ? b.plain(c.runtime_x_zp) : -1;
  args.push_back({DNNL_ARG_DST,
                  b.define(clip != nullptr ? clip->output(0) : yv, pd.dst_desc()),
                  pd.dst_desc(),
                  {}});
  if (zp_buffer >= 0) {
    add(b, node,
        std::make_unique<RuntimeZeroPointStep>(b.engine(), dnnl::convolution_forward(pd), args,
                                               zp_buffer, dtype_of(c.runtime_x_zp)),
        args, zp_buffer);
  } else {
    add(b, node, std::make_unique<PrimitiveStep>(b.engine(), dnnl::convolution_forward(pd), args),
        args);
  }
  if (clip != nullptr) b.mark_fused(clip);
  return true;
}

template <class Attrs>
void copy_geometry(const Attrs& op, IntConv& c) {
  c.group = op.group;
  c.auto_pad = op.auto_pad;
  c.strides = op.strides;
  c.dilations = op.dilations;
  c.pads = op.pads;
  c.kernel_shape = op.kernel_shape;
}

// What a QLinearMatMul or MatMulInteger node asks of oneDNN: [..., M, K] x constant [K, N].
struct IntMatMul {
  const Value* a = nullptr;
  const Tensor* w = nullptr;
  std::vector<int32_t> w_zp;
  int32_t a_zp = 0;
  std::vector<float> scales;  // one, or one per column
  int32_t y_zp = 0;
  std::optional<int64_t> k;      // a as [numel / k, k] (default: its last dim)
  bool w_transposed = false;     // w is [N, K] (a 1x1 QLinearConv's weights)
  const Tensor* bias = nullptr;  // s32 [N]
};

bool lower_int_matmul(ProgramBuilder& b, const Node& node, const IntMatMul& c);

// A QLinearConv over 1x1 images with 1x1 kernels (what qdq_fusion makes of a Linear with a
// bias) is the matmul [M, K] x [K, N] + bias: oneDNN's int8 matmul runs it far faster than its
// convolution over a batch of M one-pixel images.
bool lower_as_matmul(ProgramBuilder& b, const Node& node, const IntConv& c) {
  if (!is_static(c.x) || c.group != 1 || c.w->shape().rank() != 4 || c.runtime_x_zp != nullptr) {
    return false;
  }
  const Shape& x = c.x->tensor_type().shape();
  const Shape& w = c.w->shape();
  if (x.rank() != 4 || x[2] != 1 || x[3] != 1 || w[2] != 1 || w[3] != 1) return false;
  for (const auto* v : {&c.pads, &c.dilations, &c.strides}) {
    if (v->has_value() && std::any_of((*v)->begin(), (*v)->end(),
                                      [&](int64_t e) { return v == &c.pads ? e != 0 : e != 1; })) {
      return false;
    }
  }
  if (!c.auto_pad.empty() && c.auto_pad != "NOTSET" && c.auto_pad != "VALID") return false;
  const Tensor w2 = c.w->reshaped(Shape{w[0], w[1]});
  IntMatMul m;
  m.a = c.x;
  m.k = x[1];
  m.w = &w2;
  m.w_zp = c.w_zp;
  m.a_zp = c.x_zp;
  m.scales = c.scales;
  m.y_zp = c.y_zp;
  m.w_transposed = true;
  m.bias = c.bias;
  return lower_int_matmul(b, node, m);
}

bool lower_qlinear_conv(ProgramBuilder& b, const Node& node) {
  // A fused activation (the cuda target's qdq_fusion) runs on the ref kernel.
  if (node.attrs<ops::QLinearConv>().activation) return false;
  IntConv c;
  c.x = node.input(0);
  c.w = constant_of(node, 3);
  std::optional<float> x_scale = scalar_scale(node, 1);
  std::optional<int32_t> x_zp = scalar_zero_point(node, 2);
  std::optional<float> y_scale = scalar_scale(node, 6);
  std::optional<int32_t> y_zp = scalar_zero_point(node, 7);
  const Tensor* w_scale = constant_of(node, 4);
  if (!x_scale || !x_zp || !y_scale || !y_zp || c.w == nullptr || w_scale == nullptr ||
      w_scale->dtype() != DType::kF32) {
    return false;
  }
  const int64_t channels = c.w->shape()[0];
  if (w_scale->numel() != 1 && w_scale->numel() != channels) return false;
  c.w_zp = int_values(constant_of(node, 5));
  if (c.w_zp.empty()) return false;
  for (float s : w_scale->span<float>()) c.scales.push_back(*x_scale * s / *y_scale);
  c.x_zp = *x_zp;
  c.y_zp = *y_zp;
  if (node.has_input(8)) {
    c.bias = constant_of(node, 8);
    if (c.bias == nullptr || c.bias->dtype() != DType::kI32 || c.bias->numel() != channels) {
      return false;
    }
  }
  copy_geometry(node.attrs<ops::QLinearConv>(), c);
  if (lower_as_matmul(b, node, c)) return true;
  return lower_int_conv(b, node, c);
}

bool lower_conv_integer(ProgramBuilder& b, const Node& node) {
  IntConv c;
  c.x = node.input(0);
  c.w = constant_of(node, 1);
  if (c.w == nullptr) return false;
  if (node.has_input(2)) {
    std::optional<int32_t> zp = scalar_zero_point(node, 2);
    if (zp) {
      c.x_zp = *zp;
    } else if (is_static(node.input(2)) && node.input(2)->tensor_type().shape().numel() == 1) {
      c.runtime_x_zp = node.input(2);
    } else {
      return false;
    }
  }
  c.w_zp = node.has_input(3) ? int_values(constant_of(node, 3)) : std::vector<int32_t>{0};
  if (c.w_zp.empty()) return false;
  copy_geometry(node.attrs<ops::ConvInteger>(), c);
  return lower_int_conv(b, node, c);
}

bool lower_int_matmul(ProgramBuilder& b, const Node& node, const IntMatMul& c) {
  const Value* yv = node.output(0);
  if (!is_static(c.a) || !is_static(yv) || !is_8bit(dtype_of(c.a)) || c.w == nullptr ||
      c.w->shape().rank() != 2) {
    return false;
  }
  const Shape& a = c.a->tensor_type().shape();
  if (a.rank() < 2 || a.numel() == 0) return false;
  const int64_t k = c.k.value_or(a[a.rank() - 1]);
  const int64_t n = c.w->shape()[c.w_transposed ? 0 : 1];
  if (c.w->shape()[c.w_transposed ? 1 : 0] != k || n == 0) return false;
  const int64_t m = a.numel() / k;
  std::optional<std::vector<int8_t>> weights = s8_weights(*c.w, c.w_zp);
  const std::optional<memory::data_type> src_dt = find_dnnl_type(dtype_of(c.a));
  const std::optional<memory::data_type> dst_dt = find_dnnl_type(dtype_of(yv));
  if (!weights || !src_dt || !dst_dt) return false;
  const memory::desc src = with_type(plain_desc(memory::dims{m, k}), *src_dt);
  const memory::desc user_weights =
      c.w_transposed ? memory::desc({k, n}, memory::data_type::s8, memory::format_tag::ba)
                     : with_type(plain_desc(memory::dims{k, n}), memory::data_type::s8);
  const memory::desc bias =
      c.bias != nullptr ? plain_desc(Shape{1, n}, DType::kI32) : memory::desc();
  const memory::desc any_weights({k, n}, memory::data_type::s8, memory::format_tag::any);
  const memory::desc dst = with_type(plain_desc(memory::dims{m, n}), *dst_dt);
  dnnl::primitive_attr attr = scratchpad_attr();
  if (!c.scales.empty()) attr.set_output_scales(c.scales.size() == 1 ? 0 : 1 << 1, c.scales);
  if (c.a_zp != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {c.a_zp});
  if (c.y_zp != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {c.y_zp});
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, any_weights, bias, dst), attr,
                                  b.engine());
  if (is_reference(pd)) return false;
  std::vector<Arg> args;
  args.push_back({DNNL_ARG_SRC, b.plain(c.a), src, {}});
  args.push_back({DNNL_ARG_WEIGHTS, -1, pd.weights_desc(),
                  constant_memory(b.engine(), user_weights, weights->data(), pd.weights_desc())});
  if (c.bias != nullptr) {
    args.push_back({DNNL_ARG_BIAS, -1, pd.bias_desc(),
                    constant_memory(b.engine(), bias, c.bias->raw_data(), pd.bias_desc())});
  }
  add_scratch(b, pd, args);
  args.push_back(
      {DNNL_ARG_DST, b.define(yv, plain_desc(yv->tensor_type().shape(), dtype_of(yv))), dst, {}});
  add(b, node, std::make_unique<PrimitiveStep>(b.engine(), dnnl::matmul(pd), args), args);
  return true;
}

bool lower_qlinear_matmul(ProgramBuilder& b, const Node& node) {
  IntMatMul c;
  c.a = node.input(0);
  c.w = constant_of(node, 3);
  std::optional<float> a_scale = scalar_scale(node, 1);
  std::optional<int32_t> a_zp = scalar_zero_point(node, 2);
  std::optional<float> y_scale = scalar_scale(node, 6);
  std::optional<int32_t> y_zp = scalar_zero_point(node, 7);
  const Tensor* w_scale = constant_of(node, 4);
  if (!a_scale || !a_zp || !y_scale || !y_zp || c.w == nullptr || c.w->shape().rank() != 2 ||
      w_scale == nullptr || w_scale->dtype() != DType::kF32 ||
      (w_scale->numel() != 1 && w_scale->numel() != c.w->shape()[1])) {
    return false;
  }
  c.w_zp = int_values(constant_of(node, 5));
  if (c.w_zp.empty()) return false;
  for (float s : w_scale->span<float>()) c.scales.push_back(*a_scale * s / *y_scale);
  c.a_zp = *a_zp;
  c.y_zp = *y_zp;
  return lower_int_matmul(b, node, c);
}

bool lower_matmul_integer(ProgramBuilder& b, const Node& node) {
  IntMatMul c;
  c.a = node.input(0);
  c.w = constant_of(node, 1);
  std::optional<int32_t> a_zp = scalar_zero_point(node, 2);
  if (!a_zp || c.w == nullptr) return false;
  c.a_zp = *a_zp;
  c.w_zp = node.has_input(3) ? int_values(constant_of(node, 3)) : std::vector<int32_t>{0};
  if (c.w_zp.empty()) return false;
  return lower_int_matmul(b, node, c);
}

// QuantizeLinear / DequantizeLinear with constant per-tensor parameters (DequantizeLinear also
// per axis with zero points 0) as a reorder between f32 and 8-bit data in the input's layout.
bool lower_qdq(ProgramBuilder& b, const Node& node) {
  const bool quantize = node.kind() == OpKind::kQuantizeLinear;
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  if (!is_static(x) || !is_static(y) || !b.has_buffer(x) || x->tensor_type().shape().numel() == 0) {
    return false;
  }
  const DType qtype = quantize ? dtype_of(y) : dtype_of(x);
  if (!is_8bit(qtype) || dtype_of(quantize ? x : y) != DType::kF32) return false;
  const Tensor* scale = constant_of(node, 1);
  std::optional<int32_t> zp = scalar_zero_point(node, 2);
  if (scale == nullptr || scale->dtype() != DType::kF32) return false;
  // Blocked scales (of x's rank) and a division in another precision stay on the ref kernel.
  if (scale->numel() != 1 && scale->shape().rank() != 1) return false;
  if (quantize &&
      node.attrs<ops::QuantizeLinear>().precision.value_or(DType::kF32) != DType::kF32) {
    return false;
  }
  std::vector<float> scales;
  int mask = 0;
  for (float s : scale->span<float>()) {
    if (!(s > 0.0f) || !std::isfinite(s)) return false;
    scales.push_back(quantize ? 1.0f / s : s);
  }
  const Shape& shape = x->tensor_type().shape();
  if (scales.size() != 1) {
    const int64_t axis_attr = quantize ? node.attrs<ops::QuantizeLinear>().axis
                                       : node.attrs<ops::DequantizeLinear>().axis;
    const int64_t axis = axis_attr < 0 ? axis_attr + shape.rank() : axis_attr;
    if (quantize || axis < 0 || axis >= shape.rank() ||
        shape[static_cast<int>(axis)] != static_cast<int64_t>(scales.size())) {
      return false;
    }
    std::vector<int32_t> zps = int_values(constant_of(node, 2));
    for (int32_t z : zps) {
      if (z != 0) return false;
    }
    if (node.has_input(2) && zps.empty()) return false;
    zp = 0;
    mask = 1 << axis;
  }
  if (!zp) return false;
  // Division by the scale is a multiplication by its inverse here: the result may differ from
  // ONNX's x / scale by one quantization step where the quotient is within rounding of a half.
  const memory::desc from = b.layout_of(x);
  const memory::desc to = with_type(from, *find_dnnl_type(dtype_of(y)));
  dnnl::primitive_attr attr;
  attr.set_output_scales(mask, scales);
  if (*zp != 0) attr.set_zero_points(quantize ? DNNL_ARG_DST : DNNL_ARG_SRC, 0, {*zp});
  dnnl::reorder::primitive_desc pd(b.engine(), from, b.engine(), to, attr);
  std::vector<Arg> args;
  args.push_back({DNNL_ARG_SRC, b.buffer_of(x), from, {}});
  args.push_back({DNNL_ARG_DST, b.define(y, to), to, {}});
  add(b, node, std::make_unique<PrimitiveStep>(b.engine(), dnnl::reorder(pd), args), args);
  return true;
}

// The residual Add of an int8 network, Q(Add(DQ(a), DQ(b))) with a Relu before the Q or not, all
// with constant per-tensor parameters and a, b 8-bit of one static shape: one oneDNN int8 binary
// add, y = a * sa/sy + b * sb/sy + (zy - za * sa/sy - zb * sb/sy) (then at least zy for the Relu),
// rounded once into y's type.
struct IntAdd {
  const Node* dq[2] = {nullptr, nullptr};
  const Node* relu = nullptr;
  const Node* q = nullptr;
  float scale[2] = {0, 0};
  int32_t zp[2] = {0, 0};
  float y_scale = 0;
  int32_t y_zp = 0;
};

const Node* sole_use(const Value* v) {
  if (v->uses().size() != 1) return nullptr;
  const auto& outputs = v->graph()->outputs();
  if (std::find(outputs.begin(), outputs.end(), v) != outputs.end()) return nullptr;
  return v->uses()[0].node;
}

std::optional<IntAdd> int_add(const Node& add) {
  if (add.kind() != OpKind::kAdd || add.num_inputs() != 2) return std::nullopt;
  IntAdd a;
  for (int i = 0; i < 2; ++i) {
    const Node* dq = add.input(i)->producer();
    if (dq == nullptr || dq->kind() != OpKind::kDequantizeLinear ||
        sole_use(add.input(i)) != &add || !is_static(dq->input(0)) ||
        !is_8bit(dtype_of(dq->input(0)))) {
      return std::nullopt;
    }
    std::optional<float> s = scalar_scale(*dq, 1);
    std::optional<int32_t> z = scalar_zero_point(*dq, 2);
    if (!s || !z) return std::nullopt;
    a.dq[i] = dq;
    a.scale[i] = *s;
    a.zp[i] = *z;
  }
  if (a.dq[0] == a.dq[1] ||
      a.dq[0]->input(0)->tensor_type().shape() != a.dq[1]->input(0)->tensor_type().shape()) {
    return std::nullopt;
  }
  const Node* next = sole_use(add.output(0));
  if (next != nullptr && next->kind() == OpKind::kRelu) {
    a.relu = next;
    next = sole_use(next->output(0));
  }
  if (next == nullptr || next->kind() != OpKind::kQuantizeLinear || !is_static(next->output(0)) ||
      !is_8bit(dtype_of(next->output(0)))) {
    return std::nullopt;
  }
  std::optional<float> ys = scalar_scale(*next, 1);
  std::optional<int32_t> yz = scalar_zero_point(*next, 2);
  if (!ys || !yz) return std::nullopt;
  a.q = next;
  a.y_scale = *ys;
  a.y_zp = *yz;
  return a;
}

// A DequantizeLinear feeding an int8 add: its step is the add's.
bool feeds_int_add(const Node& dq) {
  const Node* add = sole_use(dq.output(0));
  return add != nullptr && int_add(*add).has_value();
}

bool lower_int_add(ProgramBuilder& b, const Node& sum, const IntAdd& a) {
  const Value* x0 = a.dq[0]->input(0);
  const Value* x1 = a.dq[1]->input(0);
  const Value* y = a.q->output(0);
  const memory::desc src0 = b.layout_of(x0);
  const memory::desc src1 = with_type(src0, *find_dnnl_type(dtype_of(x1)));
  const memory::desc dst = with_type(src0, *find_dnnl_type(dtype_of(y)));
  const float k0 = a.scale[0] / a.y_scale;
  const float k1 = a.scale[1] / a.y_scale;
  dnnl::primitive_attr attr = scratchpad_attr();
  attr.set_scales(DNNL_ARG_SRC_0, 0, {k0});
  attr.set_scales(DNNL_ARG_SRC_1, 0, {k1});
  dnnl::post_ops post;
  post.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, 1.0f,
                      static_cast<float>(a.y_zp) - k0 * static_cast<float>(a.zp[0]) -
                          k1 * static_cast<float>(a.zp[1]));
  if (a.relu != nullptr) {
    post.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, static_cast<float>(a.y_zp),
                        dtype_of(y) == DType::kU8 ? 255.0f : 127.0f);
  }
  attr.set_post_ops(post);
  dnnl::binary::primitive_desc pd(dnnl::binary::desc(dnnl::algorithm::binary_add, src0, src1, dst),
                                  attr, b.engine());
  if (is_reference(pd)) return false;
  std::vector<Arg> args;
  args.push_back({DNNL_ARG_SRC_0, b.buffer_of(x0), src0, {}});
  args.push_back({DNNL_ARG_SRC_1, b.in_layout(x1, src1), src1, {}});
  add_scratch(b, pd, args);
  args.push_back({DNNL_ARG_DST, b.define(y, dst), dst, {}});
  add(b, sum, std::make_unique<PrimitiveStep>(b.engine(), dnnl::binary(pd), args), args);
  if (a.relu != nullptr) b.mark_fused(a.relu);
  b.mark_fused(a.q);
  return true;
}

// The int8 add, or (where oneDNN has no fast kernel for it) its two DequantizeLinear steps, which
// were put off, now, leaving the Add to the f32 kernels.
bool lower_add(ProgramBuilder& b, const Node& sum) {
  std::optional<IntAdd> a = int_add(sum);
  if (!a) return false;
  try {
    if (lower_int_add(b, sum, *a)) return true;
  } catch (const dnnl::error&) {
  }
  for (const Node* dq : a->dq) {
    if (!lower_qdq(b, *dq)) return false;  // unreachable: feeds_int_add checked the same
  }
  return false;
}

}  // namespace

bool lower_quantized(ProgramBuilder& builder, const Node& node) {
  if (node.graph() != &builder.graph()) return false;
  switch (node.kind()) {
    case OpKind::kQLinearConv: return lower_qlinear_conv(builder, node);
    case OpKind::kConvInteger: return lower_conv_integer(builder, node);
    case OpKind::kQLinearMatMul: return lower_qlinear_matmul(builder, node);
    case OpKind::kMatMulInteger: return lower_matmul_integer(builder, node);
    case OpKind::kDequantizeLinear:
      if (feeds_int_add(node)) return true;  // lowered with the add
      return lower_qdq(builder, node);
    case OpKind::kQuantizeLinear: return lower_qdq(builder, node);
    case OpKind::kAdd: return lower_add(builder, node);
    default: return false;
  }
}

}  // namespace kiln::compiler::cpu
