// SPDX-License-Identifier: Apache-2.0
// Differential patterns of tensor math: MatMul with packed weights (bias, activation, residual),
// Gemm, attention (batched MatMul over strided views, scale, mask, Softmax), Softmax/LogSoftmax
// over every axis and opset, LayerNorm (op and exporter form), reductions.
#include <algorithm>
#include <cmath>

#include "tests/differential/builders.h"
#include "tests/differential/case.h"

namespace kiln::differential {

namespace {

void gen_matmul(OnnxGraph& g) {
  Rng& r = g.rng();
  const int rank = static_cast<int>(r.range(2, 4));
  const int64_t k = r.pick<int64_t>({1, 3, 16, 17, 31, 64, 100});
  const int64_t n = r.pick<int64_t>({1, 5, 16, 33, 64, 96});
  Dims a;
  for (int i = 0; i + 1 < rank; ++i) a.push_back(r.range(1, i == 0 ? 3 : 9));
  a.push_back(k);
  std::string y = g.node("MatMul", {g.input(a), g.weight({k, n}, 1.0f / std::max<int64_t>(k, 1))});
  if (r.chance(0.6)) {
    const Dims bias = r.pick<Dims>({{n}, {1, n}, {n}});
    const std::string b = g.weight(bias, 0.5f);
    y = r.chance(0.5) ? g.node("Add", {y, b}) : g.node("Add", {b, y});
  }
  y = activation(g, y, random_act(r));
  if (r.chance(0.3)) {
    const std::string residual = g.input(g.shape(y));
    maybe_output(g, residual, 0.2);
    y = r.chance(0.5) ? g.node("Add", {y, residual}) : g.node("Add", {residual, y});
    y = activation(g, y, r.pick({Act::kNone, Act::kRelu}));
  }
  g.output(y);
}

void gen_gemm(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t m = r.range(1, 9);
  const int64_t k = r.pick<int64_t>({1, 7, 16, 33, 64});
  const int64_t n = r.pick<int64_t>({1, 5, 16, 40});
  const bool ta = r.chance(0.2);
  const bool tb = r.chance(0.5);
  std::string a = g.input(ta ? Dims{k, m} : Dims{m, k});
  if (r.chance(0.3)) {
    // From a Flatten of a Conv's output, as classifiers read it.
    const int64_t c = r.pick({4, 16});
    const std::string x = g.input({m, 3, 2, 2});
    ConvSpec s;
    s.out = c;
    s.kernel = {1, 1};
    a = g.node("Flatten", {conv(g, x, s)});
    if (ta) a = g.node("Transpose", {a}, {ais("perm", {1, 0})});
    const Dims ad = g.shape(a);
    const int64_t kk = ta ? ad[0] : ad[1];
    std::vector<std::string> inputs = {a, g.weight(tb ? Dims{n, kk} : Dims{kk, n}, 0.3f)};
    std::vector<Attr> attrs;
    if (ta) attrs.push_back(ai("transA", 1));
    if (tb) attrs.push_back(ai("transB", 1));
    inputs.push_back(g.weight({n}, 0.5f));
    g.output(activation(g, g.node("Gemm", inputs, attrs), random_act(r)));
    return;
  }
  std::vector<std::string> inputs = {a, r.chance(0.8) ? g.weight(tb ? Dims{n, k} : Dims{k, n}, 0.3f)
                                                      : g.input(tb ? Dims{n, k} : Dims{k, n})};
  switch (r.range(0, 4)) {
    case 0: break;
    case 1: inputs.push_back(g.weight({n}, 0.5f)); break;
    case 2: inputs.push_back(g.weight({m, n}, 0.5f)); break;
    case 3: inputs.push_back(g.weight({1, n}, 0.5f)); break;
    default: inputs.push_back(g.weight({}, 0.5f)); break;
  }
  std::vector<Attr> attrs;
  if (ta) attrs.push_back(ai("transA", 1));
  if (tb) attrs.push_back(ai("transB", 1));
  if (r.chance(0.3)) attrs.push_back(af("alpha", r.pick({0.5f, 2.0f})));
  if (r.chance(0.3)) attrs.push_back(af("beta", r.pick({0.5f, 0.0f, 2.0f})));
  g.output(activation(g, g.node("Gemm", inputs, attrs), random_act(r)));
}

// Self-attention as exporters write it, with the head split by Reshape/Transpose or Split.
void gen_attention(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t b = r.range(1, 2);
  const int64_t s = r.pick<int64_t>({1, 3, 7, 16, 17});
  const int64_t heads = r.pick<int64_t>({1, 2, 4});
  const int64_t dh = r.pick<int64_t>({4, 8, 16});
  const int64_t d = heads * dh;
  const std::string x = g.input({b, s, d});
  std::string q, k, v;
  const float wscale = 1.0f / static_cast<float>(d);
  if (r.chance(0.5)) {
    const std::string qkv = g.node("MatMul", {x, g.weight({d, 3 * d}, wscale * 3.0f)});
    const std::vector<std::string> parts =
        g.node_n("Split", {qkv, g.ints({d, d, d})}, 3, {ai("axis", 2)});
    q = parts[0];
    k = parts[1];
    v = parts[2];
  } else {
    q = g.node("MatMul", {x, g.weight({d, d}, wscale * 3.0f)});
    k = g.node("MatMul", {x, g.weight({d, d}, wscale * 3.0f)});
    v = g.node("MatMul", {x, g.weight({d, d}, wscale * 3.0f)});
  }
  auto heads_of = [&](const std::string& t, std::vector<int64_t> perm) {
    return g.node("Transpose", {g.node("Reshape", {t, g.ints({b, s, heads, dh})})},
                  {ais("perm", std::move(perm))});
  };
  q = heads_of(q, {0, 2, 1, 3});
  v = heads_of(v, {0, 2, 1, 3});
  std::string kt;
  if (r.chance(0.5)) {
    kt = heads_of(k, {0, 2, 3, 1});
  } else {
    kt = g.node("Transpose", {heads_of(k, {0, 2, 1, 3})}, {ais("perm", {0, 1, 3, 2})});
  }
  std::string scores = g.node("MatMul", {q, kt});
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  if (r.chance(0.5)) {
    scores = g.node("Mul", {scores, g.scalar(scale)});
  } else if (r.chance(0.5)) {
    scores = g.node("Div", {scores, g.scalar(std::sqrt(static_cast<float>(dh)))});
  }
  if (r.chance(0.6)) {
    const Dims mask = r.pick<Dims>({{b, 1, 1, s}, {s, s}, {1, 1, s, s}, {b, heads, s, s}, {s}});
    scores = g.node("Add", {scores, g.input(mask, 3.0f)});
  }
  maybe_output(g, scores, 0.1);
  std::string p = g.node("Softmax", {scores}, {ai("axis", -1)});
  std::string ctx = g.node("MatMul", {p, v});
  ctx = g.node("Transpose", {ctx}, {ais("perm", {0, 2, 1, 3})});
  ctx = g.node("Reshape", {ctx, g.ints({b, s, d})});
  std::string y = g.node("MatMul", {ctx, g.weight({d, d}, wscale * 3.0f)});
  y = g.node("Add", {y, g.weight({d}, 0.2f)});
  if (r.chance(0.5)) y = g.node("Add", {y, x});
  g.output(y);
}

// Softmax, LogSoftmax and Hardmax over every axis of ranks 1-4, under opset 11 (coerced to 2-D)
// and 13 (one axis), read from a graph input, a Conv's (blocked) output or a transposed view.
void gen_softmax(OnnxGraph& g) {
  Rng& r = g.rng();
  const bool old = r.chance(0.35);
  if (old) g.set_opset(11);
  const char* op = r.pick<const char*>({"Softmax", "Softmax", "Softmax", "LogSoftmax"});
  const int source = static_cast<int>(r.range(0, 3));
  std::string x;
  if (source == 0 || old) {
    const int rank = static_cast<int>(r.range(1, 4));
    Dims d;
    for (int i = 0; i < rank; ++i) d.push_back(r.pick<int64_t>({1, 2, 3, 5, 7, 16, 17}));
    x = g.input(d, r.pick({1.0f, 5.0f, 30.0f}));
  } else if (source == 1) {
    const int64_t h = r.range(1, 8);
    ConvSpec s;
    s.out = r.chance(0.5) ? 16 * r.range(1, 3) : odd_channels(r);
    s.pads = {1, 1, 1, 1};
    x = conv(g, g.input({r.pick<int64_t>({1, 1, 2}), odd_channels(r), h, h}), s);
  } else {
    const Dims d = {r.range(1, 3), r.range(1, 9), r.range(1, 9), r.range(1, 5)};
    std::vector<int64_t> perm = {0, 1, 2, 3};
    for (int i = 3; i > 0; --i)
      std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(r.range(0, i))]);
    x = g.node("Transpose", {g.input(d, 4.0f)}, {ais("perm", perm)});
    if (r.chance(0.3)) x = g.node("Relu", {x});
  }
  const auto rank = static_cast<int64_t>(g.shape(x).size());
  const int64_t axis = r.range(-rank, rank - 1);
  std::string y = g.node(op, {x}, {ai("axis", axis)});
  if (r.chance(0.3)) y = g.node("Mul", {y, g.scalar(2.0f)});
  g.output(y);
}

// LayerNormalization (opset 17) over trailing axes, or the exporter form the layer_norm_fusion
// pass finds (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add).
void gen_layernorm(OnnxGraph& g) {
  Rng& r = g.rng();
  const int rank = static_cast<int>(r.range(2, 4));
  Dims d;
  for (int i = 0; i < rank; ++i) d.push_back(r.pick<int64_t>({1, 2, 3, 7, 16, 33, 64}));
  std::string x = g.input(d);
  // An offset mean, as activations have.
  x = g.node("Add", {x, g.scalar(r.pick({0.0f, 1.0f, 3.0f}))});
  if (r.chance(0.4)) {
    const int64_t k = d.back();
    x = g.node("MatMul", {x, g.weight({k, k}, 1.0f / static_cast<float>(k))});
  }
  const int64_t c = d.back();
  std::string y;
  if (r.chance(0.5)) {
    const int64_t axis = r.chance(0.7) ? -1 : r.range(1, rank - 1);
    const int64_t first = axis < 0 ? axis + rank : axis;
    Dims nd(d.begin() + first, d.end());
    std::vector<std::string> inputs = {x, g.weight_in(nd, 0.5f, 1.5f)};
    if (r.chance(0.7)) inputs.push_back(g.weight(nd, 0.5f));
    y = g.node("LayerNormalization", inputs,
               {ai("axis", axis), af("epsilon", r.pick({1e-5f, 1e-12f, 1e-3f}))});
  } else {
    const std::string mean = g.node("ReduceMean", {x}, {ais("axes", {-1}), ai("keepdims", 1)});
    const std::string centered = g.node("Sub", {x, mean});
    const std::string var = g.node("ReduceMean", {g.node("Pow", {centered, g.scalar(2.0f)})},
                                   {ais("axes", {-1}), ai("keepdims", 1)});
    const std::string sd = g.node("Sqrt", {g.node("Add", {var, g.scalar(1e-5f)})});
    y = g.node("Div", {centered, sd});
    y = g.node("Mul", {y, g.weight_in({c}, 0.5f, 1.5f)});
    if (r.chance(0.8)) y = g.node("Add", {y, g.weight({c}, 0.5f)});
  }
  y = activation(g, y, r.pick({Act::kNone, Act::kNone, random_act(r)}));
  g.output(y);
}

void gen_reduce(OnnxGraph& g) {
  Rng& r = g.rng();
  const char* op =
      r.pick<const char*>({"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL2",
                           "ReduceL1", "ReduceSumSquare", "ReduceLogSumExp", "ReduceProd"});
  const int rank = static_cast<int>(r.range(1, 4));
  Dims d;
  for (int i = 0; i < rank; ++i) d.push_back(r.range(1, 9));
  std::string x;
  if (rank == 4 && r.chance(0.5)) {
    Dims in = d;
    in[1] = odd_channels(r);
    ConvSpec s;
    s.out = d[1];
    s.pads = {1, 1, 1, 1};
    x = conv(g, g.input(in), s);
  } else {
    x = g.input(d);
  }
  std::vector<Attr> attrs = {ai("keepdims", r.chance(0.5) ? 1 : 0)};
  std::vector<int64_t> axes;
  for (int i = 0; i < rank; ++i) {
    if (r.chance(0.4)) axes.push_back(r.chance(0.5) ? i : i - rank);
  }
  std::vector<std::string> inputs = {x};
  if (!axes.empty()) {
    // ReduceSum takes its axes as an input from opset 13, the others from 18.
    if (std::string(op) == "ReduceSum") {
      inputs.push_back(g.ints(axes));
    } else {
      attrs.push_back(ais("axes", axes));
    }
  }
  std::string y = g.node(op, inputs, attrs);
  g.output(activation(g, y, r.pick({Act::kNone, Act::kNone, Act::kRelu})));
}

constexpr Pattern kPatterns[] = {
    {"matmul",
     "MatMul by constant weights (ranks 2-4), bias Add either side, activation, "
     "residual Add (sum post-op)",
     gen_matmul},
    {"gemm", "Gemm with transA/transB/alpha/beta and every C shape, after Flatten of a Conv",
     gen_gemm},
    {"attention",
     "self-attention: QKV MatMul or Split, Reshape/Transpose heads (strided views), "
     "Q.K^T, scale, mask Add, Softmax, .V, Transpose back, projection",
     gen_attention},
    {"softmax",
     "Softmax/LogSoftmax over every axis, ranks 1-4, opset 11 and 13, from plain, "
     "blocked and transposed inputs",
     gen_softmax},
    {"layernorm",
     "LayerNormalization over trailing axes, and the exporter form the fusion pass "
     "turns into one",
     gen_layernorm},
    {"reduce", "Reduce* over random axes with keepdims, from plain and blocked inputs", gen_reduce},
};

}  // namespace

std::span<const Pattern> tensor_patterns() {
  return kPatterns;
}

}  // namespace kiln::differential
