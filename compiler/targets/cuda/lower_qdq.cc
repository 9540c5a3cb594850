// SPDX-License-Identifier: Apache-2.0
// Lowering QuantizeLinear (into centered s8, or the f16 integers of a first convolution on few
// channels, space-to-depth for a stride-2 one) and DequantizeLinear (of a constant: its f32 values,
// computed here) to the 8-bit kernels (kernels/int8.h).
#include <algorithm>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/ops/all_ops.h"
#include "compiler/targets/cuda/kernels/int8.h"
#include "compiler/targets/cuda/lower_util.h"
#include "compiler/targets/cuda/quantized.h"
#include "core/env.h"

namespace kiln::compiler::cuda {

namespace {

// How the first convolution (a QuantizeLinear's reader) runs.
enum class Stem {
  kS8,   // s8 input, channels padded to 16
  kF16,  // f16 integers in 8 channels
  kS2d,  // f16 integers space-to-depth (s2d_geometry), 16 channels
};

// Whether QuantizeLinear output `v` (an image of `shape`, f32 NCHW `x_layout`) feeds f16 tensor
// cores instead of s8 ones: a first convolution on few channels (not a multiple of 4; 3 for RGB)
// whose only readers are int8 convolutions. Its centered values are then held as f16 integers
// (Buffer::centered, dtype f16), its filter too, and the convolution accumulates in f32: the same
// integer sums as the s8 kernels (|sum| < 2^24), at f16 tensor-core speed. cuDNN's s8 engines
// for a 16-channel 7x7/2 convolution were slow: ResNet-50's stem took 7.18 ms of 14.2 at batch 256
// on an H200. A stride-2 one (one reader) runs space-to-depth. KILN_CUDA_INT8_STEM=int8, f16 or
// s2d picks one (where it applies), to compare them on a GPU. A convolution with a fused SiLU runs
// on the own s8 kernel: s2d where it applies and the values are `centerable`, else s8.
Stem stem_of(const Builder& b, const Value* v, const Shape& shape, const Int8Layout& x_layout,
             bool centerable) {
  static const std::string_view forced = [] {
    const char* e = env_flag_c_str(EnvFlag::kCudaInt8Stem);
    return std::string_view(e == nullptr ? "" : e);
  }();
  if (forced == "int8" || shape.rank() != 4 || shape[1] > 8 || shape[1] % 4 == 0 || x_layout.nhwc ||
      v->uses().empty()) {
    return Stem::kS8;
  }
  for (const Value* out : b.graph().outputs()) {
    if (out == v) return Stem::kS8;
  }
  // Only int8 convolutions read it (f16 integers hold any zero point's values exactly).
  bool silu = false;  // one applies a SiLU, which only the own s8 kernel does
  for (const auto& use : v->uses()) {
    const std::optional<IntConv> c =
        use.node->kind() == OpKind::kQLinearConv ? int_conv(*use.node) : std::nullopt;
    if (use.index != 0 || !c || c->group != 1) {
      return Stem::kS8;
    }
    silu = silu || c->silu > 0.0f;
  }
  if ((forced == "f16" && !silu) || v->uses().size() != 1) return silu ? Stem::kS8 : Stem::kF16;
  const Node* conv = v->uses().front().node;
  std::optional<IntConv> c = int_conv(*conv);
  const bool s2d = c && s2d_geometry(*c, shape, conv->output(0)->tensor_type().shape());
  if (silu) return s2d && centerable ? Stem::kS2d : Stem::kS8;
  return s2d ? Stem::kS2d : Stem::kF16;
}

int64_t round_up(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}

Int8Layout layout_of(const Buffer& buf, const Shape& logical) {
  Int8Layout l;
  l.n = logical[0];
  l.c = logical.rank() > 1 ? logical[1] : 1;
  l.s = logical.numel() / std::max<int64_t>(l.n * l.c, 1);
  l.nhwc = buf.nhwc;
  l.stored_c = buf.nhwc ? buf.shape[1] : l.c;
  return l;
}

std::optional<Elem> float_elem(const Value* v) {
  switch (v->tensor_type().dtype) {
    case DType::kF32: return Elem::kF32;
    case DType::kF16: return Elem::kF16;
    case DType::kBF16: return Elem::kBF16;
    default: return std::nullopt;
  }
}

}  // namespace

Result<bool> lower_quantize(Builder& b, const Node& node) {
  std::optional<QParams> p = qdq_params(node);
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  if (!p || !x->type().is_tensor() || !x->tensor_type().is_static() || !b.has_buffer(x)) {
    return false;
  }
  const std::optional<Elem> e = float_elem(x);
  const Shape shape = x->tensor_type().shape();
  if (!e || (shape.rank() != 4 && shape.rank() != 2)) return false;
  const int xi = b.stored_buffer(x);
  const Int8Layout xl = layout_of(b.buffer(xi), shape);
  Int8Layout yl = xl;
  int yi = -1;
  bool y_u8 = false;
  int32_t y_off = 0;
  auto [lo, hi] = centered_bounds(*p, false);
  const Stem stem = *e == Elem::kF32 ? stem_of(b, y, shape, xl, centerable(*p)) : Stem::kS8;
  // The first convolution's f16 input: whole quantized values, centered, NHWC.
  const auto define_f16 = [&](Shape f16_shape) {
    Buffer buf;
    buf.dtype = DType::kF16;
    buf.shape = std::move(f16_shape);
    buf.nhwc = true;
    buf.centered = true;
    buf.bytes = static_cast<size_t>(buf.shape.numel()) * 2;
    return b.define_buffer(y, std::move(buf));
  };
  const float scale = p->scale;
  const int32_t zp = p->zp;
  const int32_t q_lo = qmin(p->type);
  const int32_t q_hi = qmax(p->type);
  if (stem == Stem::kS2d) {
    // s8 straight away where the own kernel runs the convolution (its clamp keeping the centered
    // values in s8, as the s8 path's), else f16 integers for cuDNN.
    KILN_ASSIGN_OR_RETURN(const int config, s2d_stem_config(b, *y->uses().front().node, shape));
    const bool s8 = config >= 0 && centerable(*p);
    const int64_t n = shape[0], c = shape[1], h = shape[2], w = shape[3];
    const Shape s2d_shape{n, 16, h / 2, w / 2};
    yi = s8 ? new_centered(b, y, s2d_shape, 16) : define_f16(s2d_shape);
    const int32_t s_lo = s8 ? std::max(q_lo, zp - 128) : q_lo;
    const int32_t s_hi = s8 ? std::min(q_hi, zp + 127) : q_hi;
    add(b, node, s8 ? "QuantizeLinear s2d int8" : "QuantizeLinear f16 s2d", {xi}, {yi},
        [=](Session& ss) {
          return launch_quantize_s2d(static_cast<const float*>(ptr(ss, xi)), n, c, h, w, scale, zp,
                                     s_lo, s_hi, s8, ptr(ss, yi), ss.stream);
        });
    return true;
  }
  if (stem == Stem::kF16) {
    yi = define_f16(Shape{shape[0], 8, shape[2], shape[3]});
    const int64_t n = shape[0], c = shape[1], s = shape[2] * shape[3];
    add(b, node, "QuantizeLinear f16", {xi}, {yi}, [=](Session& ss) {
      return launch_quantize_to_f16x8(static_cast<const float*>(ptr(ss, xi)), n, c, s, scale, zp,
                                      q_lo, q_hi, ptr(ss, yi), ss.stream);
    });
    return true;
  }
  if (centerable(*p) && centered_readers(b, y)) {
    // Channels that are not a multiple of 4 are padded for the int8 convolutions: an image's 3
    // to 16 (16-byte pixels; with 4 the stem convolution took 11.4 ms on an H200 at batch 256),
    // more than 16 to a multiple of 4. Others stay as they are, as the int8 Add and MaxPool
    // (which take multiples of 4 only) expect.
    const int64_t c = shape.rank() == 4 ? shape[1] : 0;
    const int64_t stored_c = c % 4 == 0 ? c : c < 16 ? 16 : round_up(c, 4);
    yi = new_centered(b, y, shape, stored_c);
    yl = layout_of(b.buffer(yi), shape);
  } else {
    yi = b.define(y, xl.nhwc);
    yl.stored_c = yl.c;
    y_u8 = p->type == DType::kU8;
    y_off = p->zp;
    lo = qmin(p->type);
    hi = qmax(p->type);
  }
  add(b, node, "QuantizeLinear", {xi}, {yi}, [=, e = *e, lo = lo, hi = hi](Session& s) {
    return launch_quantize8(e, ptr(s, xi), xl, ptr(s, yi), yl, y_u8, scale, y_off, lo, hi,
                            s.stream);
  });
  return true;
}

namespace {

// A DequantizeLinear of a constant: its f32 values, computed here (per-tensor or per-axis).
bool lower_constant_dequantize(Builder& b, const Node& node) {
  const Tensor* q = node.input(0)->constant_value();
  const Tensor* scale = node.input(1)->constant_value();
  const Tensor* zp = node.has_input(2) ? node.input(2)->constant_value() : nullptr;
  if (q == nullptr || scale == nullptr || scale->dtype() != DType::kF32 ||
      node.output(0)->tensor_type().dtype != DType::kF32 || !is_8bit(q->dtype()) ||
      (node.has_input(2) &&
       (zp == nullptr || zp->dtype() != q->dtype() || zp->numel() != scale->numel()))) {
    return false;
  }
  const Shape shape = q->shape();
  int64_t axis = node.attrs<ops::DequantizeLinear>().axis;
  if (axis < 0) axis += shape.rank();
  const int64_t groups = scale->numel();
  if (groups != 1 && (axis < 0 || axis >= shape.rank() || shape[static_cast<int>(axis)] != groups ||
                      scale->shape().rank() != 1)) {
    return false;
  }
  int64_t inner = 1;
  for (int d = static_cast<int>(axis) + 1; d < shape.rank(); ++d) inner *= shape[d];
  std::vector<uint8_t> bytes(static_cast<size_t>(shape.numel()) * sizeof(float));
  auto* out = reinterpret_cast<float*>(bytes.data());
  const bool u8 = q->dtype() == DType::kU8;
  for (int64_t i = 0; i < shape.numel(); ++i) {
    const int64_t g = groups == 1 ? 0 : (i / inner) % groups;
    const int32_t v = u8 ? q->data<uint8_t>()[i] : q->data<int8_t>()[i];
    const int32_t z = zp == nullptr ? 0 : u8 ? zp->data<uint8_t>()[g] : zp->data<int8_t>()[g];
    out[i] = scale->data<float>()[g] * static_cast<float>(v - z);
  }
  auto data = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  Buffer buf;
  buf.dtype = DType::kF32;
  buf.shape = shape;
  buf.bytes = data->size();
  buf.constant = true;
  buf.host = data->data();
  buf.owned = std::move(data);
  b.define_buffer(node.output(0), std::move(buf));
  return true;
}

}  // namespace

bool lower_dequantize(Builder& b, const Node& node) {
  if (node.input(0)->constant_value() != nullptr) return lower_constant_dequantize(b, node);
  if (deferred_dq(b, node)) return true;  // lowered with its reader
  std::optional<QParams> p = qdq_params(node);
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  if (!p || !x->tensor_type().is_static() || !b.has_buffer(x)) return false;
  const std::optional<Elem> e = float_elem(y);
  const Shape shape = x->tensor_type().shape();
  if (!e || (shape.rank() != 4 && shape.rank() != 2)) return false;
  const int xi = b.stored_buffer(x);
  const Buffer& xb = b.buffer(xi);
  const Int8Layout xl = layout_of(xb, shape);
  const bool x_u8 = !xb.centered && p->type == DType::kU8;
  const int32_t x_off = xb.centered ? 0 : p->zp;
  const int yi = b.define(y, xl.nhwc);
  Int8Layout yl = xl;
  yl.stored_c = yl.c;
  const float scale = p->scale;
  add(b, node, "DequantizeLinear", {xi}, {yi}, [=, e = *e](Session& s) {
    return launch_dequantize8(ptr(s, xi), xl, x_u8, x_off, scale, e, ptr(s, yi), yl, s.stream);
  });
  return true;
}

}  // namespace kiln::compiler::cuda
