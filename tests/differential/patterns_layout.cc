// SPDX-License-Identifier: Apache-2.0
// Differential patterns of data movement around blocked regions: Concat of blocked, plain and
// transposed pieces (distributed over pools and Convs, deferred into BatchNormalization, copied
// as blocks), Transpose/Reshape/Flatten around Convs (views and reorders), Slice, Split, Pad and
// Resize.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "tests/differential/builders.h"
#include "tests/differential/case.h"

namespace kiln::differential {

namespace {

ConvSpec conv_spec(int64_t out, int64_t k) {
  ConvSpec s;
  s.out = out;
  s.kernel = {k, k};
  s.pads = {k / 2, k / 2, k / 2, k / 2};
  return s;
}

// A 4-D value of `c` channels over h x w: a Conv's output (blocked in blocked programs), a graph
// input (plain), or a Transpose of an NHWC input (a strided view).
std::string piece(OnnxGraph& g, int64_t n, int64_t c, int64_t h, int64_t w) {
  Rng& r = g.rng();
  switch (r.range(0, 5)) {
    case 0: return g.input({n, c, h, w});
    case 1: return g.node("Transpose", {g.input({n, h, w, c})}, {ais("perm", {0, 3, 1, 2})});
    case 2: return g.node("Relu", {conv(g, g.input({n, odd_channels(r), h, w}), conv_spec(c, 1))});
    default: return conv(g, g.input({n, odd_channels(r), h, w}), conv_spec(c, 3));
  }
}

void gen_concat(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t n = r.chance(0.75) ? 1 : 2;
  const int64_t h = r.range(1, 12) * (r.chance(0.5) ? 2 : 1);
  const int64_t w = r.chance(0.7) ? h : r.range(1, 12) * 2;
  const bool blocks = r.chance(0.5);  // whole blocks of 16 channels in every piece
  const int64_t count = r.range(1, 4);
  std::vector<std::string> pieces;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t c = blocks ? 16 * r.range(1, 3) : odd_channels(r);
    pieces.push_back(piece(g, n, c, h, w));
  }
  const int64_t axis = r.chance(0.8) ? r.pick<int64_t>({1, -3}) : r.pick<int64_t>({0, 2, 3, -1});
  if (axis != 1 && axis != -3) {
    // Other axes: every piece must agree on the channels.
    const int64_t c = g.shape(pieces[0])[1];
    for (std::string& p : pieces) {
      if (g.shape(p)[1] != c) p = conv(g, p, conv_spec(c, 1));
    }
  }
  for (const std::string& p : pieces) maybe_output(g, p, 0.1);
  std::string y = g.node("Concat", pieces, {ai("axis", axis)});
  const Dims yd = g.shape(y);
  switch (r.range(0, 6)) {
    case 0: break;
    case 1: y = g.node("Relu", {y}); break;
    case 2:
      if (yd[2] >= 2 && yd[3] >= 2) {
        y = g.node(r.pick<const char*>({"MaxPool", "AveragePool"}), {y},
                   {ais("kernel_shape", {2, 2}), ais("strides", {2, 2})});
      }
      break;
    case 3: {
      // A Conv over the Concat (distributed over the pieces when they are wide enough).
      ConvSpec s = conv_spec(std::max<int64_t>(1, yd[1] / r.pick({1, 2})), r.pick({1, 3}));
      s.bias = r.chance(0.5);
      y = activation(g, conv(g, y, s), r.pick({Act::kNone, Act::kRelu}));
      break;
    }
    case 4:
    case 5: {
      // Inference BatchNormalization readers (DenseNet: the Concat is deferred into them).
      const int64_t c = yd[1];
      const int readers = static_cast<int>(r.range(1, 2));
      std::vector<std::string> outs;
      for (int i = 0; i < readers; ++i) {
        std::string b =
            g.node("BatchNormalization", {y, g.weight_in({c}, 0.5f, 1.5f), g.weight({c}, 0.5f),
                                          g.weight({c}, 0.5f), g.weight_in({c}, 0.2f, 2.0f)});
        if (r.chance(0.7)) b = g.node("Relu", {b});
        // DenseNet's transition (Conv 1x1, then a 2x2 AveragePool the pool_before_pointwise_conv
        // pass moves before it), or the pool first.
        const bool conv_first = r.chance(0.5);
        if (conv_first && r.chance(0.7)) b = conv(g, b, conv_spec(16, 1));
        if (r.chance(0.5) && yd[2] % 2 == 0 && yd[3] % 2 == 0) {
          b = g.node("AveragePool", {b}, {ais("kernel_shape", {2, 2}), ais("strides", {2, 2})});
        }
        if (!conv_first && r.chance(0.5)) b = conv(g, b, conv_spec(16, 1));
        outs.push_back(b);
      }
      for (size_t i = 1; i < outs.size(); ++i) g.output(outs[i]);
      y = outs[0];
      break;
    }
    default: y = conv(g, y, conv_spec(16, 3)); break;
  }
  g.output(y);
}

// Transpose, Reshape, Flatten, Squeeze and Unsqueeze between Convs: layouts in and out of blocked
// regions (NHWC models, flattening classifiers).
void gen_transpose(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t n = r.pick({1, 1, 2});
  const int64_t h = r.range(1, 10);
  const int64_t w = r.chance(0.7) ? h : r.range(1, 10);
  const int64_t c = r.chance(0.5) ? 16 * r.range(1, 2) : odd_channels(r);
  std::string x;
  if (r.chance(0.4)) {
    // An NHWC input, as TensorFlow exports give.
    x = g.node("Transpose", {g.input({n, h, w, odd_channels(r)})}, {ais("perm", {0, 3, 1, 2})});
  } else {
    x = g.input({n, odd_channels(r), h, w});
  }
  std::string y = conv(g, x, conv_spec(c, 3));
  if (r.chance(0.5)) y = g.node("Relu", {y});
  switch (r.range(0, 5)) {
    case 0: {
      std::vector<int64_t> perm = {0, 1, 2, 3};
      for (int i = 3; i > 0; --i) {
        std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(r.range(0, i))]);
      }
      y = g.node("Transpose", {y}, {ais("perm", perm)});
      if (r.chance(0.5)) y = activation(g, y, random_act(r));
      if (r.chance(0.5) && perm == std::vector<int64_t>{0, 2, 3, 1}) {
        // Back to NCHW and into another Conv.
        y = conv(g, g.node("Transpose", {y}, {ais("perm", {0, 3, 1, 2})}), conv_spec(16, 1));
      }
      break;
    }
    case 1: {
      y = g.node("Flatten", {y}, {ai("axis", r.range(1, 3))});
      const Dims d = g.shape(y);
      y = g.node("MatMul", {y, g.weight({d[1], 10}, 0.2f)});
      break;
    }
    case 2: {
      const Dims d = g.shape(y);
      y = g.node("Reshape", {y, g.ints({d[0], d[1], d[2] * d[3]})});
      if (r.chance(0.5)) y = g.node("Transpose", {y}, {ais("perm", {0, 2, 1})});
      if (r.chance(0.5)) y = g.node("Softmax", {y}, {ai("axis", -1)});
      break;
    }
    case 3: {
      const int64_t axis = r.pick<int64_t>({0, 2, 4});
      y = g.node("Unsqueeze", {y, g.ints({axis})});
      if (r.chance(0.5)) y = g.node("Sigmoid", {y});
      y = g.node("Squeeze", {y, g.ints({r.chance(0.5) ? axis : axis - 5})});
      break;
    }
    case 4: {
      const Dims d = g.shape(y);
      // Channels regrouped (ShuffleNet's channel shuffle) when they split in two.
      if (d[1] % 2 == 0) {
        y = g.node("Reshape", {y, g.ints({d[0], 2, d[1] / 2, d[2], d[3]})});
        y = g.node("Transpose", {y}, {ais("perm", {0, 2, 1, 3, 4})});
        y = g.node("Reshape", {y, g.ints({d[0], d[1], d[2], d[3]})});
        y = conv(g, y, conv_spec(16, 1));
      } else {
        y = g.node("Transpose", {y}, {ais("perm", {0, 2, 3, 1})});
      }
      break;
    }
    default: {
      const Dims d = g.shape(y);
      y = g.node("Reshape", {y, g.ints({-1})});
      y = g.node("Reshape", {y, g.ints(d)});
      y = conv(g, y, conv_spec(8, 3));
      break;
    }
  }
  g.output(y);
}

// Slice (any starts, ends, axes, steps), Split and Pad of blocked and plain values.
void gen_slice(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t n = r.pick({1, 1, 2});
  const int64_t h = r.range(2, 12);
  const int64_t c = r.chance(0.5) ? 16 * r.range(1, 3) : odd_channels(r);
  std::string x;
  if (r.chance(0.6)) {
    x = conv(g, g.input({n, odd_channels(r), h, h}), conv_spec(c, 3));
  } else {
    x = g.input({n, c, h, h});
  }
  const Dims d = g.shape(x);
  std::string y;
  switch (r.range(0, 2)) {
    case 0: {
      std::vector<int64_t> starts, ends, axes, steps;
      for (int64_t a = 0; a < 4; ++a) {
        if (!r.chance(0.5) && !(a == 3 && axes.empty())) continue;
        const int64_t dim = d[static_cast<size_t>(a)];
        int64_t step = r.pick<int64_t>({1, 1, 1, 2, 3, -1, -2});
        int64_t s = r.range(-dim, dim - 1);
        int64_t e = r.range(-dim, dim);
        if (step > 0 && (s < 0 ? s + dim : s) >= (e < 0 ? e + dim : e)) std::swap(s, e);
        if (step < 0) {
          // Backwards from s to past e (ends below -dim mean "through index 0").
          s = r.range(0, dim - 1);
          e = s == 0 || r.chance(0.3) ? -dim - 1 : r.range(0, s - 1);
        }
        if (step > 0 && (s < 0 ? s + dim : s) >= (e < 0 ? e + dim : e)) {
          s = 0;
          e = dim;
        }
        starts.push_back(s);
        ends.push_back(r.chance(0.1) && step > 0 ? int64_t{1} << 40 : e);
        axes.push_back(r.chance(0.5) ? a : a - 4);
        steps.push_back(step);
      }
      y = g.node("Slice", {x, g.ints(starts), g.ints(ends), g.ints(axes), g.ints(steps)});
      break;
    }
    case 1: {
      const int64_t axis = r.range(1, 3);
      const int64_t dim = d[static_cast<size_t>(axis)];
      std::vector<int64_t> sizes;
      for (int64_t left = dim; left > 0;) {
        const int64_t s = r.range(1, left);
        sizes.push_back(s);
        left -= s;
      }
      const std::vector<std::string> parts =
          g.node_n("Split", {x, g.ints(sizes)}, static_cast<int>(sizes.size()), {ai("axis", axis)});
      for (size_t i = 1; i < parts.size(); ++i) {
        g.output(r.chance(0.5) ? g.node("Relu", {parts[i]}) : parts[i]);
      }
      y = parts[0];
      break;
    }
    default: {
      std::vector<int64_t> pads(8, 0);
      const bool zero = r.chance(0.3);
      for (int64_t a = 2; a < 4 && !zero; ++a) {
        pads[static_cast<size_t>(a)] = r.range(0, 2);
        pads[static_cast<size_t>(a + 4)] = r.range(0, 2);
      }
      const char* mode = r.pick<const char*>({"constant", "constant", "reflect", "edge"});
      std::vector<std::string> inputs = {x, g.ints(pads)};
      if (std::string(mode) == "constant" && r.chance(0.5)) inputs.push_back(g.scalar(0.5f));
      if (std::string(mode) == "reflect") {
        for (int64_t a = 2; a < 4; ++a) {
          const int64_t dim = d[static_cast<size_t>(a)];
          pads[static_cast<size_t>(a)] = std::min(pads[static_cast<size_t>(a)], dim - 1);
          pads[static_cast<size_t>(a + 4)] = std::min(pads[static_cast<size_t>(a + 4)], dim - 1);
        }
        inputs[1] = g.ints(pads);
      }
      y = g.node("Pad", inputs, {as("mode", mode)});
      if (r.chance(0.5)) {
        y = g.node("AveragePool", {y}, {ais("kernel_shape", {2, 2}), ais("strides", {1, 1})});
      }
      break;
    }
  }
  if (r.chance(0.4) && g.shape(y)[1] > 0) y = activation(g, y, random_act(r));
  g.output(y);
}

void gen_resize(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t n = r.pick({1, 1, 2});
  const int64_t h = r.range(1, 9);
  const int64_t w = r.chance(0.7) ? h : r.range(1, 9);
  const int64_t c = r.chance(0.5) ? 16 : odd_channels(r);
  std::string x = conv(g, g.input({n, odd_channels(r), h, w}), conv_spec(c, 3));
  const char* mode = r.pick<const char*>({"nearest", "nearest", "linear", "cubic"});
  std::vector<Attr> attrs = {as("mode", mode)};
  const char* transform =
      r.pick<const char*>({"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"});
  attrs.push_back(as("coordinate_transformation_mode", transform));
  if (std::string(mode) == "nearest") {
    attrs.push_back(
        as("nearest_mode", r.pick<const char*>({"round_prefer_floor", "floor", "ceil"})));
  }
  std::string y;
  if (r.chance(0.5)) {
    const float s = r.pick({2.0f, 2.0f, 0.5f, 1.5f, 3.0f});
    y = g.node("Resize", {x, "", g.floats({4}, {1.0f, 1.0f, s, s})}, attrs);
  } else {
    y = g.node("Resize", {x, "", "", g.ints({n, c, r.range(1, 20), r.range(1, 20)})}, attrs);
  }
  if (r.chance(0.5)) y = conv(g, y, conv_spec(16, 3));
  g.output(y);
}

// The Resize forms the cpu target runs on oneDNN's resampling (resize.cc): linear with
// half_pixel or pytorch_half_pixel, nearest with half_pixel and round_prefer_ceil at any sizes,
// and nearest by whole factors with half_pixel and round_prefer_floor or asymmetric and floor
// (also at factors that are not whole, which stay on ref), from blocked Conv outputs and plain
// inputs of 1 to 3 spatial dims, by scales or by sizes.
void gen_resize_fast(OnnxGraph& g) {
  Rng& r = g.rng();
  const int spatial = r.chance(0.7) ? 2 : static_cast<int>(r.pick<int64_t>({1, 3}));
  Dims in = {r.pick<int64_t>({1, 1, 2}), r.chance(0.5) ? 16 : odd_channels(r)};
  for (int i = 0; i < spatial; ++i) in.push_back(r.range(1, spatial == 3 ? 5 : 12));
  std::string x = g.input(in);
  if (spatial == 2 && r.chance(0.5)) x = conv(g, x, conv_spec(in[1], 3));
  const int form = static_cast<int>(r.range(0, 3));
  std::vector<Attr> attrs;
  if (form == 0) {
    attrs = {as("mode", "linear"), as("coordinate_transformation_mode",
                                      r.pick<const char*>({"half_pixel", "pytorch_half_pixel"}))};
  } else if (form == 1) {
    attrs = {as("mode", "nearest"), as("coordinate_transformation_mode", "half_pixel"),
             as("nearest_mode", "round_prefer_ceil")};
  } else if (form == 2) {
    attrs = {as("mode", "nearest"), as("coordinate_transformation_mode", "half_pixel"),
             as("nearest_mode", "round_prefer_floor")};
  } else {
    attrs = {as("mode", "nearest"), as("coordinate_transformation_mode", "asymmetric"),
             as("nearest_mode", "floor")};
  }
  Dims out = {in[0], in[1]};
  std::vector<float> scales = {1.0f, 1.0f};
  const bool by_scales = r.chance(0.5);
  for (int i = 0; i < spatial; ++i) {
    const float s = r.pick({2.0f, 2.0f, 3.0f, 4.0f, 1.5f, 0.5f});
    scales.push_back(s);
    out.push_back(by_scales ? static_cast<int64_t>(std::floor(in[i + 2] * s))
                            : r.range(1, 2 * in[i + 2] + 2));
    if (out.back() < 1) out.back() = 1;
  }
  if (by_scales) {
    // Scales whose products are not whole sizes stay on ref; keep the output non-empty.
    for (int i = 0; i < spatial; ++i) {
      if (out[i + 2] < 1) scales[static_cast<size_t>(i + 2)] = 1.0f;
    }
    g.output(
        g.node("Resize", {x, "", g.floats({static_cast<int64_t>(scales.size())}, scales)}, attrs));
  } else {
    g.output(g.node("Resize", {x, "", "", g.ints(out)}, attrs));
  }
}

constexpr Pattern kPatterns[] = {
    {"concat",
     "Concat of blocked, plain and transposed pieces on any axis; pooled or Conv over "
     "it (distributed), BatchNormalization readers (deferred), whole-block copies",
     gen_concat},
    {"transpose",
     "Transpose/Reshape/Flatten/Squeeze around Convs: NHWC inputs, channel shuffle, "
     "flattening classifiers (views and reorders)",
     gen_transpose},
    {"slice",
     "Slice (negative starts, steps, axes), Split, Pad (constant, reflect, edge, zero) "
     "of blocked and plain values",
     gen_slice},
    {"resize",
     "Resize (nearest, linear, cubic; scales or sizes; every coordinate mode) after "
     "Conv",
     gen_resize},
    {"resize_fast",
     "Resize forms oneDNN's resampling runs (linear half_pixel, nearest without ties), 1-3 "
     "spatial dims, blocked and plain inputs, by scales or sizes",
     gen_resize_fast},
};

}  // namespace

std::span<const Pattern> layout_patterns() {
  return kPatterns;
}

}  // namespace kiln::differential
