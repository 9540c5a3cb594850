// SPDX-License-Identifier: Apache-2.0
// The cpu target against ref: random convolutions, matmuls, pools and elementwise ops (fixed
// seeds, odd sizes, groups, strides) must agree, and must actually run on oneDNN.
#include "compiler/targets/cpu/cpu_target.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <span>
#include <thread>

#include "compiler/ir/builder.h"
#include "compiler/ir/printer.h"
#include "compiler/ops/all_ops.h"

namespace kiln::compiler {
namespace {

Tensor random_tensor(Shape shape, uint32_t seed) {
  Tensor t(DType::kF32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : t.span<float>()) v = dist(rng);
  return t;
}

TensorType f32(const Shape& shape) {
  return TensorType(DType::kF32, shape);
}

using BuildFn = std::function<void(GraphBuilder&, const std::vector<Value*>&)>;

struct Compiled {
  std::shared_ptr<Executable> exe;
  std::vector<Tensor> outputs;
};

Compiled compile_and_run(const char* target_name, const std::vector<Tensor>& inputs,
                         const BuildFn& build) {
  auto graph = std::make_shared<Graph>("case");
  GraphBuilder b(*graph);
  std::vector<Value*> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    values.push_back(b.input("in" + std::to_string(i), f32(inputs[i].shape())));
  }
  build(b, values);
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  auto target = make_target(target_name);
  EXPECT_TRUE(target.ok()) << target.status().to_string();
  auto exe = compile(graph, **target);
  EXPECT_TRUE(exe.ok()) << exe.status().to_string();
  if (!exe.ok()) return {};
  std::vector<Argument> args;
  for (const Tensor& t : inputs) args.emplace_back(t);
  auto out = (*exe)->run(std::move(args));
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  Compiled c{*exe, {}};
  if (out.ok()) {
    for (const Argument& a : *out) c.outputs.push_back(a.tensor());
  }
  return c;
}

// Runs the graph on ref and cpu and compares every output; returns the cpu executable.
std::shared_ptr<Executable> expect_cpu_matches_ref(const std::vector<Tensor>& inputs,
                                                   const BuildFn& build, int dnnl_nodes) {
  Compiled want = compile_and_run("ref", inputs, build);
  Compiled got = compile_and_run("cpu", inputs, build);
  if (got.exe == nullptr) return nullptr;
  EXPECT_EQ(cpu_dnnl_node_count(*got.exe), dnnl_nodes) << print_graph(got.exe->graph());
  EXPECT_EQ(want.outputs.size(), got.outputs.size());
  for (size_t o = 0; o < std::min(want.outputs.size(), got.outputs.size()); ++o) {
    const Tensor& a = want.outputs[o];
    const Tensor& g = got.outputs[o];
    EXPECT_EQ(a.shape(), g.shape());
    if (a.shape() != g.shape()) continue;
    int bad = 0;
    for (int64_t i = 0; i < a.numel() && bad < 5; ++i) {
      const float x = a.data<float>()[i];
      const float y = g.data<float>()[i];
      if (!(std::abs(x - y) <= 1e-4f + 1e-4f * std::abs(x))) {
        ADD_FAILURE() << "output " << o << " element " << i << ": ref " << x << ", cpu " << y;
        ++bad;
      }
    }
  }
  return got.exe;
}

struct ConvCase {
  Shape x;
  Shape w;
  int64_t group = 1;
  std::vector<int64_t> strides;
  std::vector<int64_t> pads;
  std::vector<int64_t> dilations;
  std::string auto_pad = "NOTSET";
  bool bias = true;
  bool relu = false;
  bool constant_weights = true;
};

void run_conv_case(const ConvCase& c, uint32_t seed) {
  SCOPED_TRACE(::testing::Message()
               << "x " << c.x.to_string() << " w " << c.w.to_string() << " group " << c.group);
  std::vector<Tensor> inputs = {random_tensor(c.x, seed)};
  const Tensor w = random_tensor(c.w, seed + 1);
  const Tensor bias = random_tensor(Shape{c.w[0]}, seed + 2);
  if (!c.constant_weights) inputs.push_back(w);
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    ops::Conv op;
    op.group = c.group;
    op.auto_pad = c.auto_pad;
    if (!c.strides.empty()) op.strides = c.strides;
    if (!c.pads.empty()) op.pads = c.pads;
    if (!c.dilations.empty()) op.dilations = c.dilations;
    std::vector<Value*> args = {in[0], c.constant_weights ? b.constant(w, "w") : in[1]};
    if (c.bias) args.push_back(b.constant(bias, "b"));
    Value* y = b.add(Op(op), args, "conv");
    b.output(c.relu ? b.add(Op(ops::Relu{}), {y}, "relu") : y);
  };
  auto exe = expect_cpu_matches_ref(inputs, build, 1);
  if (exe != nullptr && c.relu) {
    EXPECT_NE(print_graph(exe->graph()).find("Conv[activation=\"Relu\""), std::string::npos)
        << print_graph(exe->graph());
  }
}

TEST(CpuTarget, ConvMatchesRef) {
  std::vector<ConvCase> cases = {
      {.x = Shape{2, 3, 9, 7}, .w = Shape{5, 3, 3, 3}, .strides = {2, 1}, .pads = {1, 0, 1, 2}},
      {.x = Shape{1, 6, 8, 8},
       .w = Shape{6, 2, 3, 3},
       .group = 3,
       .strides = {2, 2},
       .pads = {2, 2, 2, 2},
       .dilations = {2, 2}},
      {.x = Shape{1, 4, 5, 5},
       .w = Shape{4, 1, 3, 3},
       .group = 4,
       .auto_pad = "SAME_UPPER",
       .relu = true},
      {.x = Shape{2, 3, 11}, .w = Shape{4, 3, 5}, .strides = {3}, .pads = {2, 1}, .bias = false},
      {.x = Shape{3, 7, 13, 1}, .w = Shape{9, 7, 1, 1}, .relu = true},
      {.x = Shape{1, 2, 4, 5, 3}, .w = Shape{3, 2, 2, 3, 1}, .pads = {1, 0, 0, 0, 1, 0}},
      {.x = Shape{1, 16, 14, 14},
       .w = Shape{32, 16, 3, 3},
       .strides = {2, 2},
       .pads = {1, 1, 1, 1},
       .relu = true},
      {.x = Shape{2, 5, 6, 6},
       .w = Shape{3, 5, 2, 2},
       .auto_pad = "SAME_LOWER",
       .bias = false,
       .constant_weights = false},
  };
  uint32_t seed = 100;
  for (const ConvCase& c : cases) run_conv_case(c, seed += 10);
}

TEST(CpuTarget, MatMulAndGemmMatchRef) {
  // [3,5,7] x constant [7,4]: flattened rows, packed weights.
  const Tensor b74 = random_tensor(Shape{7, 4}, 2);
  expect_cpu_matches_ref(
      {random_tensor(Shape{3, 5, 7}, 1)},
      [&](GraphBuilder& b, const std::vector<Value*>& in) {
        b.output(b.add(Op(ops::MatMul{}), {in[0], b.constant(b74)}, "mm"));
      },
      1);
  // Batch broadcast: [2,3,5,7] x [3,7,6], both inputs.
  expect_cpu_matches_ref(
      {random_tensor(Shape{2, 3, 5, 7}, 3), random_tensor(Shape{3, 7, 6}, 4)},
      [&](GraphBuilder& b, const std::vector<Value*>& in) {
        b.output(b.add(Op(ops::MatMul{}), {in[0], in[1]}, "mm"));
      },
      1);
  // Gemm: transA, transB, alpha, beta, constant C over columns.
  const Tensor w = random_tensor(Shape{33, 17}, 6);
  const Tensor c = random_tensor(Shape{33}, 7);
  expect_cpu_matches_ref(
      {random_tensor(Shape{17, 5}, 5)},
      [&](GraphBuilder& b, const std::vector<Value*>& in) {
        ops::Gemm op;
        op.transA = 1;
        op.transB = 1;
        op.alpha = 0.5f;
        op.beta = 2.0f;
        b.output(b.add(Op(op), {in[0], b.constant(w), b.constant(c)}, "gemm"));
      },
      1);
  // Gemm with a runtime C of one column, broadcast over rows.
  expect_cpu_matches_ref(
      {random_tensor(Shape{4, 9}, 8), random_tensor(Shape{9, 3}, 9),
       random_tensor(Shape{4, 1}, 10)},
      [&](GraphBuilder& b, const std::vector<Value*>& in) {
        b.output(b.add(Op(ops::Gemm{}), {in[0], in[1], in[2]}, "gemm"));
      },
      1);
}

TEST(CpuTarget, PoolsMatchRef) {
  const Tensor x = random_tensor(Shape{2, 3, 11, 8}, 20);
  auto one = [&](Op op) {
    SCOPED_TRACE(std::string(op.name()) + op.attributes_string());
    expect_cpu_matches_ref(
        {x},
        [&](GraphBuilder& b, const std::vector<Value*>& in) {
          b.output(b.add(op, {in[0]}, "pool"));
        },
        1);
  };
  ops::MaxPool max;
  max.kernel_shape = std::vector<int64_t>{3, 3};
  max.strides = std::vector<int64_t>{2, 2};
  max.pads = std::vector<int64_t>{1, 0, 1, 1};
  one(Op(max));
  max.ceil_mode = 1;
  one(Op(max));
  max.dilations = std::vector<int64_t>{2, 1};
  one(Op(max));
  ops::AveragePool avg;
  avg.kernel_shape = std::vector<int64_t>{3, 2};
  avg.strides = std::vector<int64_t>{2, 3};
  avg.pads = std::vector<int64_t>{1, 1, 1, 0};
  one(Op(avg));
  avg.count_include_pad = 1;
  one(Op(avg));
  avg.count_include_pad = 0;
  avg.ceil_mode = 1;
  one(Op(avg));
  one(Op(ops::GlobalAveragePool{}));
}

TEST(CpuTarget, ElementwiseMatchesRefWithBroadcastOnEitherSide) {
  const Tensor x = random_tensor(Shape{2, 3, 4, 5}, 30);
  const Tensor row = random_tensor(Shape{3, 1, 5}, 31);
  expect_cpu_matches_ref(
      {x, row},
      [&](GraphBuilder& b, const std::vector<Value*>& in) {
        Value* sum = b.add(Op(ops::Add{}), {in[1], in[0]}, "add");
        Value* prod = b.add(Op(ops::Mul{}), {sum, in[1]}, "mul");
        b.output(b.add(Op(ops::Relu{}), {prod}, "relu"));
      },
      3);
}

// PaddleOCR's hardswish scaled by a learned constant: Mul(Mul(x, Clip(x + 3)), 1/6) then Mul by a
// scalar, i.e. two linear post-ops in a row after a binary Mul and after a Conv (the cpu target
// once scaled by 1/6 twice).
TEST(CpuTarget, AdjacentScalesAfterAStepMatchRef) {
  const Tensor x = random_tensor(Shape{1, 16, 6, 10}, 50);
  const Tensor y = random_tensor(Shape{1, 16, 6, 10}, 51);
  const Tensor w = random_tensor(Shape{16, 16, 1, 1}, 52);
  expect_cpu_matches_ref(
      {x, y},
      [&](GraphBuilder& b, const std::vector<Value*>& in) {
        Value* six = b.constant(Tensor::from_vector<float>({6.0f}), "six");
        Value* learned = b.constant(Tensor::from_vector<float>({0.1675f}), "learned");
        Value* prod = b.add(Op(ops::Mul{}), {in[0], in[1]}, "mul");
        Value* div = b.add(Op(ops::Div{}), {prod, six}, "div");
        b.output(b.add(Op(ops::Mul{}), {learned, div}, "scale"));
        Value* conv = b.add(Op(ops::Conv{}), {in[0], b.constant(w, "w")}, "conv");
        Value* h = b.constant(Tensor::from_vector<float>({0.5f}), "h");
        Value* half = b.add(Op(ops::Mul{}), {conv, h}, "half");
        b.output(b.add(Op(ops::Mul{}), {half, learned}, "quarter"));
      },
      6);  // every node, in two steps
}

TEST(CpuTarget, GeluAndSwishOpsRunOnOneDnn) {
  // Gelu (tanh form) as a post-op of the MatMul, Gelu (erf form) and Swish as eltwise steps.
  const Tensor w = random_tensor(Shape{6, 4}, 43);
  auto exe = expect_cpu_matches_ref(
      {random_tensor(Shape{3, 6}, 42)},
      [&](GraphBuilder& b, const std::vector<Value*>& in) {
        ops::Gelu tanh_form;
        tanh_form.approximate = "tanh";
        ops::Swish swish;
        swish.alpha = 1.5f;
        Value* mm = b.add(Op(ops::MatMul{}), {in[0], b.constant(w, "w")}, "mm");
        Value* g = b.add(Op(tanh_form), {mm}, "gelu_tanh");
        b.output(g);
        b.output(b.add(Op(swish), {b.add(Op(ops::Gelu{}), {in[0]}, "gelu")}, "swish"));
      },
      4);  // every node
  ASSERT_NE(exe, nullptr);
}

TEST(CpuTarget, RunsOpsWithoutOneDnnKernelsOnRef) {
  // Erf has no oneDNN kernel here; a 1-D MatMul operand is left to ref as well.
  expect_cpu_matches_ref(
      {random_tensor(Shape{7}, 40), random_tensor(Shape{7, 3}, 41)},
      [&](GraphBuilder& b, const std::vector<Value*>& in) {
        Value* s = b.add(Op(ops::Erf{}), {in[0]}, "erf");
        b.output(b.add(Op(ops::MatMul{}), {s, in[1]}, "mm"));
      },
      0);
}

TEST(CpuTarget, DynamicShapesRunOnRef) {
  // A batch dim known only at run time: the Conv has no static shapes to build a primitive for.
  auto graph = std::make_shared<Graph>("dynamic");
  GraphBuilder b(*graph);
  Value* x = b.input("x", TensorType(DType::kF32, {Dim::symbolic("N"), 2, 5, 5}));
  const Tensor w = random_tensor(Shape{3, 2, 3, 3}, 50);
  b.output(
      b.add(Op(ops::Relu{}), {b.add(Op(ops::Conv{}), {x, b.constant(w, "w")}, "conv")}, "relu"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  auto cpu = compile(graph, **make_target("cpu"));
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  EXPECT_EQ(cpu_dnnl_node_count(**cpu), 0);
  const Tensor input = random_tensor(Shape{3, 2, 5, 5}, 51);
  auto out = (*cpu)->run({Argument(input)});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = (*out)[0].tensor();
  EXPECT_EQ(y.shape(), (Shape{3, 3, 3, 3}));
  // Spot-check one element against the definition (fused Relu included).
  double acc = 0;
  for (int64_t c = 0; c < 2; ++c) {
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 3; ++j) {
        acc += input.data<float>()[((1 * 2 + c) * 5 + 1 + i) * 5 + 2 + j] *
               w.data<float>()[((2 * 2 + c) * 3 + i) * 3 + j];
      }
    }
  }
  EXPECT_NEAR(y.data<float>()[((1 * 3 + 2) * 3 + 1) * 3 + 2], std::max(acc, 0.0), 1e-5);
}

// Runs `exe` on `input` `runs` times on each of `threads` threads at once; returns, per thread,
// how many runs failed or gave an output 0 off `want` by more than `tolerance`.
std::vector<int> mismatches_on_threads(const Executable& exe, const Tensor& input,
                                       std::span<const float> want, size_t threads, int runs,
                                       float tolerance) {
  std::vector<int> mismatches(threads, 0);
  std::vector<std::thread> running;
  for (size_t t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      for (int i = 0; i < runs; ++i) {
        auto out = exe.run({Argument(input)});
        if (!out.ok()) {
          ++mismatches[t];
          continue;
        }
        const auto got = (*out)[0].tensor().span<float>();
        for (size_t k = 0; k < want.size(); ++k) {
          if (std::abs(got[k] - want[k]) > tolerance) ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& t : running) t.join();
  return mismatches;
}

TEST(CpuTarget, NodesOfAGraphOnTheInterpreterRunAsProgramsOfTheirOwn) {
  // NonZero's output has a data-dependent shape: no program plans the whole graph, and the
  // interpreter runs it, the convolution (its Relu fused) as a program of that node alone.
  auto graph = std::make_shared<Graph>("data_dependent");
  GraphBuilder b(*graph);
  Value* x = b.input("x", f32(Shape{2, 4, 16, 16}));
  ops::Conv conv;
  conv.pads = std::vector<int64_t>{1, 1, 1, 1};
  Value* c = b.add(Op(conv), {x, b.constant(random_tensor(Shape{8, 4, 3, 3}, 70), "w")}, "conv");
  Value* y = b.add(Op(ops::Relu{}), {c}, "relu");
  b.output(y);
  b.output(b.add(Op(ops::NonZero{}), {y}, "nonzero"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  auto ref = compile(graph, **make_target("ref"));
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  auto cpu = compile(graph, **make_target("cpu"));
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  EXPECT_EQ(cpu_program(**cpu), nullptr);
  EXPECT_EQ(cpu_dnnl_node_count(**cpu), 1) << print_graph((*cpu)->graph());
  const Tensor input = random_tensor(Shape{2, 4, 16, 16}, 71);
  auto want = (*ref)->run({Argument(input)});
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  auto got = (*cpu)->run({Argument(input)});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ((*got)[1].tensor().shape(), (*want)[1].tensor().shape());
  // Calls on several threads at once (each node program's sessions are pooled, its arena the
  // thread's scratch) agree.
  for (int m :
       mismatches_on_threads(**cpu, input, (*want)[0].tensor().span<float>(), 3, 5, 1e-4f)) {
    EXPECT_EQ(m, 0);
  }
}

TEST(CpuTarget, OneExecutableRunsOnSeveralThreadsAtOnce) {
  auto graph = std::make_shared<Graph>("shared");
  GraphBuilder b(*graph);
  Value* x = b.input("x", f32(Shape{2, 3, 12, 12}));
  ops::Conv conv;
  conv.pads = std::vector<int64_t>{1, 1, 1, 1};
  Value* c = b.add(Op(conv), {x, b.constant(random_tensor(Shape{8, 3, 3, 3}, 60))}, "conv");
  Value* r = b.add(Op(ops::Relu{}), {c}, "relu");
  Value* p = b.add(Op(ops::GlobalAveragePool{}), {r}, "pool");
  ops::Flatten flat;
  Value* f = b.add(Op(flat), {p}, "flatten");
  ops::Gemm gemm;
  gemm.transB = 1;
  b.output(b.add(Op(gemm), {f, b.constant(random_tensor(Shape{5, 8}, 61))}, "fc"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  auto exe = compile(graph, **make_target("cpu"));
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  EXPECT_EQ(cpu_dnnl_node_count(**exe), 3);  // conv (with the Relu), pool, gemm
  const Tensor input = random_tensor(Shape{2, 3, 12, 12}, 62);
  auto first = (*exe)->run({Argument(input)});
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  const std::vector<float> want((*first)[0].tensor().span<float>().begin(),
                                (*first)[0].tensor().span<float>().end());
  for (int m : mismatches_on_threads(**exe, input, want, 4, 20, 1e-5f)) EXPECT_EQ(m, 0);
}

// The threads of this process (Linux: its tasks).
int process_threads() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)entry;
    ++n;
  }
  return n;
}

// An executable compiled for one thread runs on one, whatever the compiling thread's OpenMP team
// size: oneDNN's 1x1 convolutions split their work for the team they are made with and start that
// many threads on every run.
TEST(CpuTargetDeathTest, OneThreadExecutableStartsNoOtherThread) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the child starts from a fresh process
  EXPECT_EXIT(
      {
        omp_set_num_threads(4);  // a caller on a bigger machine
        auto graph = std::make_shared<Graph>("one_thread");
        GraphBuilder b(*graph);
        Value* x = b.input("x", f32(Shape{1, 64, 28, 28}));
        Value* w = b.constant(random_tensor(Shape{64, 64, 1, 1}, 70));
        b.output(b.add(Op(ops::Relu{}), {b.add(Op(ops::Conv{}), {x, w}, "conv")}, "relu"));
        CompileOptions options;
        options.threads = 1;
        auto exe = compile(graph, **make_target("cpu"), options);
        const int before = process_threads();
        const bool ran =
            exe.ok() && (*exe)->run({Argument(random_tensor(Shape{1, 64, 28, 28}, 71))}).ok();
        std::exit(ran && before == 1 && process_threads() == 1 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(CpuTarget, RunsOnOneThreadWhereOtherWorkTakesTheOtherCores) {
  // 2 threads on 2 cores: the run's own two threads runnable, nothing else: both.
  EXPECT_EQ(threads_on_busy_machine(2, 2, 2), 2);
  // One thread of other work: it takes the second core.
  EXPECT_EQ(threads_on_busy_machine(2, 2, 3), 1);
  EXPECT_EQ(threads_on_busy_machine(2, 2, 7), 1);
  // 4 threads on 16 cores with 10 others: a core is still free for each.
  EXPECT_EQ(threads_on_busy_machine(4, 16, 14), 4);
  EXPECT_EQ(threads_on_busy_machine(4, 16, 19), 1);
  // One thread stays one; an unreadable count changes nothing.
  EXPECT_EQ(threads_on_busy_machine(1, 2, 9), 1);
  EXPECT_EQ(threads_on_busy_machine(2, 2, -1), 2);
}

TEST(CpuTarget, IsListedAndNamed) {
  auto names = target_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "cpu"), names.end());
  auto target = make_target("cpu");
  ASSERT_TRUE(target.ok());
  EXPECT_EQ((*target)->name(), "cpu");
}

}  // namespace
}  // namespace kiln::compiler
