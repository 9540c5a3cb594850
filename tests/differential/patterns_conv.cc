// SPDX-License-Identifier: Apache-2.0
// Differential patterns of convolutions: oneDNN's (every geometry, groups, 1-3 spatial dims), the
// own 1x1, k x k over taps, Winograd and stem kernels, depthwise blocks, residual Adds and
// BatchNormalization.
#include <algorithm>
#include <cmath>

#include "tests/differential/builders.h"
#include "tests/differential/case.h"

namespace kiln::differential {

namespace {

ConvSpec square(int64_t out, int64_t k, int64_t stride, int64_t pad, bool bias = true) {
  ConvSpec s;
  s.out = out;
  s.kernel = {k, k};
  s.strides = {stride, stride};
  s.pads = {pad, pad, pad, pad};
  s.bias = bias;
  return s;
}

// A Conv 3x3 (padding 1) and Relu from a graph input of odd channels: in a channel-blocked program
// its output is nChw16c, as inside a network.
std::string blocked_from_input(OnnxGraph& g, int64_t n, int64_t channels, int64_t h, int64_t w) {
  const std::string x = g.input({n, odd_channels(g.rng()), h, w});
  return g.node("Relu", {conv(g, x, square(channels, 3, 1, 1))});
}

void gen_conv(OnnxGraph& g) {
  Rng& r = g.rng();
  const int rank = r.pick({4, 4, 4, 4, 3, 5});
  // Now and then a larger one: other oneDNN kernels, work split over threads.
  const bool large = rank == 4 && r.chance(0.15);
  Dims dims = {r.pick<int64_t>({1, 1, 1, 2, 3}), odd_channels(r)};
  for (int i = 2; i < rank; ++i) {
    dims.push_back(rank == 5 ? r.range(2, 7) : (large ? r.range(20, 40) : r.range(1, 19)));
  }
  std::string x = g.input(dims);
  const int64_t convs = r.range(1, 3);
  for (int64_t i = 0; i < convs; ++i) {
    const Dims in = g.shape(x);
    int64_t out = large ? r.pick<int64_t>({64, 96, 100, 128}) : odd_channels(r);
    int64_t group = 1;
    if (r.chance(0.3)) {
      if (r.chance(0.5)) {
        group = in[1];  // depthwise, with a channel multiplier
        out = in[1] * r.pick<int64_t>({1, 1, 2});
      } else {
        std::vector<int64_t> divisors;
        for (int64_t d = 2; d <= in[1]; ++d) {
          if (in[1] % d == 0) divisors.push_back(d);
        }
        if (!divisors.empty()) {
          group = r.pick(divisors);
          out = group * r.range(1, 3);
        }
      }
    }
    ConvSpec spec = random_conv_spec(r, in, out, rank == 5 ? 3 : 7);
    spec.group = group;
    x = activation(g, conv(g, x, spec), random_act(r));
    if (i + 1 < convs) maybe_output(g, x, 0.2);
  }
  g.output(x);
}

void gen_conv1x1(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t n = r.chance(0.85) ? 1 : 2;
  const int64_t cin = channels16(r, 128);
  const bool small = r.chance(0.5);
  const int64_t h = small ? r.range(1, 7) : r.range(8, 20);
  const int64_t w = small ? r.range(1, 7) : r.range(8, 20);
  const std::string x = blocked_from_input(g, n, cin, h, w);
  const int64_t stride = r.pick({1, 1, 2});
  const int64_t cout = r.chance(0.7) ? channels16(r, 192) : r.pick<int64_t>({17, 40, 100, 8});
  std::string y = conv(g, x, square(cout, 1, stride, 0, r.chance(0.7)));
  const int mode = static_cast<int>(r.range(0, 3));
  if (mode >= 1) {
    std::string residual;
    if (mode == 1 && cin == cout && stride == 1) {
      residual = x;
    } else if (mode == 2) {
      residual = g.node("Relu", {conv(g, x, square(cout, 3, stride, 1))});
    } else {
      residual = conv(g, x, square(cout, 1, stride, 0));
    }
    maybe_output(g, residual, 0.2);
    y = r.chance(0.5) ? g.node("Add", {y, residual}) : g.node("Add", {residual, y});
  }
  y = activation(g, y, r.pick({Act::kNone, Act::kRelu, Act::kRelu, random_act(r)}));
  if (r.chance(0.3)) {
    maybe_output(g, y, 0.3);
    y = g.node("GlobalAveragePool", {y});
  }
  g.output(y);
}

void gen_conv_spread(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t cin = channels16(r, 48);
  const int64_t k = r.pick({2, 3, 3, 5, 7});
  const int64_t stride = r.pick({1, 2});
  const int64_t pb = r.range(0, k - 1);
  const int64_t pe = r.chance(0.7) ? pb : r.range(0, k - 1);
  // Input sizes whose output is at most 7x7.
  const int64_t oh = r.range(1, 7);
  const int64_t ow = r.range(1, 7);
  const int64_t h = std::max<int64_t>((oh - 1) * stride + k - pb - pe, 1);
  const int64_t w = std::max<int64_t>((ow - 1) * stride + k - pb - pe, 1);
  const std::string x = blocked_from_input(g, 1, cin, h, w);
  ConvSpec spec = square(r.pick<int64_t>({256, 256, 272, 320}), k, stride, pb, r.chance(0.7));
  spec.pads = {pb, pb, pe, pe};
  std::string y = conv(g, x, spec);
  if (r.chance(0.3)) {
    spec.bias = false;
    y = g.node("Add", {y, conv(g, x, spec)});
  }
  y = activation(g, y, r.pick({Act::kNone, Act::kRelu, Act::kRelu, random_act(r)}));
  g.output(y);
}

void gen_winograd(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t n = r.chance(0.85) ? 1 : 2;
  const int64_t cin = channels16(r, 160);
  const int64_t h = r.range(2, 32);
  const int64_t w = r.chance(0.7) ? h : r.range(2, 32);
  std::string x = blocked_from_input(g, n, cin, h, w);
  const int64_t convs = r.range(1, 2);
  for (int64_t i = 0; i < convs; ++i) {
    ConvSpec spec = square(64 * r.range(1, 2), 3, 1, 1, r.chance(0.7));
    if (r.chance(0.1)) spec.pads = {1, 1, 0, 0};  // not the own kernel's: oneDNN's
    x = conv(g, x, spec);
    x = activation(g, x, r.pick({Act::kNone, Act::kRelu, Act::kRelu, random_act(r)}));
    if (i + 1 < convs) maybe_output(g, x, 0.2);
  }
  g.output(x);
}

void gen_stem(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t n = r.chance(0.85) ? 1 : 2;
  const int64_t cin = r.chance(0.9) ? r.range(1, 4) : 5;
  const int64_t k = r.range(1, 11);
  const int64_t stride = r.range(1, 4);
  const int64_t pad = r.range(0, k - 1);
  const int64_t h = r.range(k, 40);
  const int64_t w = r.chance(0.7) ? h : r.range(k, 40);
  const std::string x = g.input({n, cin, h, w});
  ConvSpec spec = square(r.pick<int64_t>({16, 32, 48, 64, 24}), k, stride, pad, r.chance(0.7));
  if (r.chance(0.15)) spec.pads = {pad, pad, r.range(0, k - 1), r.range(0, k - 1)};
  std::string y = conv(g, x, spec);
  y = activation(g, y,
                 r.pick({Act::kNone, Act::kRelu, Act::kRelu, Act::kRelu6, Act::kClipRange,
                         Act::kSiLU, Act::kLeakyRelu, Act::kHardSwish}));
  const Dims yd = g.shape(y);
  if (r.chance(0.6)) {
    const int64_t pk = r.pick({2, 3, 3});
    const int64_t ps = r.pick({1, 2, 2});
    const int64_t pp = r.range(0, pk - 1);
    if (yd[2] + 2 * pp >= pk && yd[3] + 2 * pp >= pk) {
      std::vector<Attr> attrs = {ais("kernel_shape", {pk, pk}), ais("strides", {ps, ps}),
                                 ais("pads", {pp, pp, pp, pp})};
      if (r.chance(0.3)) attrs.push_back(ai("ceil_mode", 1));
      maybe_output(g, y, 0.1);
      y = g.node("MaxPool", {y}, attrs);
    }
  }
  if (r.chance(0.5)) y = conv(g, y, square(32, 3, 1, 1));
  g.output(y);
}

void gen_depthwise(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t n = r.pick({1, 1, 2});
  const int64_t c = r.chance(0.5) ? odd_channels(r) : channels16(r, 48);
  const int64_t h = r.range(3, 20);
  const int64_t w = r.chance(0.7) ? h : r.range(3, 20);
  const std::string x = g.input({n, c, h, w});
  const int64_t e = std::min<int64_t>(c * r.pick({1, 2, 6}), 96);
  const Act act = r.pick({Act::kRelu6, Act::kRelu, Act::kSiLU, Act::kHardSwish});
  std::string y = activation(g, conv(g, x, square(e, 1, 1, 0)), act);
  const int64_t k = r.pick({3, 3, 5, 7});
  const int64_t stride = r.pick({1, 1, 2});
  ConvSpec dw = square(e * r.pick<int64_t>({1, 1, 1, 2}), k, stride, k / 2);
  dw.group = e;
  if (stride == 2 && r.chance(0.3)) dw.pads = {k / 2 - 1, k / 2 - 1, k / 2, k / 2};  // TF's SAME
  y = activation(g, conv(g, y, dw), act);
  const int64_t cout = r.chance(0.5) ? c : odd_channels(r);
  y = conv(g, y, square(cout, 1, 1, 0));
  if (cout == c && stride == 1 && r.chance(0.7)) {
    y = r.chance(0.5) ? g.node("Add", {x, y}) : g.node("Add", {y, x});
  }
  g.output(y);
}

void gen_residual(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t n = r.pick({1, 1, 2});
  int64_t c = r.chance(0.6) ? channels16(r, 64) : odd_channels(r);
  const int64_t h = r.range(2, 16);
  std::string y = blocked_from_input(g, n, c, h, r.chance(0.7) ? h : r.range(2, 16));
  const int64_t blocks = r.range(1, 3);
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t stride = r.chance(0.25) ? 2 : 1;
    const int64_t out = r.chance(0.7) ? c : (r.chance(0.5) ? channels16(r, 64) : odd_channels(r));
    std::string shortcut = y;
    if (stride != 1 || out != c) shortcut = conv(g, y, square(out, 1, stride, 0, r.chance(0.5)));
    std::string t = g.node("Relu", {conv(g, y, square(out, 3, stride, 1, r.chance(0.7)))});
    if (r.chance(0.5)) {
      t = conv(g, t, square(out, 3, 1, 1, r.chance(0.7)));
    } else {
      t = conv(g, t, square(out, 1, 1, 0, r.chance(0.7)));
    }
    // The shortcut read again later (or from outside): the sum may not overwrite it.
    maybe_output(g, shortcut, 0.15);
    std::string z = r.chance(0.5) ? g.node("Add", {t, shortcut}) : g.node("Add", {shortcut, t});
    if (r.chance(0.15)) z = g.node("Add", {z, g.node("Relu", {shortcut})});
    maybe_output(g, z, 0.1);
    y = activation(g, z, r.pick({Act::kRelu, Act::kRelu, Act::kNone, random_act(r)}));
    c = out;
  }
  g.output(y);
}

std::string batch_norm(OnnxGraph& g, const std::string& x) {
  const int64_t c = g.shape(x)[1];
  Rng& r = g.rng();
  return g.node("BatchNormalization",
                {x, g.weight_in({c}, 0.5f, 1.5f), g.weight({c}, 0.5f), g.weight({c}, 0.5f),
                 g.weight_in({c}, 0.2f, 2.0f)},
                {af("epsilon", r.pick({1e-5f, 1e-3f}))});
}

void gen_batchnorm(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t n = r.pick({1, 1, 2});
  const int64_t c = r.chance(0.5) ? odd_channels(r) : channels16(r, 64);
  const int mode = static_cast<int>(r.range(0, 3));
  std::string y;
  if (mode == 1) {
    // On a graph input of rank 2 to 5.
    const int rank = r.pick({2, 3, 4, 4, 5});
    Dims d = {n, c};
    for (int i = 2; i < rank; ++i) d.push_back(r.range(1, 9));
    y = batch_norm(g, g.input(d));
  } else {
    const int64_t h = r.range(1, 14);
    const std::string x = g.input({n, odd_channels(r), h, h});
    std::string a = conv(g, x, square(c, 3, 1, 1, r.chance(0.5)));
    if (mode == 2) a = g.node("Add", {a, conv(g, x, square(c, 1, 1, 0))});
    if (mode == 3) a = g.node("Relu", {a});
    y = batch_norm(g, a);
  }
  y = activation(g, y, r.pick({Act::kRelu, Act::kRelu, Act::kNone, random_act(r)}));
  if (r.chance(0.3) && g.shape(y).size() == 4) y = conv(g, y, square(16, 1, 1, 0));
  g.output(y);
}

// The fast kernels at the sizes of real inputs: wide text lines (32 x 320), detector maps (80 x
// 80 and more), where work is split over threads and tiles have remainders.
void gen_large(OnnxGraph& g) {
  Rng& r = g.rng();
  const bool wide = r.chance(0.4);
  const int64_t h = wide ? r.pick<int64_t>({8, 16, 32}) : r.range(30, 96);
  const int64_t w = wide ? r.range(64, 320) : (r.chance(0.6) ? h : r.range(30, 96));
  switch (r.range(0, 4)) {
    case 0: {
      // A stem: YOLOv5's 6x6 stride 2, ResNet's 7x7 stride 2 and pool, MobileNet's 3x3 stride 2.
      const int64_t k = r.pick({3, 6, 7});
      ConvSpec spec = square(r.pick<int64_t>({16, 32}), k, 2, k / 2 - (k == 6 ? 1 : 0));
      std::string y = conv(g, g.input({1, r.pick<int64_t>({1, 3}), 2 * h, 2 * w}), spec);
      y = activation(g, y, r.pick({Act::kRelu, Act::kSiLU, Act::kRelu6}));
      if (r.chance(0.5)) {
        y = g.node(
            "MaxPool", {y},
            {ais("kernel_shape", {3, 3}), ais("strides", {2, 2}), ais("pads", {1, 1, 1, 1})});
      }
      g.output(y);
      return;
    }
    case 1: {
      const std::string x = blocked_from_input(g, 1, r.pick<int64_t>({64, 128}), h, w);
      std::string y = conv(g, x, square(r.pick<int64_t>({64, 128, 256}), 1, r.pick({1, 2}), 0));
      g.output(activation(g, y, r.pick({Act::kNone, Act::kRelu})));
      return;
    }
    case 2: {
      const std::string x = blocked_from_input(g, 1, r.pick<int64_t>({16, 64, 128}), h, w);
      g.output(g.node("Relu", {conv(g, x, square(64, 3, 1, 1))}));
      return;
    }
    case 3: {
      const int64_t c = r.pick<int64_t>({16, 24, 32});
      const std::string x = blocked_from_input(g, 1, c, h, w);
      ConvSpec dw = square(c, 3, r.pick({1, 2}), 1);
      dw.group = c;
      g.output(activation(g, conv(g, x, dw), r.pick({Act::kRelu6, Act::kSiLU, Act::kHardSwish})));
      return;
    }
    default: {
      const int64_t c = r.pick<int64_t>({16, 32, 48});
      const std::string x = blocked_from_input(g, 1, c, h, w);
      std::string a = conv(g, x, square(c, 1, 1, 0));
      std::string b = g.node("Relu", {conv(g, x, square(c, 3, 1, 1))});
      std::string y = g.node("Concat", {a, b}, {ai("axis", 1)});
      y = g.node("Relu", {g.node("Add", {conv(g, y, square(c, 1, 1, 0)), x})});
      g.output(y);
      return;
    }
  }
}

// ConvTranspose (oneDNN's deconvolution on the cpu target): 1-3 spatial dims, groups, strides,
// dilations, pads, output_padding or output_shape, a bias and an activation after it, reading a
// blocked Conv output or a plain input; now and then auto_pad SAME_UPPER (left to ref).
void gen_conv_transpose(OnnxGraph& g) {
  Rng& r = g.rng();
  const int spatial = r.chance(0.7) ? 2 : static_cast<int>(r.pick<int64_t>({1, 3}));
  const int64_t groups = r.pick<int64_t>({1, 1, 1, 2, 4});
  const int64_t in_c = groups * r.pick<int64_t>({1, 3, 8, 16});
  const int64_t out_g = r.pick<int64_t>({1, 2, 5, 16});
  Dims x_dims = {r.chance(0.8) ? 1 : 2, in_c};
  for (int i = 0; i < spatial; ++i) x_dims.push_back(r.range(1, spatial == 3 ? 4 : 9));
  std::string x = g.input(x_dims);
  if (spatial == 2 && r.chance(0.5)) {
    ConvSpec s;
    s.out = in_c;
    s.pads = {1, 1, 1, 1};
    x = conv(g, x, s);
  }
  Dims kernel;
  Dims strides;
  Dims dilations;
  Dims pads(static_cast<size_t>(2 * spatial), 0);
  Dims output_padding;
  for (int i = 0; i < spatial; ++i) {
    kernel.push_back(r.range(1, 4));
    strides.push_back(r.range(1, 3));
    dilations.push_back(r.chance(0.8) ? 1 : 2);
    const int64_t reach = (kernel.back() - 1) * dilations.back();
    pads[static_cast<size_t>(i)] = r.range(0, reach);
    pads[static_cast<size_t>(spatial + i)] = r.range(0, reach);
    output_padding.push_back(r.range(0, std::max<int64_t>(strides.back(), dilations.back()) - 1));
  }
  Dims w_dims = {in_c, out_g};
  w_dims.insert(w_dims.end(), kernel.begin(), kernel.end());
  int64_t fan = in_c / groups;
  for (int64_t k : kernel) fan *= k;
  std::vector<std::string> inputs = {x,
                                     g.weight(w_dims, std::sqrt(3.0f / static_cast<float>(fan)))};
  if (r.chance(0.7)) inputs.push_back(g.weight({groups * out_g}, 0.3f));
  std::vector<Attr> attrs = {ais("kernel_shape", kernel), ais("strides", strides),
                             ais("dilations", dilations), ai("group", groups)};
  if (r.chance(0.15)) {
    attrs.push_back(as("auto_pad", "SAME_UPPER"));
  } else {
    attrs.push_back(ais("pads", pads));
    if (r.chance(0.5)) attrs.push_back(ais("output_padding", output_padding));
  }
  std::string y = g.node("ConvTranspose", inputs, attrs);
  y = activation(g, y, r.pick({Act::kNone, Act::kRelu, Act::kRelu6, Act::kSigmoid}));
  g.output(y);
}

constexpr Pattern kPatterns[] = {
    {"conv",
     "Conv of any geometry (1-3 spatial dims, groups, depthwise, dilation, asymmetric "
     "pads, auto_pad) in chains, with every fused activation",
     gen_conv},
    {"conv1x1", "1x1 Conv over nChw16c (own kernel, stride 1/2), residual Add, Relu, pooled",
     gen_conv1x1},
    {"conv_spread", "k x k Conv to <= 7x7 with >= 256 outputs (the own 1x1 over taps)",
     gen_conv_spread},
    {"winograd", "3x3 stride-1 Conv over nChw16c (own Winograd F(2x2)/F(4x4), oneDNN's)",
     gen_winograd},
    {"stem", "first Conv of <= 4 channels with Relu/Clip/SiLU and MaxPool (the own stem kernel)",
     gen_stem},
    {"depthwise", "MobileNet blocks: 1x1 expand, depthwise k x k, 1x1 project, residual",
     gen_depthwise},
    {"residual", "ResNet blocks: Conv chains with residual Adds (sum post-ops, in place)",
     gen_residual},
    {"large", "the own kernels at real sizes: wide text lines, detector maps, split over threads",
     gen_large},
    {"batchnorm", "BatchNormalization after Conv (folded), alone, after Add, with Relu",
     gen_batchnorm},
    {"conv_transpose",
     "ConvTranspose of 1-3 spatial dims, groups, strides, dilations, pads, output_padding, "
     "bias, activation after; blocked or plain input",
     gen_conv_transpose},
};

}  // namespace

std::span<const Pattern> conv_patterns() {
  return kPatterns;
}

}  // namespace kiln::differential
