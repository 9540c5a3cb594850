// SPDX-License-Identifier: Apache-2.0
// kiln's own first convolution (stem.h): the kernel against a plain loop, and networks using it
// against ref.
#include "compiler/targets/cpu/stem.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "compiler/ir/builder.h"
#include "compiler/ops/all_ops.h"
#include "compiler/targets/cpu/cpu_target.h"
#include "compiler/targets/cpu/silu.h"
#include "core/testing/compare.h"
#include "core/testing/random.h"
#include "core/testing/scoped_env.h"

namespace kiln::compiler {
namespace {

using kiln::test::random_floats;
using kiln::test::random_tensor;

using kiln::test::ScopedEnv;

using Act = cpu::StemActivation::Kind;

struct Case {
  int64_t in, height, width, kernel, stride, pad, out;
  int64_t pool_kernel, pool_stride, pool_pad;  // pool_kernel 0: none
  bool blocked, bias;
  Act act;
  int threads;
};

const char* act_name(Act a) {
  switch (a) {
    case Act::kNone: return "";
    case Act::kRelu: return "_relu";
    case Act::kClip: return "_clip";
    case Act::kSilu: return "_silu";
  }
  return "?";
}

// The activation as the lowering passes it: Clip as ReLU6, MobileNetV2's.
cpu::StemActivation activation(Act a) {
  return a == Act::kClip ? cpu::StemActivation{a, 0.0f, 6.0f} : cpu::StemActivation{a};
}

double activate(Act a, double v) {
  switch (a) {
    case Act::kNone: return v;
    case Act::kRelu: return std::max(v, 0.0);
    case Act::kClip: return std::min(std::max(v, 0.0), 6.0);
    case Act::kSilu: return v / (1.0 + std::exp(-v));
  }
  return v;
}

std::string name(const Case& c) {
  return "in" + std::to_string(c.in) + "_" + std::to_string(c.height) + "x" +
         std::to_string(c.width) + "_k" + std::to_string(c.kernel) + "s" +
         std::to_string(c.stride) + "p" + std::to_string(c.pad) + "_out" + std::to_string(c.out) +
         (c.pool_kernel != 0 ? "_pool" + std::to_string(c.pool_kernel) + "s" +
                                   std::to_string(c.pool_stride) + "p" + std::to_string(c.pool_pad)
                             : "") +
         (c.blocked ? "_blocked" : "_nhwc") + (c.bias ? "_bias" : "") + act_name(c.act) + "_t" +
         std::to_string(c.threads);
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << name(c);
}

class StemKernel : public testing::TestWithParam<Case> {};

TEST_P(StemKernel, MatchesPlainLoop) {
  if (!cpu::has_fast_silu()) GTEST_SKIP() << "needs AVX-512";
  const Case c = GetParam();
  cpu::StemShape s;
  s.in = c.in;
  s.in_h = c.height;
  s.in_w = c.width;
  s.kernel = c.kernel;
  s.stride = c.stride;
  s.pad = c.pad;
  s.out = c.out;
  s.out_h = (c.height + 2 * c.pad - c.kernel) / c.stride + 1;
  s.out_w = (c.width + 2 * c.pad - c.kernel) / c.stride + 1;
  s.blocked = c.blocked;
  if (c.pool_kernel != 0) {
    // ceil_mode's size: the last window starts inside the input and may hang over its end.
    auto pooled = [&](int64_t n) {
      return (n + c.pool_pad - c.pool_kernel + c.pool_stride - 1) / c.pool_stride + 1;
    };
    s.pool = {c.pool_kernel, c.pool_stride, c.pool_pad, pooled(s.out_h), pooled(s.out_w)};
  }
  const std::vector<float> x = random_floats(static_cast<size_t>(c.in * c.height * c.width), 1,
                                             c.act == Act::kClip ? 20.0f : 1.0f);
  const std::vector<float> w =
      random_floats(static_cast<size_t>(c.out * c.in * c.kernel * c.kernel), 2,
                    1.0f / std::sqrt(static_cast<float>(c.in * c.kernel * c.kernel)));
  std::vector<float> bias = random_floats(static_cast<size_t>(c.out), 3, 0.5f);
  // The convolution (and Relu) in NCHW, in double.
  std::vector<double> conv(static_cast<size_t>(c.out * s.out_h * s.out_w));
  for (int64_t o = 0; o < c.out; ++o) {
    for (int64_t oy = 0; oy < s.out_h; ++oy) {
      for (int64_t ox = 0; ox < s.out_w; ++ox) {
        double sum = c.bias ? bias[static_cast<size_t>(o)] : 0.0;
        for (int64_t i = 0; i < c.in; ++i) {
          for (int64_t ky = 0; ky < c.kernel; ++ky) {
            for (int64_t kx = 0; kx < c.kernel; ++kx) {
              const int64_t iy = oy * c.stride - c.pad + ky;
              const int64_t ix = ox * c.stride - c.pad + kx;
              if (iy < 0 || iy >= c.height || ix < 0 || ix >= c.width) continue;
              sum +=
                  double(w[static_cast<size_t>(((o * c.in + i) * c.kernel + ky) * c.kernel + kx)]) *
                  x[static_cast<size_t>((i * c.height + iy) * c.width + ix)];
            }
          }
        }
        sum = activate(c.act, sum);
        conv[static_cast<size_t>((o * s.out_h + oy) * s.out_w + ox)] = sum;
      }
    }
  }
  const int64_t h = c.pool_kernel != 0 ? s.pool.out_h : s.out_h;
  const int64_t wd = c.pool_kernel != 0 ? s.pool.out_w : s.out_w;
  auto at = [&](int64_t ch, int64_t y, int64_t xx) {
    return static_cast<size_t>(c.blocked ? ((ch / 16 * h + y) * wd + xx) * 16 + ch % 16
                                         : (y * wd + xx) * c.out + ch);
  };
  std::vector<float> want(static_cast<size_t>(c.out * h * wd));
  for (int64_t o = 0; o < c.out; ++o) {
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t xx = 0; xx < wd; ++xx) {
        double v = -std::numeric_limits<double>::infinity();
        if (c.pool_kernel == 0) {
          v = conv[static_cast<size_t>((o * s.out_h + y) * s.out_w + xx)];
        } else {
          for (int64_t dy = 0; dy < c.pool_kernel; ++dy) {
            for (int64_t dx = 0; dx < c.pool_kernel; ++dx) {
              const int64_t cy = y * c.pool_stride - c.pool_pad + dy;
              const int64_t cx = xx * c.pool_stride - c.pool_pad + dx;
              if (cy < 0 || cy >= s.out_h || cx < 0 || cx >= s.out_w) continue;
              v = std::max(v, conv[static_cast<size_t>((o * s.out_h + cy) * s.out_w + cx)]);
            }
          }
        }
        want[at(o, y, xx)] = static_cast<float>(v);
      }
    }
  }
  const std::vector<float> packed = cpu::pack_stem_weights(s, w.data());
  bias.resize(static_cast<size_t>((c.out + 63) / 64 * 64), 0.0f);
  std::vector<float> scratch(static_cast<size_t>(cpu::stem_scratch_floats(s) * c.threads) + 1,
                             std::nanf(""));
  std::vector<float> y(want.size(), -7.0f);
  cpu::stem_conv_f32(s, x.data(), packed.data(), c.bias ? bias.data() : nullptr, activation(c.act),
                     y.data(), scratch.data(), c.threads);
  int bad = 0;
  for (size_t i = 0; i < want.size() && bad < 5; ++i) {
    if (!(std::abs(y[i] - want[i]) <= 1e-4f + 1e-4f * std::abs(want[i]))) {
      ADD_FAILURE() << "element " << i << ": want " << want[i] << ", got " << y[i];
      ++bad;
    }
  }
}

// SqueezeNet's stem (3x3/2, no padding, a ceil_mode 3x3/2 pool), ResNet's (7x7/2 padded by 3, a
// 3x3/2 pool padded by 1), in both layouts; tiles cut at the row's end (widths 11, 9, 19), two
// groups of output channels (80, 128), several bands of pooled rows on one thread (the shared
// convolution row kept), more threads than pooled rows, a 2x2 pool, no pool; MobileNetV2's stem
// (3x3/2 padded by 1 to 32 channels, Clip(0, 6), no pool) and EfficientNet's (the same with SiLU),
// with inputs up to 20 for Clip: values on both sides of its bounds.
INSTANTIATE_TEST_SUITE_P(
    Shapes, StemKernel,
    testing::Values(Case{3, 23, 23, 3, 2, 0, 64, 3, 2, 0, false, true, Act::kRelu, 2},
                    Case{3, 30, 30, 7, 2, 3, 64, 3, 2, 1, true, true, Act::kRelu, 3},
                    Case{1, 17, 19, 5, 1, 2, 80, 0, 1, 0, false, false, Act::kNone, 1},
                    Case{4, 41, 37, 3, 2, 1, 128, 2, 2, 0, true, true, Act::kRelu, 2},
                    Case{3, 64, 40, 3, 2, 1, 32, 3, 2, 1, false, true, Act::kRelu, 1},
                    Case{2, 10, 10, 3, 1, 1, 16, 3, 2, 1, true, false, Act::kRelu, 4},
                    Case{3, 35, 33, 3, 2, 1, 32, 0, 1, 0, true, true, Act::kClip, 2},
                    Case{3, 35, 33, 3, 2, 1, 32, 0, 1, 0, true, true, Act::kSilu, 2},
                    Case{3, 20, 26, 3, 2, 1, 48, 3, 2, 1, false, true, Act::kSilu, 1}),
    [](const testing::TestParamInfo<Case>& info) { return name(info.param); });

// A stem (conv k/stride 2 with pad, Relu, MaxPool 3/2 with pool_pad and ceil_mode) and one 3x3
// convolution after it.
std::shared_ptr<Graph> stem_network(int64_t k, int64_t pad, int64_t pool_pad, int64_t ceil) {
  auto graph = std::make_shared<Graph>("stem");
  GraphBuilder b(*graph);
  Value* x = b.input("image", TensorType(DType::kF32, Shape{1, 3, 33, 31}));
  ops::Conv op;
  op.strides = std::vector<int64_t>{2, 2};
  op.pads = std::vector<int64_t>{pad, pad, pad, pad};
  Value* w = b.constant(random_tensor(Shape{64, 3, k, k}, 5, 0.2f));
  Value* bias = b.constant(random_tensor(Shape{64}, 6, 0.1f));
  Value* h = b.add(Op(ops::Relu{}), {b.add(Op(op), {x, w, bias}, "stem")}, "stem_relu");
  ops::MaxPool pool;
  pool.kernel_shape = std::vector<int64_t>{3, 3};
  pool.strides = std::vector<int64_t>{2, 2};
  pool.pads = std::vector<int64_t>{pool_pad, pool_pad, pool_pad, pool_pad};
  pool.ceil_mode = ceil;
  h = b.add(Op(pool), {h}, "pool");
  ops::Conv next;
  next.pads = std::vector<int64_t>{1, 1, 1, 1};
  Value* w2 = b.constant(random_tensor(Shape{64, 64, 3, 3}, 7, 0.05f));
  b.output(b.add(Op(ops::Relu{}), {b.add(Op(next), {h, w2}, "next")}, "next_relu"));
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return graph;
}

TEST(StemNetwork, OwnStepMatchesRef) {
  if (!cpu::has_fast_silu()) GTEST_SKIP() << "needs AVX-512";
  const std::vector<Argument> inputs = {Argument(random_tensor(Shape{1, 3, 33, 31}, 1, 1.0f))};
  struct Net {
    int64_t k, pad, pool_pad, ceil;
    const char* layout;
  };
  // ResNet's stem in a channel-blocked program, SqueezeNet's in one oneDNN lays out.
  for (const Net& n : {Net{7, 3, 1, 0, "blocked16"}, Net{3, 0, 0, 1, "any"}}) {
    SCOPED_TRACE(std::string("k") + std::to_string(n.k) + " " + n.layout);
    ScopedEnv layout("KILN_CPU_CONV_LAYOUT", n.layout);
    auto ref = make_target("ref");
    ASSERT_TRUE(ref.ok());
    auto want = (*compile(stem_network(n.k, n.pad, n.pool_pad, n.ceil), **ref))->run(inputs);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    for (const char* choice : {"auto", "onednn"}) {
      ScopedEnv stem("KILN_CPU_STEM", choice);
      auto cpu_target = make_target("cpu");
      ASSERT_TRUE(cpu_target.ok());
      auto exe = compile(stem_network(n.k, n.pad, n.pool_pad, n.ceil), **cpu_target);
      ASSERT_TRUE(exe.ok()) << exe.status().to_string();
      const cpu::Program* program = cpu_program(**exe);
      ASSERT_NE(program, nullptr);
      const bool own = std::string(choice) == "auto";
      EXPECT_EQ(program->count_steps("Conv+Relu+MaxPool"), own ? 1 : 0) << choice;
      EXPECT_EQ(program->count_steps("MaxPool"), own ? 0 : 1) << choice;
      auto got = (*exe)->run(inputs);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_TRUE(kiln::test::all_close((*want)[0].tensor(), (*got)[0].tensor(), 1e-4f)) << choice;
    }
  }
}

// MobileNetV2's stem (Conv 3x3/2 to 32 channels, Clip(0, 6)) or EfficientNet's (SiLU as
// x * Sigmoid(x)), then a depthwise 3x3 convolution: a channel-blocked program.
std::shared_ptr<Graph> mobile_stem_network(bool silu) {
  auto graph = std::make_shared<Graph>("mobile_stem");
  GraphBuilder b(*graph);
  Value* x = b.input("image", TensorType(DType::kF32, Shape{1, 3, 35, 33}));
  ops::Conv op;
  op.strides = std::vector<int64_t>{2, 2};
  op.pads = std::vector<int64_t>{1, 1, 1, 1};
  Value* c = b.add(Op(op),
                   {x, b.constant(random_tensor(Shape{32, 3, 3, 3}, 5, 1.0f)),
                    b.constant(random_tensor(Shape{32}, 6, 0.5f))},
                   "stem");
  Value* h = silu ? b.add(Op(ops::Mul{}), {c, b.add(Op(ops::Sigmoid{}), {c}, "sig")}, "silu")
                  : b.add(Op(ops::Clip{}),
                          {c, b.constant(Tensor::scalar(0.0f)), b.constant(Tensor::scalar(6.0f))},
                          "relu6");
  ops::Conv dw;
  dw.pads = std::vector<int64_t>{1, 1, 1, 1};
  dw.group = 32;
  b.output(b.add(Op(dw), {h, b.constant(random_tensor(Shape{32, 1, 3, 3}, 7, 0.3f))}, "dw"));
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return graph;
}

TEST(StemNetwork, ClipAndSiluStemsMatchRefWithoutReorders) {
  if (!cpu::has_fast_silu()) GTEST_SKIP() << "needs AVX-512";
  // Inputs up to 3: the convolution's outputs reach past 6 (Clip's upper bound) and below 0.
  const std::vector<Argument> inputs = {Argument(random_tensor(Shape{1, 3, 35, 33}, 1, 3.0f))};
  for (bool silu : {false, true}) {
    SCOPED_TRACE(silu ? "silu" : "clip");
    auto ref = make_target("ref");
    ASSERT_TRUE(ref.ok());
    auto want = (*compile(mobile_stem_network(silu), **ref))->run(inputs);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    const std::string kind = silu ? "Conv+SiLU" : "Conv+Clip";
    for (const char* choice : {"auto", "onednn"}) {
      ScopedEnv stem("KILN_CPU_STEM", choice);
      auto cpu_target = make_target("cpu");
      ASSERT_TRUE(cpu_target.ok());
      auto exe = compile(mobile_stem_network(silu), **cpu_target);
      ASSERT_TRUE(exe.ok()) << exe.status().to_string();
      const cpu::Program* program = cpu_program(**exe);
      ASSERT_NE(program, nullptr);
      EXPECT_EQ(program->count_steps(kind), 1) << choice;
      // The own step reads the NCHW image and writes nChw16c for the depthwise step, whose
      // output alone is reordered (to NCHW, the graph's); oneDNN's brgconv has the image
      // reordered to NHWC and its own output to nChw16c too.
      EXPECT_EQ(program->count_steps("Reorder"), std::string(choice) == "auto" ? 1 : 3) << choice;
      auto got = (*exe)->run(inputs);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_TRUE(kiln::test::all_close((*want)[0].tensor(), (*got)[0].tensor(), 1e-4f)) << choice;
    }
  }
}

TEST(StemNetwork, UnknownChoiceIsAClearError) {
  ScopedEnv stem("KILN_CPU_STEM", "fast");
  auto t = make_target("cpu");
  ASSERT_TRUE(t.ok());
  auto exe = compile(stem_network(7, 3, 1, 0), **t);
  ASSERT_FALSE(exe.ok());
  EXPECT_NE(exe.status().to_string().find("KILN_CPU_STEM is \"fast\""), std::string::npos)
      << exe.status().to_string();
}

}  // namespace
}  // namespace kiln::compiler
