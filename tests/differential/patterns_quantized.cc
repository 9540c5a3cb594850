// SPDX-License-Identifier: Apache-2.0
// Differential patterns of 8-bit models: QDQ regions (Q/DQ around Conv, MatMul, Linear, Gemm and
// residual Adds, which qdq_fusion turns into integer ops), the integer ops themselves
// (QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger) and dynamic quantization.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tests/differential/builders.h"
#include "tests/differential/case.h"

namespace kiln::differential {

namespace {

// A tensor of zeros (Tensor's constructor leaves its elements unset).
Tensor zeros(DType dtype, Shape shape) {
  Tensor t(dtype, std::move(shape));
  std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

// Per-tensor quantization of values in [lo, hi] to u8 (asymmetric) or i8 (symmetric).
struct QParams {
  std::string scale;
  std::string zero_point;
  float scale_value = 1.0f;
  int64_t zero_value = 0;
};

QParams qparams(OnnxGraph& g, float lo, float hi, bool u8) {
  QParams q;
  if (u8) {
    q.scale_value = (hi - lo) / 255.0f;
    q.zero_value = std::clamp<int64_t>(std::lround(-lo / q.scale_value), 0, 255);
    Tensor z(DType::kU8, Shape{});
    z.data<uint8_t>()[0] = static_cast<uint8_t>(q.zero_value);
    q.zero_point = g.tensor(z);
  } else {
    q.scale_value = std::max(std::abs(lo), std::abs(hi)) / 127.0f;
    q.zero_point = g.tensor(zeros(DType::kI8, Shape{}));
  }
  q.scale = g.scalar(q.scale_value);
  return q;
}

std::string quantize(OnnxGraph& g, const std::string& x, const QParams& q) {
  return g.node("QuantizeLinear", {x, q.scale, q.zero_point});
}

std::string dequantize(OnnxGraph& g, const std::string& x, const QParams& q) {
  return g.node("DequantizeLinear", {x, q.scale, q.zero_point});
}

// Q then DQ: an f32 value as an 8-bit region reads it.
std::string fake_quant(OnnxGraph& g, const std::string& x, const QParams& q) {
  return dequantize(g, quantize(g, x, q), q);
}

// Random int8 weights of `dims` in [-127, 127].
Tensor int8_values(Rng& r, const Dims& dims) {
  Tensor w(DType::kI8, Shape(dims));
  for (int8_t& v : w.span<int8_t>()) v = static_cast<int8_t>(r.range(-127, 127));
  return w;
}

// Random u8 values of `dims`.
Tensor u8_values(Rng& r, const Dims& dims) {
  Tensor w(DType::kU8, Shape(dims));
  for (uint8_t& v : w.span<uint8_t>()) v = static_cast<uint8_t>(r.range(0, 255));
  return w;
}

// Weights of `dims` as exporters write them: int8 with a scale per slice along `axis` (or one
// scale), zero points 0, and their DequantizeLinear. `scales` gets the scales.
std::string quantized_weights(OnnxGraph& g, const Dims& dims, int64_t axis, bool per_channel,
                              float bound, std::vector<float>* scales) {
  Rng& r = g.rng();
  const std::string w = g.tensor(int8_values(r, dims));
  const int64_t n = per_channel ? dims[static_cast<size_t>(axis)] : 1;
  scales->clear();
  for (int64_t i = 0; i < n; ++i) scales->push_back(bound / 127.0f * r.uniform(0.5f, 1.5f));
  const Tensor zero = zeros(DType::kI8, per_channel ? Shape{n} : Shape{});
  const std::string s = per_channel ? g.floats({n}, *scales) : g.scalar((*scales)[0]);
  std::vector<Attr> attrs;
  if (per_channel) attrs.push_back(ai("axis", axis));
  return g.node("DequantizeLinear", {w, s, g.tensor(zero)}, attrs);
}

// Q(Conv(DQ(x), DQ(w), bias)) with its Relu or Clip, as PyTorch FX and ORT quantization write it.
void gen_qdq_conv(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t n = r.chance(0.8) ? 1 : 2;
  const int64_t cin = r.chance(0.5) ? 16 * r.range(1, 3) : odd_channels(r);
  const int64_t h = r.range(1, 12);
  const bool u8 = r.chance(0.7);
  std::string x = fake_quant(g, g.input({n, cin, h, h}), qparams(g, -1.0f, 1.0f, u8));
  const int64_t layers = r.range(1, 2);
  for (int64_t l = 0; l < layers; ++l) {
    const int64_t c = g.shape(x)[1];
    const int64_t k = r.pick({1, 3, 3});
    const bool depthwise = k == 3 && r.chance(0.2);
    const int64_t out = depthwise ? c : (r.chance(0.5) ? 16 * r.range(1, 3) : odd_channels(r));
    const int64_t group = depthwise ? c : 1;
    std::vector<float> ws;
    const std::string w =
        quantized_weights(g, {out, c / group, k, k}, 0, r.chance(0.7),
                          std::sqrt(3.0f / static_cast<float>(c / group * k * k)), &ws);
    std::vector<std::string> inputs = {x, w};
    if (r.chance(0.7)) inputs.push_back(g.weight({out}, 0.3f));
    const int64_t stride = r.pick({1, 1, 2});
    std::vector<Attr> attrs = {ais("kernel_shape", {k, k}), ais("strides", {stride, stride}),
                               ais("pads", {k / 2, k / 2, k / 2, k / 2})};
    if (group != 1) attrs.push_back(ai("group", group));
    std::string y = g.node("Conv", inputs, attrs);
    const int act = static_cast<int>(r.range(0, 2));
    if (act == 1) y = g.node("Relu", {y});
    if (act == 2) y = g.node("Clip", {y, g.scalar(0.0f), g.scalar(6.0f)});
    const float lo = act == 0 ? -3.0f : 0.0f;
    x = fake_quant(g, y, qparams(g, lo, act == 2 ? 6.0f : 3.0f, act != 0 || u8));
  }
  g.output(x);
}

// Q(MatMul(DQ(a), DQ(w))), a Linear (MatMul by Transpose(DQ(w)), bias Add) or a Gemm.
void gen_qdq_matmul(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t k = r.pick<int64_t>({8, 16, 33, 64});
  const int64_t nout = r.pick<int64_t>({4, 16, 40});
  const int rank = static_cast<int>(r.range(2, 3));
  Dims ad = rank == 2 ? Dims{r.range(1, 9), k} : Dims{r.range(1, 2), r.range(1, 7), k};
  const bool u8 = r.chance(0.6);
  const std::string a = fake_quant(g, g.input(ad), qparams(g, -1.0f, 1.0f, u8));
  const float bound = std::sqrt(3.0f / static_cast<float>(k));
  std::vector<float> ws;
  std::string y;
  switch (r.range(0, 2)) {
    case 0:
      y = g.node("MatMul", {a, quantized_weights(g, {k, nout}, 1, r.chance(0.5), bound, &ws)});
      break;
    case 1: {
      const std::string w = quantized_weights(g, {nout, k}, 0, r.chance(0.6), bound, &ws);
      y = g.node("MatMul", {a, g.node("Transpose", {w}, {ais("perm", {1, 0})})});
      if (r.chance(0.7)) y = g.node("Add", {y, g.weight({nout}, 0.3f)});
      break;
    }
    default: {
      if (rank == 3) {
        y = g.node("MatMul", {a, quantized_weights(g, {k, nout}, 1, false, bound, &ws)});
        break;
      }
      const std::string w = quantized_weights(g, {nout, k}, 0, r.chance(0.6), bound, &ws);
      y = g.node("Gemm", {a, w, g.weight({nout}, 0.3f)}, {ai("transB", 1)});
      break;
    }
  }
  if (r.chance(0.3)) y = g.node("Relu", {y});
  g.output(fake_quant(g, y, qparams(g, -3.0f, 3.0f, u8)));
}

// The residual Add of an int8 network: Q(Add(DQ(a), DQ(b))) with a Relu before the Q or not.
void gen_qdq_add(OnnxGraph& g) {
  Rng& r = g.rng();
  const Dims d = {r.chance(0.8) ? 1 : 2, r.chance(0.5) ? 16 : odd_channels(r), r.range(1, 9),
                  r.range(1, 9)};
  const bool u8 = r.chance(0.7);
  const std::string a = fake_quant(g, g.input(d), qparams(g, -1.0f, 1.0f, u8));
  const std::string b = fake_quant(g, g.input(d, 2.0f), qparams(g, -2.0f, 2.0f, u8));
  std::string y = g.node("Add", {a, b});
  const bool relu = r.chance(0.4);
  if (relu) y = g.node("Relu", {y});
  g.output(fake_quant(g, y, qparams(g, relu ? 0.0f : -3.0f, 3.0f, u8 || relu)));
}

// The integer ops as ONNX defines them: QLinearConv, QLinearMatMul (8-bit out), ConvInteger,
// MatMulInteger (int32 out), and DynamicQuantizeLinear feeding MatMulInteger.
void gen_int8_ops(OnnxGraph& g) {
  Rng& r = g.rng();
  switch (r.range(0, 4)) {
    case 0: {
      const int64_t cin = r.pick<int64_t>({3, 16, 17});
      const int64_t out = r.pick<int64_t>({8, 16, 32});
      const int64_t h = r.range(1, 9);
      const int64_t k = r.pick({1, 3});
      const QParams xq = qparams(g, -1.0f, 1.0f, true);
      const QParams yq = qparams(g, -4.0f, 4.0f, true);
      std::vector<float> ws;
      for (int64_t i = 0; i < out; ++i) ws.push_back(r.uniform(0.002f, 0.01f));
      std::vector<std::string> inputs = {g.input(u8_values(r, {1, cin, h, h})),
                                         xq.scale,
                                         xq.zero_point,
                                         g.tensor(int8_values(r, {out, cin, k, k})),
                                         g.floats({out}, ws),
                                         g.tensor(zeros(DType::kI8, Shape{out})),
                                         yq.scale,
                                         yq.zero_point};
      if (r.chance(0.6)) {
        Tensor bias(DType::kI32, Shape{out});
        for (int32_t& v : bias.span<int32_t>()) v = static_cast<int32_t>(r.range(-2000, 2000));
        inputs.push_back(g.tensor(bias));
      }
      const std::string y =
          g.node("QLinearConv", inputs,
                 {ais("kernel_shape", {k, k}), ais("pads", {k / 2, k / 2, k / 2, k / 2})});
      g.output(dequantize(g, y, yq));
      return;
    }
    case 1: {
      const int64_t k = r.pick<int64_t>({4, 16, 31});
      const int64_t n = r.pick<int64_t>({3, 16});
      const QParams aq = qparams(g, -1.0f, 1.0f, true);
      const QParams bq = qparams(g, -1.0f, 1.0f, false);
      const QParams yq = qparams(g, -8.0f, 8.0f, true);
      const std::string y =
          g.node("QLinearMatMul", {g.input(u8_values(r, {r.range(1, 7), k})), aq.scale,
                                   aq.zero_point, g.tensor(int8_values(r, {k, n})), bq.scale,
                                   bq.zero_point, yq.scale, yq.zero_point});
      g.output(dequantize(g, y, yq));
      return;
    }
    case 2: {
      const int64_t cin = r.pick<int64_t>({3, 16});
      const int64_t h = r.range(1, 8);
      Tensor zp(DType::kU8, Shape{});
      zp.data<uint8_t>()[0] = static_cast<uint8_t>(r.range(0, 255));
      g.output(
          g.node("ConvInteger",
                 {g.input(u8_values(r, {1, cin, h, h})),
                  g.tensor(int8_values(r, {r.pick<int64_t>({8, 16}), cin, 3, 3})), g.tensor(zp)},
                 {ais("kernel_shape", {3, 3}), ais("pads", {1, 1, 1, 1})}));
      return;
    }
    case 3: {
      const int64_t k = r.pick<int64_t>({4, 16, 31});
      Tensor zp(DType::kU8, Shape{});
      zp.data<uint8_t>()[0] = static_cast<uint8_t>(r.range(0, 255));
      g.output(g.node("MatMulInteger",
                      {g.input(u8_values(r, {r.range(1, 7), k})),
                       g.tensor(int8_values(r, {k, r.pick<int64_t>({3, 16})})), g.tensor(zp)}));
      return;
    }
    default: {
      // Dynamic quantization (ORT's quantize_dynamic): the activation quantized at run time.
      const int64_t k = r.pick<int64_t>({8, 16, 33});
      const int64_t n = r.pick<int64_t>({4, 16});
      const std::string x = g.input({r.range(1, 2), r.range(1, 7), k});
      const std::vector<std::string> q = g.node_n("DynamicQuantizeLinear", {x}, 3);
      const float w_scale = 0.01f;
      std::string y = g.node("MatMulInteger", {q[0], g.tensor(int8_values(r, {k, n})), q[2]});
      y = g.node("Cast", {y}, {ai("to", 1)});
      y = g.node("Mul", {y, g.node("Mul", {q[1], g.scalar(w_scale)})});
      g.output(g.node("Add", {y, g.weight({n}, 0.3f)}));
      return;
    }
  }
}

constexpr bool kQuantized = true;

constexpr Pattern kPatterns[] = {
    {"qdq_conv",
     "Q/DQ around Conv (per-channel weights, bias, Relu/Clip, depthwise), as "
     "qdq_fusion turns into QLinearConv on oneDNN int8",
     gen_qdq_conv, kQuantized},
    {"qdq_matmul", "Q/DQ around MatMul, Linear (Transpose of DQ weights, bias) and Gemm",
     gen_qdq_matmul, kQuantized},
    {"qdq_add", "the int8 residual Add: Q(Add(DQ(a), DQ(b))), with Relu", gen_qdq_add, kQuantized},
    {"int8_ops", "QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger, DynamicQuantizeLinear",
     gen_int8_ops, kQuantized},
};

}  // namespace

std::span<const Pattern> quantized_patterns() {
  return kPatterns;
}

}  // namespace kiln::differential
