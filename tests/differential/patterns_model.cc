// SPDX-License-Identifier: Apache-2.0
// Differential patterns shaped like the ends of real models and like their wiring: random graphs of
// Convs, Adds, Concats and pools whose intermediates are also outputs (buffer reuse, in-place
// sums), detector and recognizer heads, classifiers, and models with a dynamic batch.
#include <algorithm>

#include "tests/differential/builders.h"
#include "tests/differential/case.h"

namespace kiln::differential {

namespace {

ConvSpec conv_spec(int64_t out, int64_t k, int64_t stride = 1) {
  ConvSpec s;
  s.out = out;
  s.kernel = {k, k};
  s.strides = {stride, stride};
  s.pads = {k / 2, k / 2, k / 2, k / 2};
  return s;
}

// A random graph over values of one spatial size: each step adds a Conv, an Add, an activation, a
// Concat or a 3x3 pool of values made before, and any value may also be a graph output.
void gen_dag(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t n = r.chance(0.75) ? 1 : 2;
  const int64_t h = r.range(1, 10);
  const int64_t w = r.chance(0.7) ? h : r.range(1, 10);
  std::vector<std::string> values = {g.input({n, r.pick<int64_t>({3, 16, 17}), h, w})};
  const int64_t steps = r.range(3, 9);
  for (int64_t i = 0; i < steps; ++i) {
    const std::string a = r.pick(values);
    const int64_t ca = g.shape(a)[1];
    std::string y;
    switch (r.range(0, 6)) {
      case 0:
      case 1: {
        const int64_t out = r.chance(0.6) ? 16 * r.range(1, 3) : odd_channels(r);
        y = conv(g, a, conv_spec(out, r.pick({1, 3, 3})));
        break;
      }
      case 2: {
        // An Add of two values of the same channels (a Conv makes one when there is none).
        std::vector<std::string> same;
        for (const std::string& v : values) {
          if (v != a && g.shape(v)[1] == ca) same.push_back(v);
        }
        const std::string b =
            same.empty() ? conv(g, r.pick(values), conv_spec(ca, 1)) : r.pick(same);
        y = r.chance(0.5) ? g.node("Add", {a, b}) : g.node("Add", {b, a});
        break;
      }
      case 3: y = activation(g, a, random_act(r)); break;
      case 4: {
        const std::string b = r.pick(values);
        y = g.node("Concat", {a, b}, {ai("axis", 1)});
        break;
      }
      case 5:
        y = g.node(r.pick<const char*>({"MaxPool", "AveragePool"}), {a},
                   {ais("kernel_shape", {3, 3}), ais("pads", {1, 1, 1, 1})});
        break;
      default: y = g.node("Mul", {a, g.node("Sigmoid", {conv(g, a, conv_spec(ca, 1))})}); break;
    }
    values.push_back(y);
    maybe_output(g, y, 0.25);
  }
  g.output(values.back());
}

// YOLOv5's detection head: per scale a 1x1 Conv, Reshape to anchors, Transpose, Sigmoid, the
// box decoded from Slices (or a Split) with a grid and anchors, Concat over scales.
void gen_detector(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t n = r.chance(0.8) ? 1 : 2;
  const int64_t anchors = r.pick({1, 3});
  const int64_t classes = r.pick({1, 2, 5, 11});
  const int64_t no = classes + 5;
  const int64_t h0 = r.range(1, 5);
  const bool split = r.chance(0.4);
  std::string x = g.node("Relu", {conv(g, g.input({n, 3, 4 * h0, 4 * h0}), conv_spec(16, 3, 2))});
  std::vector<std::string> scales;
  const int64_t count = r.range(1, 2);
  for (int64_t s = 0; s < count; ++s) {
    const Dims d = g.shape(x);
    const int64_t h = d[2];
    const int64_t w = d[3];
    std::string y = conv(g, x, conv_spec(anchors * no, 1));
    y = g.node("Reshape", {y, g.ints({n, anchors, no, h, w})});
    y = g.node("Transpose", {y}, {ais("perm", {0, 1, 3, 4, 2})});
    y = g.node("Sigmoid", {y});
    std::string xy, wh, conf;
    if (split) {
      const std::vector<std::string> parts =
          g.node_n("Split", {y, g.ints({2, 2, classes + 1})}, 3, {ai("axis", 4)});
      xy = parts[0];
      wh = parts[1];
      conf = parts[2];
    } else {
      auto slice = [&](int64_t from, int64_t to) {
        return g.node("Slice", {y, g.ints({from}), g.ints({to}), g.ints({4})});
      };
      xy = slice(0, 2);
      wh = slice(2, 4);
      conf = slice(4, no);
    }
    const float stride = static_cast<float>(4 * h0) / static_cast<float>(h);
    xy = g.node("Sub", {g.node("Mul", {xy, g.scalar(2.0f)}), g.scalar(0.5f)});
    xy = g.node("Mul",
                {g.node("Add", {xy, g.weight_in({1, 1, h, w, 2}, 0.0f, 8.0f)}), g.scalar(stride)});
    wh = g.node("Pow", {g.node("Mul", {wh, g.scalar(2.0f)}), g.scalar(2.0f)});
    wh = g.node("Mul", {wh, g.weight_in({1, anchors, 1, 1, 2}, 1.0f, 30.0f)});
    y = g.node("Concat", {xy, wh, conf}, {ai("axis", -1)});
    scales.push_back(g.node("Reshape", {y, g.ints({n, anchors * h * w, no})}));
    if (s == 0) x = g.node("Relu", {conv(g, x, conv_spec(16, 3, 2))});
  }
  g.output(scales.size() == 1 ? scales[0] : g.node("Concat", scales, {ai("axis", 1)}));
}

// A text recognizer's end (CRNN): Convs and pools down to one row, the row as a sequence
// (Squeeze/Reshape, Transpose to [T, N, C] or [N, T, C]), a classifier MatMul and Softmax.
void gen_recognizer(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t n = r.chance(0.8) ? 1 : 2;
  const int64_t t = r.range(2, 12);
  std::string x = g.input({n, r.pick<int64_t>({1, 3}), 8, 4 * t});
  x = g.node("Relu", {conv(g, x, conv_spec(16 * r.range(1, 2), 3))});
  x = g.node("MaxPool", {x}, {ais("kernel_shape", {2, 2}), ais("strides", {2, 2})});
  x = g.node("Relu", {conv(g, x, conv_spec(r.pick<int64_t>({32, 48, 37}), 3))});
  x = g.node("MaxPool", {x}, {ais("kernel_shape", {2, 2}), ais("strides", {2, 2})});
  x = g.node("MaxPool", {x}, {ais("kernel_shape", {2, 1}), ais("strides", {2, 1})});
  const Dims d = g.shape(x);  // [n, c, 1, t]
  if (r.chance(0.5)) {
    x = g.node("Squeeze", {x, g.ints({2})});
  } else {
    x = g.node("Reshape", {x, g.ints({d[0], d[1], d[3]})});
  }
  const bool time_major = r.chance(0.5);
  x = g.node(
      "Transpose", {x},
      {ais("perm", time_major ? std::vector<int64_t>{2, 0, 1} : std::vector<int64_t>{0, 2, 1})});
  const int64_t classes = r.pick<int64_t>({5, 37, 97});
  x = g.node("MatMul", {x, g.weight({d[1], classes}, 0.5f)});
  x = g.node("Add", {x, g.weight({classes}, 0.5f)});
  g.output(g.node(r.pick<const char*>({"Softmax", "LogSoftmax"}), {x},
                  {ai("axis", r.pick<int64_t>({2, -1}))}));
}

// A classifier's end: pooled features, Flatten (or Reshape), Gemm, Softmax; opset 11 or 13.
void gen_classifier(OnnxGraph& g) {
  Rng& r = g.rng();
  if (r.chance(0.4)) g.set_opset(11);
  const int64_t n = r.pick({1, 1, 3});
  const int64_t h = r.range(1, 9);
  std::string x = g.input({n, r.pick<int64_t>({3, 16}), h, h});
  const int64_t c = r.pick<int64_t>({16, 32, 40, 64});
  x = g.node("Relu", {conv(g, x, conv_spec(c, 3))});
  x = g.node(r.chance(0.7) ? "GlobalAveragePool" : "GlobalMaxPool", {x});
  x = r.chance(0.5) ? g.node("Flatten", {x}) : g.node("Reshape", {x, g.ints({n, c})});
  const int64_t classes = r.pick<int64_t>({3, 10, 100});
  x = g.node("Gemm", {x, g.weight({classes, c}, 0.5f), g.weight({classes}, 0.5f)},
             {ai("transB", 1)});
  g.output(g.node(r.pick<const char*>({"Softmax", "Softmax", "LogSoftmax"}), {x},
                  {ai("axis", r.pick<int64_t>({1, -1}))}));
}

// Reshape of `x` to [its first `keep` dims, then `rest`], the kept dims read from Shape(x) at
// run time, as exporters write reshapes over dynamic dims.
std::string reshape_keeping(OnnxGraph& g, const std::string& x, int64_t keep,
                            const std::vector<int64_t>& rest) {
  const std::string kept =
      g.node("Slice", {g.node("Shape", {x}), g.ints({0}), g.ints({keep}), g.ints({0})});
  return g.node("Reshape", {x, g.node("Concat", {kept, g.ints(rest)}, {ai("axis", 0)})});
}

// Models with dynamic input dims (batch; an image's width; a sequence's length), their reshapes
// computed from Shape at run time: the cpu target compiles a program for each input shape.
void gen_dynamic(OnnxGraph& g) {
  Rng& r = g.rng();
  switch (r.range(0, 2)) {
    case 0: {
      g.set_dynamic_dims({0});
      const int64_t n = r.range(1, 3);
      const int64_t h = r.range(2, 10);
      const int64_t c0 = odd_channels(r);
      const std::string x = g.input({n, c0, h, h}, {r.range(1, 3), c0, h, h});
      std::string y = g.node("Relu", {conv(g, x, conv_spec(16 * r.range(1, 2), 3))});
      const int64_t c = g.shape(y)[1];
      if (r.chance(0.5)) y = g.node("Add", {y, conv(g, y, conv_spec(c, 1))});
      if (r.chance(0.7)) {
        y = reshape_keeping(g, g.node("GlobalAveragePool", {y}), 1, {-1});
        y = g.node("Softmax", {g.node("MatMul", {y, g.weight({c, 10}, 0.3f)})}, {ai("axis", -1)});
      }
      g.output(y);
      return;
    }
    case 1: {
      // A text line of dynamic width: the sequence is as long as the image is wide.
      g.set_dynamic_dims({0, 3});
      const int64_t t = r.range(2, 10);
      std::string x =
          g.input({r.range(1, 2), 3, 8, 4 * t}, {r.range(1, 2), 3, 8, 4 * r.range(2, 10)});
      x = g.node("Relu", {conv(g, x, conv_spec(16, 3))});
      x = g.node("MaxPool", {x}, {ais("kernel_shape", {2, 2}), ais("strides", {2, 2})});
      x = g.node("Relu", {conv(g, x, conv_spec(r.pick<int64_t>({32, 37}), 3))});
      x = g.node("MaxPool", {x}, {ais("kernel_shape", {4, 2}), ais("strides", {4, 2})});
      const int64_t c = g.shape(x)[1];
      x = g.node("Squeeze", {x, g.ints({2})});
      x = g.node("Transpose", {x}, {ais("perm", {0, 2, 1})});
      x = g.node("Add", {g.node("MatMul", {x, g.weight({c, 11}, 0.3f)}), g.weight({11}, 0.3f)});
      g.output(g.node(r.pick<const char*>({"Softmax", "LogSoftmax"}), {x}, {ai("axis", 2)}));
      return;
    }
    default: {
      // A transformer layer over a sequence of dynamic length.
      g.set_dynamic_dims({0, 1});
      const int64_t heads = r.pick({1, 2});
      const int64_t dh = r.pick({4, 8});
      const int64_t d = heads * dh;
      const std::string x =
          g.input({r.range(1, 2), r.range(1, 9), d}, {r.range(1, 2), r.range(1, 9), d});
      const std::string ln =
          g.node("LayerNormalization", {x, g.weight_in({d}, 0.5f, 1.5f), g.weight({d}, 0.3f)},
                 {ai("axis", -1)});
      auto heads_of = [&](const std::vector<int64_t>& perm) {
        const std::string p = g.node("MatMul", {ln, g.weight({d, d}, 0.5f)});
        return g.node("Transpose", {reshape_keeping(g, p, 2, {heads, dh})}, {ais("perm", perm)});
      };
      const std::string q = heads_of({0, 2, 1, 3});
      const std::string k = heads_of({0, 2, 3, 1});
      const std::string v = heads_of({0, 2, 1, 3});
      std::string a = g.node("Mul", {g.node("MatMul", {q, k}), g.scalar(0.3f)});
      a = g.node("MatMul", {g.node("Softmax", {a}, {ai("axis", -1)}), v});
      a = reshape_keeping(g, g.node("Transpose", {a}, {ais("perm", {0, 2, 1, 3})}), 2, {d});
      g.output(g.node("Add", {x, g.node("MatMul", {a, g.weight({d, d}, 0.5f)})}));
      return;
    }
  }
}

// YOLO's spatial pyramid pooling: max pools of 5, 9 and 13 (SPP) or three chained 5x5 pools
// (SPPF), concatenated with their input and joined by a 1x1 Conv (distributed over the pieces).
void gen_spp(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t c = r.pick<int64_t>({16, 32, 24, 48});
  const int64_t h = r.range(2, 16);
  std::string x = g.input({r.chance(0.8) ? 1 : 2, odd_channels(r), h, h});
  x = activation(g, conv(g, x, conv_spec(c, 1)), r.pick({Act::kSiLU, Act::kRelu, Act::kNone}));
  auto pool = [&](const std::string& v, int64_t k) {
    return g.node("MaxPool", {v},
                  {ais("kernel_shape", {k, k}), ais("strides", {1, 1}),
                   ais("pads", {k / 2, k / 2, k / 2, k / 2})});
  };
  std::vector<std::string> pieces = {x};
  if (r.chance(0.5)) {
    for (int64_t k : {5, 9, 13}) pieces.push_back(pool(x, k));
  } else {
    for (int i = 0; i < 3; ++i) pieces.push_back(pool(pieces.back(), 5));
  }
  std::string y = g.node("Concat", pieces, {ai("axis", 1)});
  y = conv(g, y, conv_spec(r.pick<int64_t>({c, 2 * c, 16}), 1));
  g.output(activation(g, y, r.pick({Act::kSiLU, Act::kRelu, Act::kNone})));
}

// A feature pyramid's top-down path: a deep map upsampled (Resize nearest x2) and concatenated
// with a shallower one, then a Conv; two levels.
void gen_neck(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t n = r.chance(0.8) ? 1 : 2;
  const int64_t h = 4 * r.range(1, 4);
  const Act act = r.pick({Act::kSiLU, Act::kRelu, Act::kLeakyRelu});
  std::string p3 = activation(g, conv(g, g.input({n, 3, h, h}), conv_spec(16, 3)), act);
  std::string p4 = activation(g, conv(g, p3, conv_spec(32, 3, 2)), act);
  std::string p5 = activation(g, conv(g, p4, conv_spec(r.pick<int64_t>({32, 48}), 3, 2)), act);
  auto up = [&](const std::string& v) {
    if (r.chance(0.7)) {
      return g.node("Resize", {v, "", g.floats({4}, {1.0f, 1.0f, 2.0f, 2.0f})},
                    {as("mode", "nearest")});
    }
    const Dims d = g.shape(v);
    return g.node("Resize", {v, "", "", g.ints({d[0], d[1], 2 * d[2], 2 * d[3]})},
                  {as("mode", "nearest"), as("coordinate_transformation_mode", "asymmetric"),
                   as("nearest_mode", "floor")});
  };
  std::string t = g.node("Concat", {up(conv(g, p5, conv_spec(32, 1))), p4}, {ai("axis", 1)});
  t = activation(g, conv(g, t, conv_spec(32, 3)), act);
  maybe_output(g, t, 0.3);
  t = g.node("Concat", {up(conv(g, t, conv_spec(16, 1))), p3}, {ai("axis", 1)});
  t = activation(g, conv(g, t, conv_spec(r.pick<int64_t>({16, 24}), 3)), act);
  g.output(t);
}

// A whole small network as exporters give them: a stem, blocks of the families the cpu target
// tunes for (MobileNet/EfficientNet inverted residuals with squeeze-and-excitation, ResNet basic
// and bottleneck blocks, plain Convs) with their channel counts (16, 24, 40, 80, 112, ...), and a
// classifier; the layout and own-kernel choices are then made over the whole model, as for real
// ones.
void gen_net(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t size = 8 * r.range(3, 8);
  const Act act = r.pick({Act::kRelu, Act::kRelu6, Act::kSiLU, Act::kHardSwish});
  std::string x = g.input({r.chance(0.85) ? 1 : 2, 3, size, size});
  int64_t c = r.pick<int64_t>({16, 24, 32});
  x = activation(g, conv(g, x, conv_spec(c, 3, 2)), act);
  if (r.chance(0.3)) {
    x = g.node("MaxPool", {x},
               {ais("kernel_shape", {3, 3}), ais("strides", {2, 2}), ais("pads", {1, 1, 1, 1})});
  }
  const int64_t blocks = r.range(2, 6);
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t h = g.shape(x)[2];
    const int64_t stride = h >= 4 && r.chance(0.35) ? 2 : 1;
    const int64_t out = r.pick<int64_t>({16, 24, 32, 40, 48, 64, 80, 96, 112, 128});
    const std::string in = x;
    switch (r.range(0, 3)) {
      case 0: {
        // Inverted residual: expand, depthwise, squeeze-and-excitation, project.
        const int64_t e = c * r.pick<int64_t>({1, 4, 6});
        std::string y = e == c ? x : activation(g, conv(g, x, conv_spec(e, 1)), act);
        ConvSpec dw = conv_spec(e, r.pick<int64_t>({3, 5}), stride);
        dw.group = e;
        y = activation(g, conv(g, y, dw), act);
        if (r.chance(0.5)) {
          std::string s = g.node("GlobalAveragePool", {y});
          s = activation(g, conv(g, s, conv_spec(std::max<int64_t>(4, e / 4), 1)),
                         r.pick({Act::kSiLU, Act::kRelu}));
          s = activation(g, conv(g, s, conv_spec(e, 1)),
                         r.pick({Act::kSigmoid, Act::kHardSigmoid}));
          y = g.node("Mul", {y, s});
        }
        y = conv(g, y, conv_spec(out, 1));
        x = stride == 1 && out == c ? g.node("Add", {y, in}) : y;
        break;
      }
      case 1: {
        // ResNet basic block.
        std::string y = g.node("Relu", {conv(g, x, conv_spec(out, 3, stride))});
        y = conv(g, y, conv_spec(out, 3));
        const std::string shortcut =
            stride == 1 && out == c ? in : conv(g, in, conv_spec(out, 1, stride));
        x = g.node("Relu", {g.node("Add", {y, shortcut})});
        break;
      }
      case 2: {
        // ResNet bottleneck.
        const int64_t mid = std::max<int64_t>(16, out / 4);
        std::string y = g.node("Relu", {conv(g, x, conv_spec(mid, 1))});
        y = g.node("Relu", {conv(g, y, conv_spec(mid, 3, stride))});
        y = conv(g, y, conv_spec(out, 1));
        const std::string shortcut =
            stride == 1 && out == c ? in : conv(g, in, conv_spec(out, 1, stride));
        x = g.node("Relu", {g.node("Add", {shortcut, y})});
        break;
      }
      default: x = activation(g, conv(g, x, conv_spec(out, 3, stride)), act); break;
    }
    c = out;
    maybe_output(g, x, 0.1);
  }
  const int64_t head = r.pick<int64_t>({64, 100, 160});
  x = activation(g, conv(g, x, conv_spec(head, 1)), act);
  x = g.node("Flatten", {g.node("GlobalAveragePool", {x})});
  x = g.node("Gemm", {x, g.weight({10, head}, 0.3f), g.weight({10}, 0.3f)}, {ai("transB", 1)});
  g.output(g.node("Softmax", {x}, {ai("axis", 1)}));
}

constexpr Pattern kPatterns[] = {
    {"dag",
     "random graphs of Conv/Add/Concat/pool/activation whose intermediates are also "
     "outputs (buffer reuse, in-place sums, views)",
     gen_dag},
    {"detector",
     "YOLO-style head: 1x1 Conv, Reshape to anchors, Transpose, Sigmoid, "
     "Slice/Split box decode, Concat over scales",
     gen_detector},
    {"recognizer",
     "CRNN-style end: Convs and pools to one row, Squeeze/Reshape, Transpose, "
     "MatMul, Softmax/LogSoftmax over classes",
     gen_recognizer},
    {"classifier", "GlobalPool, Flatten/Reshape, Gemm(transB), Softmax; opset 11 and 13",
     gen_classifier},
    {"dynamic",
     "dynamic batch, width and sequence dims with Reshapes computed from Shape: "
     "programs compiled per input shape",
     gen_dynamic},
    {"net",
     "whole small CNNs: stem, inverted residuals with SE, ResNet blocks, classifier; the "
     "layout chosen over the whole model",
     gen_net},
    {"spp", "YOLO SPP/SPPF: 5/9/13 max pools (or three chained 5x5), Concat, 1x1 Conv", gen_spp},
    {"neck", "feature pyramid: Resize nearest x2, Concat with a shallower map, Conv", gen_neck},
};

}  // namespace

std::span<const Pattern> model_patterns() {
  return kPatterns;
}

}  // namespace kiln::differential
