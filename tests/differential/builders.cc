// SPDX-License-Identifier: Apache-2.0
// The differential patterns' shared building blocks.
#include "tests/differential/builders.h"

#include <algorithm>
#include <cmath>

namespace kiln::differential {

std::string conv(OnnxGraph& g, const std::string& x, const ConvSpec& spec) {
  const Dims in = g.shape(x);
  Dims w = {spec.out, in[1] / spec.group};
  w.insert(w.end(), spec.kernel.begin(), spec.kernel.end());
  int64_t fan_in = in[1] / spec.group;
  for (int64_t k : spec.kernel) fan_in *= k;
  const float bound = std::sqrt(3.0f / static_cast<float>(std::max<int64_t>(fan_in, 1)));
  std::vector<std::string> inputs = {x, g.weight(w, bound)};
  if (spec.bias) inputs.push_back(g.weight({spec.out}, 0.5f));
  std::vector<Attr> attrs = {ais("kernel_shape", spec.kernel)};
  if (!spec.strides.empty()) attrs.push_back(ais("strides", spec.strides));
  if (!spec.dilations.empty()) attrs.push_back(ais("dilations", spec.dilations));
  if (!spec.auto_pad.empty()) {
    attrs.push_back(as("auto_pad", spec.auto_pad));
  } else if (!spec.pads.empty()) {
    attrs.push_back(ais("pads", spec.pads));
  }
  if (spec.group != 1) attrs.push_back(ai("group", spec.group));
  return g.node("Conv", inputs, attrs);
}

ConvSpec random_conv_spec(Rng& rng, const Dims& in_dims, int64_t out, int64_t max_kernel) {
  const size_t spatial = in_dims.size() - 2;
  ConvSpec s;
  s.out = out;
  s.bias = rng.chance(0.7);
  for (int attempt = 0;; ++attempt) {
    const bool square = rng.chance(0.8);
    s.kernel.assign(spatial, 1);
    s.strides.assign(spatial, 1);
    s.dilations.assign(spatial, 1);
    s.pads.assign(2 * spatial, 0);
    s.auto_pad.clear();
    const int64_t k0 = rng.range(1, max_kernel);
    const int64_t stride0 = rng.pick({1, 1, 1, 2, 2, 3});
    const bool dilate = rng.chance(0.15);
    for (size_t i = 0; i < spatial; ++i) {
      s.kernel[i] = square ? k0 : rng.range(1, max_kernel);
      s.strides[i] = square ? stride0 : rng.pick({1, 1, 2, 3});
      s.dilations[i] = dilate ? rng.range(1, 3) : 1;
    }
    const int mode = static_cast<int>(rng.range(0, 9));
    if (mode == 0) s.auto_pad = "SAME_UPPER";
    if (mode == 1) s.auto_pad = "SAME_LOWER";
    if (mode == 2) s.auto_pad = "VALID";
    const bool symmetric = rng.chance(0.6);
    bool ok = true;
    for (size_t i = 0; i < spatial; ++i) {
      const int64_t span = (s.kernel[i] - 1) * s.dilations[i] + 1;
      if (mode >= 3) {
        s.pads[i] = rng.range(0, span - 1);
        s.pads[i + spatial] = symmetric ? s.pads[i] : rng.range(0, span - 1);
      }
      const int64_t padded = in_dims[i + 2] + s.pads[i] + s.pads[i + spatial];
      if (mode != 0 && mode != 1 && padded < span) ok = false;
    }
    if (ok || attempt > 20) {
      if (!ok) {
        s.kernel.assign(spatial, 1);
        s.dilations.assign(spatial, 1);
        s.auto_pad.clear();
      }
      if (s.auto_pad == "SAME_UPPER" || s.auto_pad == "SAME_LOWER") {
        // ONNX defines SAME padding without dilation only.
        s.dilations.assign(spatial, 1);
      }
      if (!s.auto_pad.empty()) s.pads.clear();
      return s;
    }
  }
}

namespace {

std::string scale_node(OnnxGraph& g, const std::string& x, float c) {
  const std::string k = g.scalar(c);
  return g.rng().chance(0.5) ? g.node("Mul", {x, k}) : g.node("Mul", {k, x});
}

}  // namespace

std::string activation(OnnxGraph& g, const std::string& x, Act act) {
  Rng& r = g.rng();
  switch (act) {
    case Act::kNone: return x;
    case Act::kRelu: return g.node("Relu", {x});
    case Act::kLeakyRelu:
      return g.node("LeakyRelu", {x}, {af("alpha", r.pick({0.01f, 0.1f, 0.2f}))});
    case Act::kRelu6: return g.node("Clip", {x, g.scalar(0.0f), g.scalar(6.0f)});
    case Act::kClipRange: {
      const float lo = r.uniform(-1.0f, 0.0f);
      const float hi = r.uniform(0.0f, 1.0f);
      switch (r.range(0, 3)) {
        case 0: return g.node("Clip", {x, g.scalar(lo)});
        case 1: return g.node("Clip", {x, "", g.scalar(hi)});
        case 2: {
          // Bounds that are graph inputs, not constants: no post-op can take them.
          Tensor lo_t = Tensor::scalar(lo);
          Tensor hi_t = Tensor::scalar(hi);
          return g.node("Clip", {x, g.input(lo_t), g.input(hi_t)});
        }
        default: return g.node("Clip", {x, g.scalar(lo), g.scalar(hi)});
      }
    }
    case Act::kSigmoid: return g.node("Sigmoid", {x});
    case Act::kTanh: return g.node("Tanh", {x});
    case Act::kHardSwish: return g.node("HardSwish", {x});
    case Act::kHardSigmoid:
      return g.node("HardSigmoid", {x},
                    {af("alpha", r.pick({0.2f, 1.0f / 6.0f})), af("beta", 0.5f)});
    case Act::kSiLU: {
      const std::string s = g.node("Sigmoid", {x});
      return r.chance(0.5) ? g.node("Mul", {x, s}) : g.node("Mul", {s, x});
    }
    case Act::kHardSiLU: {
      const std::string s =
          g.node("HardSigmoid", {x}, {af("alpha", 1.0f / 6.0f), af("beta", 0.5f)});
      return r.chance(0.5) ? g.node("Mul", {x, s}) : g.node("Mul", {s, x});
    }
    case Act::kGeluErf: {
      const std::string e = g.node("Erf", {g.node("Div", {x, g.scalar(1.4142135f)})});
      const std::string one_plus = g.node("Add", {e, g.scalar(1.0f)});
      if (r.chance(0.5)) return g.node("Mul", {g.node("Mul", {x, one_plus}), g.scalar(0.5f)});
      return g.node("Mul", {g.node("Mul", {x, g.scalar(0.5f)}), one_plus});
    }
    case Act::kGeluTanh: {
      const std::string cube = r.chance(0.5) ? g.node("Pow", {x, g.scalar(3.0f)})
                                             : g.node("Mul", {x, g.node("Mul", {x, x})});
      const std::string inner = g.node("Add", {x, g.node("Mul", {g.scalar(0.044715f), cube})});
      const std::string t = g.node("Tanh", {g.node("Mul", {inner, g.scalar(0.7978845608f)})});
      const std::string one_plus = g.node("Add", {t, g.scalar(1.0f)});
      if (r.chance(0.5)) return g.node("Mul", {g.node("Mul", {x, one_plus}), g.scalar(0.5f)});
      return g.node("Mul", {g.node("Mul", {g.scalar(0.5f), x}), one_plus});
    }
    case Act::kElu: return g.node("Elu", {x}, {af("alpha", r.pick({1.0f, 0.5f}))});
    case Act::kScale:
      if (r.chance(0.3)) return g.node("Div", {x, g.scalar(r.pick({2.0f, 0.5f, 3.0f}))});
      return scale_node(g, x, r.pick({0.5f, 2.0f, -1.5f}));
    case Act::kExp: return g.node("Exp", {x});
    case Act::kAbs: return g.node("Abs", {x});
  }
  return x;
}

Act random_act(Rng& rng) {
  return rng.pick({Act::kNone,     Act::kNone,      Act::kRelu,      Act::kRelu,
                   Act::kRelu,     Act::kLeakyRelu, Act::kRelu6,     Act::kClipRange,
                   Act::kSigmoid,  Act::kTanh,      Act::kHardSwish, Act::kHardSigmoid,
                   Act::kSiLU,     Act::kSiLU,      Act::kHardSiLU,  Act::kGeluErf,
                   Act::kGeluTanh, Act::kElu,       Act::kScale,     Act::kExp,
                   Act::kAbs});
}

int64_t odd_channels(Rng& rng) {
  return rng.pick<int64_t>({1, 3, 7, 13, 15, 16, 17, 24, 31, 32, 33, 48, 64});
}

int64_t channels16(Rng& rng, int64_t max) {
  return 16 * rng.range(1, std::max<int64_t>(max / 16, 1));
}

void maybe_output(OnnxGraph& g, const std::string& name, double p) {
  if (g.rng().chance(p)) g.output(name);
}

}  // namespace kiln::differential
