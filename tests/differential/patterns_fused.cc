// SPDX-License-Identifier: Apache-2.0
// Differential patterns of fused elementwise work: squeeze-and-excitation (the excitation step and
// the gate folded into weights), SiLU and hardswish passes, eltwise post-op tails, binary ops with
// broadcasting in blocked layouts, and pooling.
#include <algorithm>

#include "tests/differential/builders.h"
#include "tests/differential/case.h"

namespace kiln::differential {

namespace {

ConvSpec pointwise(int64_t out, bool bias = true) {
  ConvSpec s;
  s.out = out;
  s.kernel = {1, 1};
  s.bias = bias;
  return s;
}

ConvSpec same3x3(int64_t out) {
  ConvSpec s;
  s.out = out;
  s.pads = {1, 1, 1, 1};
  return s;
}

// x -> Conv -> SiLU -> [GlobalAveragePool -> Conv -> SiLU -> Conv -> Sigmoid] -> Mul -> Conv 1x1.
void gen_squeeze_excite(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t n = r.chance(0.85) ? 1 : 2;
  const int64_t c = r.chance(0.7) ? channels16(r, 96) : odd_channels(r);
  const int64_t h = r.range(1, 16);
  const int64_t w = r.chance(0.7) ? h : r.range(1, 16);
  const Act act = r.pick({Act::kSiLU, Act::kSiLU, Act::kRelu, Act::kHardSwish});
  const std::string x = g.input({n, r.pick<int64_t>({3, 8, 16}), h, w});
  const std::string y = activation(g, conv(g, x, same3x3(c)), act);
  std::string s;
  if (r.chance(0.8)) {
    s = g.node("GlobalAveragePool", {y});
  } else {
    s = g.node("ReduceMean", {y}, {ais("axes", {2, 3}), ai("keepdims", 1)});
  }
  const int64_t reduced = std::max<int64_t>(1, c / r.pick({4, 8, 16}));
  s = activation(g, conv(g, s, pointwise(reduced, r.chance(0.8))),
                 r.pick({Act::kSiLU, Act::kSiLU, Act::kRelu}));
  s = conv(g, s, pointwise(c, r.chance(0.8)));
  s = activation(g, s, r.pick({Act::kSigmoid, Act::kSigmoid, Act::kHardSigmoid}));
  maybe_output(g, s, 0.1);
  std::string z = r.chance(0.5) ? g.node("Mul", {y, s}) : g.node("Mul", {s, y});
  if (r.chance(0.85)) {
    // The gate folds into this Conv's weights when its outputs are few against the pixels.
    const int64_t out = r.chance(0.5) ? std::max<int64_t>(1, h * w / 2) : channels16(r, 64);
    z = conv(g, z, pointwise(std::min<int64_t>(out, 96), r.chance(0.7)));
    if (r.chance(0.3)) z = g.node("Add", {z, conv(g, y, pointwise(g.shape(z)[1]))});
  }
  g.output(z);
}

// SiLU and hardswish forms on plain tensors, after Conv (own SiLU pass, pooled in the same pass)
// and after MatMul.
void gen_silu(OnnxGraph& g) {
  Rng& r = g.rng();
  const Act act = r.pick({Act::kSiLU, Act::kSiLU, Act::kHardSwish, Act::kHardSiLU});
  const int mode = static_cast<int>(r.range(0, 2));
  std::string y;
  if (mode == 0) {
    Dims d;
    const int rank = static_cast<int>(r.range(1, 4));
    for (int i = 0; i < rank; ++i) d.push_back(r.range(1, 40));
    y = activation(g, g.input(d, 6.0f), act);
  } else if (mode == 1) {
    const int64_t n = r.chance(0.85) ? 1 : 2;
    const int64_t h = r.range(1, 20);
    const std::string x = g.input({n, odd_channels(r), h, h});
    const int64_t c = r.chance(0.7) ? channels16(r, 96) : odd_channels(r);
    y = activation(g, conv(g, x, same3x3(c)), act);
    if (r.chance(0.5)) {
      maybe_output(g, y, 0.3);
      y = g.node("GlobalAveragePool", {y});
    }
  } else {
    const int64_t k = r.range(1, 64);
    const std::string x = g.input({r.range(1, 4), r.range(1, 9), k});
    y = activation(g, g.node("MatMul", {x, g.weight({k, r.range(1, 64)}, 0.5f)}), act);
  }
  g.output(y);
}

// Chains of eltwise ops after a producer that can take them as post-ops (Conv, MatMul, binary,
// pooling) or after a graph input.
void gen_eltwise(OnnxGraph& g) {
  Rng& r = g.rng();
  const int producer = static_cast<int>(r.range(0, 4));
  std::string y;
  if (producer == 0) {
    const int64_t h = r.range(1, 12);
    y = conv(g, g.input({r.pick<int64_t>({1, 1, 2}), odd_channels(r), h, h}),
             same3x3(r.chance(0.5) ? channels16(r, 64) : odd_channels(r)));
  } else if (producer == 1) {
    const int64_t k = r.range(1, 48);
    y = g.node("MatMul", {g.input({r.range(1, 3), r.range(1, 9), k}), g.weight({k, 33}, 0.5f)});
  } else if (producer == 2) {
    const Dims d = {r.range(1, 2), r.range(1, 40), r.range(1, 8), r.range(1, 8)};
    y = g.node(r.pick<const char*>({"Add", "Mul", "Sub"}), {g.input(d), g.input(d)});
  } else if (producer == 3) {
    const int64_t h = r.range(2, 12);
    y = g.node("MaxPool", {g.input({1, r.range(1, 40), h, h})},
               {ais("kernel_shape", {2, 2}), ais("strides", {1, 1})});
  } else {
    Dims d;
    for (int i = static_cast<int>(r.range(1, 4)); i > 0; --i) d.push_back(r.range(1, 12));
    y = g.input(d, 2.0f);
  }
  const int64_t ops = r.range(1, 3);
  // Now and then one kind of op twice with other parameters (LeakyRelu then Relu, two Clips, two
  // scales), which a post-op chain must keep apart.
  const bool twice = r.chance(0.25);
  Act previous = Act::kNone;
  for (int64_t i = 0; i < ops; ++i) {
    Act act = random_act(r);
    if (twice && i > 0) act = previous == Act::kLeakyRelu ? Act::kRelu : previous;
    if (twice && i == 0) act = r.pick({Act::kLeakyRelu, Act::kClipRange, Act::kScale, Act::kElu});
    y = activation(g, y, act);
    previous = act;
    if (i + 1 < ops) maybe_output(g, y, 0.1);
  }
  g.output(y);
}

// Element-wise math oneDNN runs as eltwise primitives or post-ops: Pow by a constant exponent
// (squares of STFT magnitudes, cubes, square roots), Neg, Log, Reciprocal, after a Conv, a MatMul
// or an input.
void gen_eltwise_math(OnnxGraph& g) {
  Rng& r = g.rng();
  std::string y;
  switch (r.range(0, 2)) {
    case 0: {
      const int64_t h = r.range(1, 10);
      y = conv(g, g.input({1, odd_channels(r), h, h}), same3x3(odd_channels(r)));
      break;
    }
    case 1: {
      const int64_t k = r.range(1, 40);
      y = g.node("MatMul", {g.input({r.range(1, 3), k}), g.weight({k, 17}, 0.5f)});
      break;
    }
    default: y = g.input({r.range(1, 3), r.range(1, 200)}, 2.0f);
  }
  // Log, negative and fractional powers of |y| + 0.5: away from 0, where their slopes would turn
  // the Conv's or MatMul's rounding (summation order) into errors past any tolerance.
  auto positive = [&](const std::string& v) {
    return g.node("Add", {g.node("Abs", {v}), g.scalar(0.5f)});
  };
  for (int64_t i = r.range(1, 3); i > 0; --i) {
    switch (r.range(0, 5)) {
      case 0: y = g.node("Pow", {y, g.scalar(r.pick({2.0f, 3.0f, 1.0f}))}); break;
      case 1: y = g.node("Pow", {positive(y), g.scalar(r.pick({0.5f, 1.5f, -1.0f}))}); break;
      case 2: y = g.node("Neg", {y}); break;
      case 3: y = g.node("Log", {positive(y)}); break;
      case 4: y = g.node("Reciprocal", {positive(y)}); break;
      default: y = g.node("Relu", {y});
    }
    maybe_output(g, y, 0.1);
  }
  g.output(y);
}

// Binary ops with every broadcast a model writes, operands in either order, in blocked regions.
void gen_binary(OnnxGraph& g) {
  Rng& r = g.rng();
  const char* op = r.pick<const char*>({"Add", "Add", "Mul", "Mul", "Sub", "Div", "Max", "Min"});
  const int64_t n = r.pick({1, 1, 2});
  const int64_t c = r.chance(0.5) ? channels16(r, 64) : odd_channels(r);
  const int64_t h = r.range(1, 12);
  const int64_t w = r.chance(0.7) ? h : r.range(1, 12);
  std::string a;
  if (r.chance(0.6)) {
    a = conv(g, g.input({n, odd_channels(r), h, w}), same3x3(c));
  } else {
    a = g.input({n, c, h, w});
  }
  Dims other;
  switch (r.range(0, 7)) {
    case 0: other = {n, c, h, w}; break;
    case 1: other = {1, c, 1, 1}; break;
    case 2: other = {c, 1, 1}; break;
    case 3: other = {w}; break;
    case 4: other = {}; break;
    case 5: other = {n, 1, h, w}; break;
    case 6: other = {1, 1, 1, 1}; break;
    default: other = {1, c, h, w}; break;
  }
  std::string b;
  const bool same = other == Dims{n, c, h, w};
  const bool div = std::string(op) == "Div";
  bool away_from_zero = false;
  if (same && r.chance(0.5)) {
    b = conv(g, g.input({n, odd_channels(r), h, w}), same3x3(c));
  } else if (r.chance(0.5)) {
    b = div ? g.weight_in(other, 0.5f, 2.0f) : g.weight(other, 1.0f);
    away_from_zero = div;
  } else {
    b = g.input(other);
  }
  // A divisor away from zero: near it, any rounding of the divisor is amplified without bound.
  if (div && !away_from_zero) b = g.node("Add", {g.node("Abs", {b}), g.scalar(0.5f)});
  std::string y = r.chance(0.5) || div ? g.node(op, {a, b}) : g.node(op, {b, a});
  y = activation(g, y, random_act(r));
  if (r.chance(0.3)) y = conv(g, y, same3x3(16));
  g.output(y);
}

void gen_pool(OnnxGraph& g) {
  Rng& r = g.rng();
  const int rank = r.pick({4, 4, 4, 3, 5});
  const int64_t n = r.pick({1, 1, 2});
  const int64_t c = r.chance(0.5) ? channels16(r, 48) : odd_channels(r);
  Dims d = {n, c};
  for (int i = 2; i < rank; ++i) d.push_back(rank == 5 ? r.range(1, 8) : r.range(1, 20));
  std::string x;
  if (rank == 4 && r.chance(0.5)) {
    Dims in = d;
    in[1] = odd_channels(r);
    x = g.node("Relu", {conv(g, g.input(in), same3x3(c))});
    // A pointwise Conv an AveragePool reads (the pool_before_pointwise_conv pass swaps them).
    if (r.chance(0.4)) x = conv(g, x, pointwise(r.chance(0.5) ? c : odd_channels(r)));
  } else {
    x = g.input(d);
  }
  const char* op = r.pick<const char*>(
      {"MaxPool", "MaxPool", "AveragePool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"});
  std::string y;
  if (std::string(op).find("Global") == 0) {
    y = g.node(op, {x});
  } else {
    const size_t spatial = d.size() - 2;
    for (int attempt = 0; attempt < 30; ++attempt) {
      Dims k, s, dil, pads(2 * spatial, 0);
      bool ok = true;
      const bool dilate = std::string(op) == "MaxPool" && r.chance(0.15);
      for (size_t i = 0; i < spatial; ++i) {
        k.push_back(r.range(1, 4));
        s.push_back(r.range(1, 3));
        dil.push_back(dilate ? r.range(1, 2) : 1);
        const int64_t span = (k[i] - 1) * dil[i] + 1;
        pads[i] = r.chance(0.5) ? r.range(0, k[i] - 1) : 0;
        pads[i + spatial] = r.chance(0.6) ? pads[i] : r.range(0, k[i] - 1);
        if (d[i + 2] + pads[i] + pads[i + spatial] < span) ok = false;
      }
      if (!ok) continue;
      std::vector<Attr> attrs = {ais("kernel_shape", k), ais("strides", s)};
      const int pad_mode = static_cast<int>(r.range(0, 5));
      if (pad_mode == 0) {
        attrs.push_back(as("auto_pad", "SAME_UPPER"));
      } else if (pad_mode == 1) {
        attrs.push_back(as("auto_pad", "SAME_LOWER"));
      } else {
        attrs.push_back(ais("pads", pads));
      }
      if (dilate && pad_mode > 1) attrs.push_back(ais("dilations", dil));
      if (r.chance(0.3) && pad_mode > 1) attrs.push_back(ai("ceil_mode", 1));
      if (std::string(op) == "AveragePool" && r.chance(0.5)) {
        attrs.push_back(ai("count_include_pad", 1));
      }
      y = g.node(op, {x}, attrs);
      break;
    }
    if (y.empty()) y = g.node("GlobalAveragePool", {x});
  }
  y = activation(g, y, r.pick({Act::kNone, Act::kNone, random_act(r)}));
  g.output(y);
}

constexpr Pattern kPatterns[] = {
    {"squeeze_excite",
     "squeeze-and-excitation: pool, two 1x1 Convs on one pixel (the excitation step), Sigmoid "
     "gate folded into the next 1x1 Conv's weights",
     gen_squeeze_excite},
    {"silu", "SiLU/hardswish as exporters write them: alone, after Conv (own pass, pooled), MatMul",
     gen_silu},
    {"eltwise",
     "chains of eltwise ops (Clip with min/max inputs, HardSigmoid, GELU forms, scales) "
     "after Conv, MatMul, binary, pooling",
     gen_eltwise},
    {"eltwise_math", "Pow by a constant, Neg, Log, Reciprocal after a Conv, MatMul or input",
     gen_eltwise_math},
    {"binary", "Add/Sub/Mul/Div/Max/Min with every broadcast, either order, blocked operands",
     gen_binary},
    {"pool",
     "MaxPool/AveragePool (pads, ceil_mode, dilations, count_include_pad, auto_pad), "
     "global pools, 1-3 spatial dims",
     gen_pool},
};

}  // namespace

std::span<const Pattern> fused_patterns() {
  return kPatterns;
}

}  // namespace kiln::differential
