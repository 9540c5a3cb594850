// SPDX-License-Identifier: Apache-2.0
// kiln's own 1x1 convolution (conv1x1.h): the kernel against a plain loop, and networks using it
// against ref; so too its Winograd 3x3s (winograd_conv.h).
#include "compiler/targets/cpu/conv1x1.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <functional>
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

// W [out, in] packed as OIhw16i64o: [out/64][in/16][16][64], output channels padded with zeros.
std::vector<float> pack_oi16i64o(const std::vector<float>& w, int64_t out, int64_t in) {
  const int64_t groups = (out + 63) / 64;
  std::vector<float> packed(static_cast<size_t>(groups * in * 64), 0.0f);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      packed[static_cast<size_t>((o / 64 * in + i) * 64 + o % 64)] =
          w[static_cast<size_t>(o * in + i)];
    }
  }
  return packed;
}

struct Case {
  int64_t in, out, height, width;
  bool bias, residual, in_place, relu;
  int threads;
};

std::string name(const Case& c) {
  return "in" + std::to_string(c.in) + "_out" + std::to_string(c.out) + "_" +
         std::to_string(c.height) + "x" + std::to_string(c.width) + (c.bias ? "_bias" : "") +
         (c.residual ? (c.in_place ? "_inplace" : "_residual") : "") + (c.relu ? "_relu" : "") +
         "_t" + std::to_string(c.threads);
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << name(c);
}

class Conv1x1Kernel : public testing::TestWithParam<Case> {};

TEST_P(Conv1x1Kernel, MatchesPlainLoop) {
  if (!cpu::has_fast_silu()) GTEST_SKIP() << "needs AVX-512";
  const Case c = GetParam();
  const cpu::Conv1x1Shape shape{c.in, c.out, c.height * c.width};
  const auto n_in = static_cast<size_t>(c.in * shape.pixels);
  const auto n_out = static_cast<size_t>(c.out * shape.pixels);
  // x and y in nChw16c of a batch of one with channels a multiple of 16: [C/16][pixels][16].
  const std::vector<float> x = random_floats(n_in, 1, 1.0f);
  const std::vector<float> w =
      random_floats(static_cast<size_t>(c.out * c.in), 2, 1.0f / std::sqrt(float(c.in)));
  const std::vector<float> bias = random_floats(static_cast<size_t>(c.out), 3, 0.5f);
  const std::vector<float> residual = random_floats(n_out, 4, 1.0f);
  auto at = [&](int64_t channel, int64_t pixel, int64_t pixels) {
    return static_cast<size_t>((channel / 16 * pixels + pixel) * 16 + channel % 16);
  };
  std::vector<float> want(n_out);
  for (int64_t o = 0; o < c.out; ++o) {
    for (int64_t p = 0; p < shape.pixels; ++p) {
      double sum = c.bias ? bias[static_cast<size_t>(o)] : 0.0;
      for (int64_t i = 0; i < c.in; ++i) {
        sum += double(w[static_cast<size_t>(o * c.in + i)]) * x[at(i, p, shape.pixels)];
      }
      if (c.residual) sum += residual[at(o, p, shape.pixels)];
      if (c.relu) sum = std::max(sum, 0.0);
      want[at(o, p, shape.pixels)] = static_cast<float>(sum);
    }
  }
  const std::vector<float> packed = pack_oi16i64o(w, c.out, c.in);
  std::vector<float> y(n_out, -7.0f);
  if (c.in_place) y = residual;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(c.threads);
  cpu::conv1x1_f32(shape, x.data(), packed.data(), c.bias ? bias.data() : nullptr,
                   !c.residual  ? nullptr
                   : c.in_place ? y.data()
                                : residual.data(),
                   c.relu, y.data());
  omp_set_num_threads(saved);
  int bad = 0;
  for (size_t i = 0; i < n_out && bad < 5; ++i) {
    if (!(std::abs(y[i] - want[i]) <= 1e-4f + 1e-4f * std::abs(want[i]))) {
      ADD_FAILURE() << "element " << i << ": want " << want[i] << ", got " << y[i];
      ++bad;
    }
  }
}

// Remainder tiles of fewer than 4 output blocks (48, 16) and 7 pixels (5x5, 3x1), chunks of input
// channels (256 = two of 128), each post-op alone and together, one to three threads, more items
// than threads (14x14 split into parts). Stride 2 runs the same kernel over a compacted input: the
// network test below has one.
INSTANTIATE_TEST_SUITE_P(Shapes, Conv1x1Kernel,
                         testing::Values(Case{32, 48, 5, 5, true, false, false, true, 2},
                                         Case{256, 64, 7, 7, true, true, false, true, 2},
                                         Case{256, 64, 7, 7, false, true, true, false, 1},
                                         Case{16, 16, 3, 1, false, false, false, false, 2},
                                         Case{144, 320, 2, 7, true, true, true, true, 2},
                                         Case{64, 128, 14, 14, false, false, false, true, 3},
                                         Case{160, 64, 7, 7, true, false, false, true, 2},
                                         Case{32, 80, 5, 5, true, true, false, false, 2},
                                         Case{256, 48, 7, 4, false, false, false, false, 1},
                                         Case{96, 576, 6, 7, true, true, false, true, 2}),
                         [](const testing::TestParamInfo<Case>& info) { return name(info.param); });

using kiln::test::ScopedEnv;

Value* conv(GraphBuilder& b, Value* x, int64_t in, int64_t out, int64_t k, int64_t stride,
            uint32_t seed) {
  ops::Conv op;
  op.strides = std::vector<int64_t>{stride, stride};
  op.pads = std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2};
  const float scale = 1.0f / std::sqrt(static_cast<float>(in * k * k));
  Value* w = b.constant(random_tensor(Shape{out, in, k, k}, seed, scale));
  Value* bias = b.constant(random_tensor(Shape{out}, seed + 1, 0.1f));
  return b.add(Op(op), {x, w, bias}, "conv" + std::to_string(seed));
}

// A ResNet bottleneck at 7x7 in nChw16c: 3x3 stem (oneDNN), 1x1 64 -> 48 + Relu, 1x1 48 -> 64
// with the stem's output as residual + Relu, then a strided 1x1 (to 4x4), a 1x1 whose output is
// pooled, and a stride-2 3x3 (oneDNN, NHWC) followed by a 1x1.
std::shared_ptr<Graph> bottleneck() {
  auto graph = std::make_shared<Graph>("bottleneck");
  GraphBuilder b(*graph);
  Value* x = b.input("image", TensorType(DType::kF32, Shape{1, 16, 7, 7}));
  Value* stem = b.add(Op(ops::Relu{}), {conv(b, x, 16, 64, 3, 1, 10)}, "stem_relu");
  Value* h = b.add(Op(ops::Relu{}), {conv(b, stem, 64, 48, 1, 1, 20)}, "squeeze_relu");
  Value* sum = b.add(Op(ops::Add{}), {conv(b, h, 48, 64, 1, 1, 30), stem}, "add");
  h = b.add(Op(ops::Relu{}), {sum}, "out");
  Value* strided = conv(b, h, 64, 32, 1, 2, 40);
  b.output(strided);
  Value* down = b.add(Op(ops::Relu{}), {conv(b, h, 64, 32, 3, 2, 60)}, "down_relu");
  b.output(b.add(Op(ops::Relu{}), {conv(b, down, 32, 32, 1, 1, 70)}, "after_down_relu"));
  Value* last = b.add(Op(ops::Relu{}), {conv(b, h, 64, 96, 1, 1, 50)}, "last_relu");
  b.output(b.add(Op(ops::GlobalAveragePool{}), {last}, "gap"));
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return graph;
}

std::vector<Tensor> run(const std::shared_ptr<Graph>& graph, const char* target,
                        const std::vector<Tensor>& inputs, int* own_steps = nullptr) {
  auto t = make_target(target);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  auto exe = compile(graph, **t);
  EXPECT_TRUE(exe.ok()) << exe.status().to_string();
  if (!exe.ok()) return {};
  if (own_steps != nullptr) {
    const cpu::Program* program = cpu_program(**exe);
    EXPECT_NE(program, nullptr);
    *own_steps = 0;
    for (const auto& step : program->steps()) {
      if (step->node != nullptr && step->node->kind() == OpKind::kConv &&
          dynamic_cast<const cpu::PrimitiveStep*>(step.get()) == nullptr) {
        ++*own_steps;
      }
    }
    EXPECT_EQ(program->count_steps("GlobalAveragePool"), 0) << "pooled by the last convolution";
    // The stride-2 3x3 of a batch of one writes NHWC (oneDNN's brgconv), reordered into nChw16c
    // for the 1x1 after it.
    int nhwc = 0;
    for (const auto& step : program->steps()) {
      if (step->node == nullptr || step->node->name() != "conv60" || step->kind != "Conv+Relu")
        continue;
      const dnnl::memory::desc want({1, 32, 4, 4}, dnnl::memory::data_type::f32,
                                    dnnl::memory::format_tag::nhwc);
      for (int id : step->writes)
        nhwc += program->buffers()[static_cast<size_t>(id)].layout == want;
    }
    EXPECT_EQ(nhwc, 1);
  }
  auto out = (*exe)->run(std::vector<Argument>(inputs.begin(), inputs.end()));
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  std::vector<Tensor> tensors;
  if (out.ok()) {
    for (const Argument& a : *out) tensors.push_back(a.tensor());
  }
  return tensors;
}

TEST(Conv1x1Network, OwnStepsMatchRef) {
  if (!cpu::has_fast_silu()) GTEST_SKIP() << "needs AVX-512";
  ScopedEnv layout("KILN_CPU_CONV_LAYOUT", "blocked16");
  const std::vector<Tensor> inputs = {random_tensor(Shape{1, 16, 7, 7}, 1, 1.0f)};
  const std::vector<Tensor> want = run(bottleneck(), "ref", inputs);
  for (const char* choice : {"auto", "own", "onednn"}) {
    ScopedEnv conv1x1("KILN_CPU_CONV1X1", choice);
    int own = -1;
    const std::vector<Tensor> got = run(bottleneck(), "cpu", inputs, &own);
    // The five 1x1s, the strided one too (the 3x3s stay on oneDNN); on oneDNN only the pooled
    // one, whose pool wraps its primitive.
    EXPECT_EQ(own, std::string(choice) == "onednn" ? 1 : 5) << choice;
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < want.size(); ++o) {
      ASSERT_EQ(got[o].shape(), want[o].shape());
      for (int64_t i = 0; i < want[o].numel(); ++i) {
        const float a = want[o].data<float>()[i];
        const float g = got[o].data<float>()[i];
        ASSERT_LE(std::abs(a - g), 1e-4f + 1e-4f * std::abs(a))
            << choice << ": output " << o << " element " << i;
      }
    }
  }
}

// Compiles `make()` for ref and, with `flag`=`choice` (KILN_CPU_CONV1X1 unless named), for cpu
// (channel-blocked), checks cpu's output against ref's and returns how many of cpu's convolution
// steps run on kiln's kernels rather than as oneDNN primitives (-1 when it did not compile or
// run).
int own_steps_matching_ref(const std::function<std::shared_ptr<Graph>()>& make,
                           const std::vector<Argument>& inputs, const char* choice,
                           const char* flag = "KILN_CPU_CONV1X1") {
  ScopedEnv layout("KILN_CPU_CONV_LAYOUT", "blocked16");
  auto ref = make_target("ref");
  auto want = (*compile(make(), **ref))->run(inputs);
  EXPECT_TRUE(want.ok()) << want.status().to_string();
  ScopedEnv conv1x1(flag, choice);
  auto cpu_target = make_target("cpu");
  auto exe = compile(make(), **cpu_target);
  EXPECT_TRUE(exe.ok()) << exe.status().to_string();
  if (!want.ok() || !exe.ok()) return -1;
  auto got = (*exe)->run(inputs);
  EXPECT_TRUE(got.ok()) << got.status().to_string();
  if (!got.ok()) return -1;
  for (size_t o = 0; o < want->size(); ++o) {
    EXPECT_TRUE(kiln::test::all_close((*want)[o].tensor(), (*got)[o].tensor(), 1e-4f))
        << flag << "=" << choice << ": output " << o;
  }
  int own = 0;
  for (const auto& step : cpu_program(**exe)->steps()) {
    own += step->node != nullptr && step->node->kind() == OpKind::kConv &&
           step->kind.rfind("Conv", 0) == 0 &&
           dynamic_cast<const cpu::PrimitiveStep*>(step.get()) == nullptr;
  }
  return own;
}

// A classifier's 1x1 to a channel count that is no multiple of 16 (SqueezeNet's 512 -> 1000):
// the last block is nChw16c's padding, zero; with its Relu, and with a GlobalAveragePool after
// it (summed by the step's own pass, around oneDNN's primitive too) or without.
TEST(Conv1x1Network, PaddedOutputChannelsMatchRef) {
  if (!cpu::has_fast_silu()) GTEST_SKIP() << "needs AVX-512";
  for (bool pooled : {false, true}) {
    SCOPED_TRACE(pooled ? "pooled" : "not pooled");
    auto make = [pooled] {
      auto graph = std::make_shared<Graph>("classifier");
      GraphBuilder b(*graph);
      Value* x = b.input("features", TensorType(DType::kF32, Shape{1, 64, 13, 13}));
      Value* h = b.add(Op(ops::Relu{}), {conv(b, x, 64, 1000, 1, 1, 80)}, "classifier_relu");
      b.output(pooled ? b.add(Op(ops::GlobalAveragePool{}), {h}, "gap") : h);
      EXPECT_TRUE(b.status().ok()) << b.status().to_string();
      return graph;
    };
    const std::vector<Argument> inputs = {Argument(random_tensor(Shape{1, 64, 13, 13}, 2, 1.0f))};
    EXPECT_EQ(own_steps_matching_ref(make, inputs, "auto"), 1);
    EXPECT_EQ(own_steps_matching_ref(make, inputs, "onednn"), pooled ? 1 : 0);
  }
}

// k x k convolutions to 7x7 and less with 256 or more outputs run as the 1x1 over their input
// spread by taps (ResNet-50's layer-4 3x3s, the stride-1 ones when the own Winograd is off):
// stride 2 from 14x14, stride 1 padded by 1, and a 5x5 with a residual Add and Relu after it.
TEST(Conv1x1Network, SmallKxKConvolutionsRunAsSpreadOneByOnes) {
  if (!cpu::has_fast_silu()) GTEST_SKIP() << "needs AVX-512";
  // The stride-1 3x3 would run as the own Winograd otherwise (WinogradNetwork below).
  ScopedEnv winograd("KILN_CPU_WINOGRAD", "onednn");
  auto make = [] {
    auto graph = std::make_shared<Graph>("spread");
    GraphBuilder b(*graph);
    Value* x = b.input("features", TensorType(DType::kF32, Shape{1, 32, 14, 14}));
    Value* down = b.add(Op(ops::Relu{}), {conv(b, x, 32, 256, 3, 2, 90)}, "down_relu");
    Value* h = b.add(Op(ops::Relu{}), {conv(b, down, 256, 256, 3, 1, 92)}, "h_relu");
    Value* sum = b.add(Op(ops::Add{}), {conv(b, h, 256, 256, 5, 1, 94), down}, "sum");
    b.output(b.add(Op(ops::Relu{}), {sum}, "out"));
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  const std::vector<Argument> inputs = {Argument(random_tensor(Shape{1, 32, 14, 14}, 3, 1.0f))};
  EXPECT_EQ(own_steps_matching_ref(make, inputs, "auto"), 3);
  EXPECT_EQ(own_steps_matching_ref(make, inputs, "onednn"), 0);
}

// Past 7x7, a 1x1 from 64 input channels runs on the own kernel when its outputs are a multiple of
// 64 (ResNet-50's reduce 1x1s: 256 -> 64 and 512 -> 128, here at 15x15 with 288 input channels,
// which the kernel takes in three passes of 96) or 256 and more; to 96 outputs (MobileNetV2's
// projections) it stays on oneDNN's jit_1x1.
TEST(Conv1x1Network, ReduceConvolutionsRunOnTheOwnKernel) {
  if (!cpu::has_fast_silu()) GTEST_SKIP() << "needs AVX-512";
  auto make = [] {
    auto graph = std::make_shared<Graph>("reduce");
    GraphBuilder b(*graph);
    Value* x = b.input("features", TensorType(DType::kF32, Shape{1, 288, 15, 15}));
    Value* h = b.add(Op(ops::Relu{}), {conv(b, x, 288, 64, 1, 1, 100)}, "reduce_relu");
    Value* wide = b.add(Op(ops::Relu{}), {conv(b, h, 64, 128, 1, 1, 102)}, "wide_relu");
    Value* narrow = conv(b, wide, 128, 96, 1, 1, 104);
    b.output(b.add(Op(ops::Relu{}), {conv(b, narrow, 96, 288, 1, 1, 106)}, "out"));
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  const std::vector<Argument> inputs = {Argument(random_tensor(Shape{1, 288, 15, 15}, 4, 1.0f))};
  EXPECT_EQ(own_steps_matching_ref(make, inputs, "auto"), 3);
  EXPECT_EQ(own_steps_matching_ref(make, inputs, "own"), 4);
  EXPECT_EQ(own_steps_matching_ref(make, inputs, "onednn"), 0);
}

// 3x3 stride-1 convolutions from 128 or more channels to a multiple of 64 outputs, from 7x7 to
// 28x28, run as kiln's own Winograd (ResNet-50's layer-2, 3 and 4 3x3s): with a bias and Relu,
// at odd sizes (the last tiles cut), from 144 channels (passes of 96 and 48), without a bias or
// Relu; F(2x2, 3x3) to 14x14, F(4x4, 3x3) at 27x27 (a column of tiles cut to 3); the one group of
// the second split into two ranges of tiles; one with a residual Add stays on oneDNN.
TEST(WinogradNetwork, OwnWinogradMatchesRef) {
  if (!cpu::has_fast_silu()) GTEST_SKIP() << "needs AVX-512";
  for (const int64_t side : {14, 13, 9, 7, 27}) {
    SCOPED_TRACE(std::to_string(side) + "x" + std::to_string(side));
    auto make = [side] {
      auto graph = std::make_shared<Graph>("winograd");
      GraphBuilder b(*graph);
      Value* x = b.input("features", TensorType(DType::kF32, Shape{1, 144, side, side}));
      Value* h = b.add(Op(ops::Relu{}), {conv(b, x, 144, 128, 3, 1, 110)}, "first_relu");
      ops::Conv plain;
      plain.pads = std::vector<int64_t>{1, 1, 1, 1};
      Value* w = b.constant(random_tensor(Shape{64, 128, 3, 3}, 112, 0.03f));
      Value* second = b.add(Op(plain), {h, w}, "no_bias");
      b.output(second);
      Value* sum = b.add(Op(ops::Add{}), {conv(b, second, 64, 64, 3, 1, 114), second}, "sum");
      b.output(b.add(Op(ops::Relu{}), {sum}, "out"));
      EXPECT_TRUE(b.status().ok()) << b.status().to_string();
      return graph;
    };
    const std::vector<Argument> inputs = {
        Argument(random_tensor(Shape{1, 144, side, side}, 5, 1.0f))};
    EXPECT_EQ(own_steps_matching_ref(make, inputs, "auto", "KILN_CPU_WINOGRAD"), 2);
    EXPECT_EQ(own_steps_matching_ref(make, inputs, "onednn", "KILN_CPU_WINOGRAD"), 0);
  }
}

// KILN_CPU_WINOGRAD=own takes it wherever it applies: 64 channels at 16x16, F(4x4, 3x3) in one
// group (auto leaves that to oneDNN, which is faster at ResNet-50's 64 channels).
TEST(WinogradNetwork, OwnChoiceTakesEveryShapeItApplies) {
  if (!cpu::has_fast_silu()) GTEST_SKIP() << "needs AVX-512";
  auto make = [] {
    auto graph = std::make_shared<Graph>("wide");
    GraphBuilder b(*graph);
    Value* x = b.input("features", TensorType(DType::kF32, Shape{1, 64, 16, 16}));
    b.output(b.add(Op(ops::Relu{}), {conv(b, x, 64, 64, 3, 1, 120)}, "out"));
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  const std::vector<Argument> inputs = {Argument(random_tensor(Shape{1, 64, 16, 16}, 6, 1.0f))};
  EXPECT_EQ(own_steps_matching_ref(make, inputs, "auto", "KILN_CPU_WINOGRAD"), 0);
  EXPECT_EQ(own_steps_matching_ref(make, inputs, "own", "KILN_CPU_WINOGRAD"), 1);
}

// The own kernels' variables (kernel_choice() in dnnl_steps.h) refuse other values by name.
TEST(Conv1x1Network, UnknownChoiceIsAClearError) {
  for (const char* flag : {"KILN_CPU_CONV1X1", "KILN_CPU_WINOGRAD"}) {
    ScopedEnv choice(flag, "fast");
    auto t = make_target("cpu");
    ASSERT_TRUE(t.ok());
    auto exe = compile(bottleneck(), **t);
    ASSERT_FALSE(exe.ok()) << flag;
    EXPECT_NE(exe.status().to_string().find(std::string(flag) + " is \"fast\""), std::string::npos)
        << exe.status().to_string();
  }
}

}  // namespace
}  // namespace kiln::compiler
