// SPDX-License-Identifier: Apache-2.0
// The cuda target against ref on graphs built here and on the bundled model (fixed seeds); every
// case skips where no GPU is present (CI), after checking that make_target says why.
#include "compiler/targets/cuda/cuda_target.h"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <thread>

#include "compiler/artifact/artifact.h"
#include "compiler/ir/builder.h"
#include "compiler/ir/printer.h"
#include "compiler/onnx/importer.h"
#include "compiler/ops/all_ops.h"
#include "compiler/targets/cuda/int8_gemm.h"
#include "compiler/targets/cuda/program.h"
#include "compiler/targets/cuda/quantized_kernels.h"
#include "compiler/targets/cuda/tuning.h"
#include "compiler/targets/cuda/views.h"
#include "core/gpu.h"
#include "core/half.h"
#include "core/testing/scoped_env.h"

namespace kiln::compiler {
namespace {

bool have_gpu() {
  return !list_gpus().empty();
}

#define SKIP_WITHOUT_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no GPU on this machine"

Tensor random_tensor(Shape shape, uint32_t seed) {
  Tensor t(DType::kF32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : t.span<float>()) v = dist(rng);
  return t;
}

// random_tensor's values times `by`.
Tensor scaled_random(Shape shape, uint32_t seed, float by) {
  Tensor t = random_tensor(std::move(shape), seed);
  for (float& v : t.span<float>()) v *= by;
  return t;
}

using BuildFn = std::function<void(GraphBuilder&, const std::vector<Value*>&)>;

std::shared_ptr<Graph> make_graph(const std::vector<Tensor>& inputs, const BuildFn& build) {
  auto graph = std::make_shared<Graph>("case");
  GraphBuilder b(*graph);
  std::vector<Value*> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    values.push_back(
        b.input("in" + std::to_string(i), TensorType(inputs[i].dtype(), inputs[i].shape())));
  }
  build(b, values);
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return graph;
}

std::shared_ptr<Executable> compile_for(std::shared_ptr<Graph> graph, const char* name) {
  auto target = make_target(name);
  EXPECT_TRUE(target.ok()) << target.status().to_string();
  if (!target.ok()) return nullptr;
  auto exe = compile(std::move(graph), **target);
  EXPECT_TRUE(exe.ok()) << exe.status().to_string();
  return exe.ok() ? *exe : nullptr;
}

// `graph` compiled for cuda with the environment variable `flag` set to `value` while it compiles
// (a KILN_CUDA_* choice made at lowering).
std::shared_ptr<Executable> compile_cuda_with(std::shared_ptr<Graph> graph, const char* flag,
                                              const char* value) {
  test::ScopedEnv env(flag, value);
  return compile_for(std::move(graph), "cuda");
}

std::vector<Tensor> run(const Executable& exe, const std::vector<Tensor>& inputs) {
  std::vector<Argument> args;
  for (const Tensor& t : inputs) args.emplace_back(t);
  auto out = exe.run(std::move(args));
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  std::vector<Tensor> tensors;
  if (out.ok()) {
    for (const Argument& a : *out) tensors.push_back(a.tensor());
  }
  return tensors;
}

void expect_close(const std::vector<Tensor>& want, const std::vector<Tensor>& got,
                  float tolerance = 1e-4f) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(want[o].shape(), got[o].shape()) << "output " << o;
    ASSERT_EQ(want[o].dtype(), got[o].dtype()) << "output " << o;
    if (want[o].dtype() != DType::kF32) continue;
    int bad = 0;
    for (int64_t i = 0; i < want[o].numel() && bad < 5; ++i) {
      const float x = want[o].data<float>()[i];
      const float y = got[o].data<float>()[i];
      if (!(std::abs(x - y) <= tolerance + tolerance * std::abs(x))) {
        ADD_FAILURE() << "output " << o << " element " << i << ": ref " << x << ", cuda " << y;
        ++bad;
      }
    }
  }
}

// Compiles the graph `build` makes of the one input `x` for target `name` and runs it on `x`:
// the executable (null when it did not compile) and its output.
std::pair<std::shared_ptr<Executable>, Tensor> run_one(
    const char* name, const Tensor& x, const std::function<Value*(GraphBuilder&, Value*)>& build) {
  std::shared_ptr<Executable> exe = compile_for(
      make_graph(
          {x}, [&](GraphBuilder& b, const std::vector<Value*>& in) { b.output(build(b, in[0])); }),
      name);
  if (exe == nullptr) return {nullptr, Tensor()};
  std::vector<Tensor> out = run(*exe, {x});
  return {exe, out.empty() ? Tensor() : out[0]};
}

// Compiles for ref and cuda, compares, and returns the cuda program's (device steps, steps).
std::pair<int, int> expect_cuda_matches_ref(const std::vector<Tensor>& inputs, const BuildFn& build,
                                            float tolerance = 1e-4f) {
  std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build), "ref");
  std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build), "cuda");
  if (ref == nullptr || exe == nullptr) return {-1, -1};
  expect_close(run(*ref, inputs), run(*exe, inputs), tolerance);
  const cuda::Program* program = cuda_program(*exe);
  EXPECT_NE(program, nullptr);
  if (program == nullptr) return {-1, -1};
  return {program->device_steps(), static_cast<int>(program->steps().size())};
}

TEST(CudaTarget, MakeTargetSaysWhyWithoutAGpu) {
  auto target = make_target("cuda");
  if (have_gpu()) {
    ASSERT_TRUE(target.ok()) << target.status().to_string();
    EXPECT_EQ((*target)->name(), "cuda");
    return;
  }
  ASSERT_FALSE(target.ok());
  EXPECT_NE(target.status().message().find("no GPU was found"), std::string::npos)
      << target.status().to_string();
}

TEST(CudaTarget, ElementwiseWithBroadcastingMatchesRef) {
  SKIP_WITHOUT_GPU();
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 3, 4, 5}, 1),
                                      random_tensor(Shape{3, 1, 5}, 2)};
  auto steps = expect_cuda_matches_ref(inputs, [](GraphBuilder& b, const std::vector<Value*>& in) {
    Value* s = b.add(Op(ops::Add{}), {in[0], in[1]});
    Value* m = b.add(Op(ops::Mul{}), {s, in[1]});
    Value* d = b.add(Op(ops::Sub{}), {m, in[0]});
    Value* t = b.add(Op(ops::Tanh{}), {d});
    Value* r = b.add(Op(ops::Relu{}), {b.add(Op(ops::Sigmoid{}), {t})});
    ops::LeakyRelu leaky;
    leaky.alpha = 0.3f;
    b.output(b.add(Op(leaky), {b.add(Op(ops::Div{}), {r, b.add(Op(ops::Exp{}), {in[1]})})}));
  });
  EXPECT_EQ(steps.first, steps.second);
}

TEST(CudaTarget, ConvolutionsMatchRef) {
  SKIP_WITHOUT_GPU();
  struct Case {
    Shape x, w;
    int64_t group = 1;
    std::vector<int64_t> strides, pads, dilations;
    bool bias = true;
    bool relu = false;
  };
  const std::vector<Case> cases = {
      {Shape{2, 3, 9, 7}, Shape{5, 3, 3, 3}, 1, {2, 1}, {1, 1, 1, 1}, {}, true, true},
      {Shape{1, 6, 8, 8}, Shape{6, 2, 3, 3}, 3, {2, 2}, {2, 2, 2, 2}, {2, 2}, true, false},
      {Shape{1, 8, 10, 10}, Shape{8, 1, 3, 3}, 8, {1, 1}, {1, 1, 1, 1}, {}, false, true},
      {Shape{4, 16, 14, 14}, Shape{32, 16, 1, 1}, 1, {}, {}, {}, true, true},
      // Asymmetric pads: not cuDNN's legacy API, so the host runs it; the result still matches.
      {Shape{1, 3, 9, 9}, Shape{4, 3, 3, 3}, 1, {}, {0, 1, 2, 0}, {}, true, false},
  };
  uint32_t seed = 10;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.x.to_string() + " * " + c.w.to_string());
    const Tensor w = random_tensor(c.w, seed++);
    const Tensor bias = random_tensor(Shape{c.w[0]}, seed++);
    const std::vector<Tensor> inputs = {random_tensor(c.x, seed++)};
    auto steps =
        expect_cuda_matches_ref(inputs, [&](GraphBuilder& b, const std::vector<Value*>& in) {
          ops::Conv op;
          op.group = c.group;
          if (!c.strides.empty()) op.strides = c.strides;
          if (!c.pads.empty()) op.pads = c.pads;
          if (!c.dilations.empty()) op.dilations = c.dilations;
          std::vector<Value*> args = {in[0], b.constant(w, "w")};
          if (c.bias) args.push_back(b.constant(bias, "b"));
          Value* y = b.add(Op(op), args);
          b.output(c.relu ? b.add(Op(ops::Relu{}), {y}) : y);
        });
    const bool symmetric = c.pads.empty() || (c.pads[0] == c.pads[2] && c.pads[1] == c.pads[3]);
    EXPECT_EQ(steps.first, symmetric ? 1 : 0);
  }
}

TEST(CudaTarget, ClipAfterConvAndReluAfterAddRunInsideTheirProducers) {
  SKIP_WITHOUT_GPU();
  const Tensor w = random_tensor(Shape{4, 4, 3, 3}, 20);
  const Tensor bias = random_tensor(Shape{4}, 21);
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 4, 8, 8}, 22)};
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    ops::Conv op;
    op.pads = std::vector<int64_t>{1, 1, 1, 1};
    Value* y = b.add(Op(op), {in[0], b.constant(w, "w"), b.constant(bias, "b")});
    Value* c = b.add(Op(ops::Clip{}), {y, b.constant(Tensor::scalar<float>(0.0f), "lo"),
                                       b.constant(Tensor::scalar<float>(0.5f), "hi")});
    b.output(b.add(Op(ops::Relu{}), {b.add(Op(ops::Add{}), {c, in[0]})}));
  };
  auto steps = expect_cuda_matches_ref(inputs, build);
  EXPECT_EQ(steps.first, 2);
  EXPECT_EQ(steps.second, 2);
  std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build), "cuda");
  ASSERT_NE(exe, nullptr);
  const cuda::Program* program = cuda_program(*exe);
  ASSERT_NE(program, nullptr);
  EXPECT_EQ(program->count_steps("Conv+Bias+Clip"), 1);
  EXPECT_EQ(program->count_steps("Add+Relu"), 1);
}

TEST(CudaTarget, ResidualAddAndReluRunInTheConvolutionsBiasKernel) {
  SKIP_WITHOUT_GPU();
  const Tensor w = random_tensor(Shape{4, 4, 3, 3}, 23);
  const Tensor bias = random_tensor(Shape{4}, 24);
  const Tensor w2 = random_tensor(Shape{4, 4, 1, 1}, 25);
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 4, 8, 8}, 26)};
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    ops::Conv op;
    op.pads = std::vector<int64_t>{1, 1, 1, 1};
    // A ResNet block end: relu(conv(x) + bias + x); then a residual whose other operand comes
    // later (a second branch's convolution, lowered after it): the Add runs on its own.
    Value* y = b.add(Op(op), {in[0], b.constant(w, "w"), b.constant(bias, "b")});
    Value* r = b.add(Op(ops::Relu{}), {b.add(Op(ops::Add{}), {in[0], y})});
    Value* a = b.add(Op(op), {r, b.constant(w, "w3")});
    Value* c = b.add(Op(ops::Conv{}), {r, b.constant(w2, "w2")});
    b.output(b.add(Op(ops::Add{}), {a, c}));
  };
  auto steps = expect_cuda_matches_ref(inputs, build);
  EXPECT_EQ(steps.first, steps.second);
  std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build), "cuda");
  ASSERT_NE(exe, nullptr);
  const cuda::Program* program = cuda_program(*exe);
  ASSERT_NE(program, nullptr);
  EXPECT_EQ(program->count_steps("Conv+Bias+Add+Relu"), 1);
  EXPECT_EQ(program->count_steps("Conv+Add"), 1);  // the second convolution takes the first's Add
  EXPECT_EQ(program->steps().size(), 3u);
}

TEST(CudaTarget, GemmAndMatMulMatchRef) {
  SKIP_WITHOUT_GPU();
  const Tensor w = random_tensor(Shape{10, 24}, 30);  // [N, K] for transB
  const Tensor bias = random_tensor(Shape{10}, 31);
  const Tensor w2 = random_tensor(Shape{10, 7}, 32);
  const std::vector<Tensor> inputs = {random_tensor(Shape{5, 24}, 33),
                                      random_tensor(Shape{3, 4, 6}, 34),
                                      random_tensor(Shape{3, 6, 2}, 35)};
  auto steps = expect_cuda_matches_ref(inputs, [&](GraphBuilder& b, const std::vector<Value*>& in) {
    ops::Gemm gemm;
    gemm.transB = 1;
    Value* y = b.add(Op(gemm), {in[0], b.constant(w, "w"), b.constant(bias, "b")});
    Value* r = b.add(Op(ops::Relu{}), {y});
    b.output(b.add(Op(ops::MatMul{}), {r, b.constant(w2, "w2")}));
    b.output(b.add(Op(ops::MatMul{}), {in[1], in[2]}));  // batched
  });
  EXPECT_EQ(steps.first, 3);  // Gemm+Bias+Relu, MatMul, batched MatMul
  EXPECT_EQ(steps.second, 3);
}

TEST(CudaTarget, PoolSoftmaxNormalizationAndDataMovementMatchRef) {
  SKIP_WITHOUT_GPU();
  const Tensor scale = random_tensor(Shape{4}, 40);
  const Tensor shift = random_tensor(Shape{4}, 41);
  const Tensor mean = random_tensor(Shape{4}, 42);
  Tensor var = random_tensor(Shape{4}, 43);
  for (float& v : var.span<float>()) v = std::abs(v) + 0.5f;
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 4, 9, 11}, 44)};
  auto steps = expect_cuda_matches_ref(inputs, [&](GraphBuilder& b, const std::vector<Value*>& in) {
    ops::BatchNormalization bn;
    Value* x = b.add(
        Op(bn), {in[0], b.constant(scale), b.constant(shift), b.constant(mean), b.constant(var)});
    ops::MaxPool mp;
    mp.kernel_shape = std::vector<int64_t>{3, 3};
    mp.strides = std::vector<int64_t>{2, 2};
    mp.pads = std::vector<int64_t>{1, 1, 1, 1};
    b.output(b.add(Op(mp), {x}));
    ops::AveragePool ap;
    ap.kernel_shape = std::vector<int64_t>{2, 3};
    ap.pads = std::vector<int64_t>{1, 0, 1, 1};
    ap.count_include_pad = 1;
    b.output(b.add(Op(ap), {x}));
    b.output(b.add(Op(ops::GlobalAveragePool{}), {x}));
    ops::Concat cat;
    cat.axis = 1;
    Value* c = b.add(Op(cat), {x, in[0]});
    ops::Transpose tr;
    tr.perm = std::vector<int64_t>{0, 2, 3, 1};
    Value* t = b.add(Op(tr), {c});
    b.output(b.add(Op(ops::Softmax{}), {t}));
    b.output(b.add(Op(ops::Sinh{}), {t}));  // no device kernel: runs on the host
  });
  EXPECT_EQ(steps.second - steps.first, 1);
}

// `t` in `dtype` (f32, f16 or bf16), rounded to nearest even.
Tensor in_dtype(const Tensor& t, DType dtype) {
  if (dtype == DType::kF32) return t;
  Tensor out(dtype, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = t.data<float>()[i];
    if (dtype == DType::kF16) {
      out.data<Half>()[i] = Half(v);
    } else {
      out.data<BFloat16>()[i] = BFloat16(v);
    }
  }
  return out;
}

// A Cast of `v` to `to`.
Value* cast_to(GraphBuilder& b, Value* v, DType to) {
  ops::Cast c;
  c.to = to;
  return b.add(Op(c), {v});
}

// The graphs that quantize_fp16/bf16 make: f32 at the edges (Casts), f16/bf16 between, with f32
// accumulation inside. cuda in f16 and bf16 against ref in f32, within their precision.
TEST(CudaTarget, HalfPrecisionGraphsMatchRefInF32) {
  SKIP_WITHOUT_GPU();
  const Tensor w1 = random_tensor(Shape{8, 3, 3, 3}, 50);
  const Tensor b1 = random_tensor(Shape{8}, 51);
  const Tensor dw = random_tensor(Shape{8, 1, 3, 3}, 52);
  const Tensor scale = random_tensor(Shape{8}, 53);
  const Tensor shift = random_tensor(Shape{8}, 54);
  const Tensor mean = random_tensor(Shape{8}, 55);
  Tensor var = random_tensor(Shape{8}, 56);
  for (float& v : var.span<float>()) v = std::abs(v) + 0.5f;
  const Tensor fc = random_tensor(Shape{8, 16}, 57);
  const Tensor fc_bias = random_tensor(Shape{16}, 58);
  const std::vector<Tensor> inputs = {random_tensor(Shape{4, 3, 16, 16}, 59),
                                      random_tensor(Shape{2, 3, 8, 32}, 60),
                                      random_tensor(Shape{2, 3, 32, 8}, 61)};
  auto build_in = [&](DType dt) {
    return [&, dt](GraphBuilder& b, const std::vector<Value*>& in) {
      auto cast = [&](Value* v, DType to) { return dt == DType::kF32 ? v : cast_to(b, v, to); };
      auto k = [&](const Tensor& t) { return b.constant(in_dtype(t, dt)); };
      ops::Conv conv;
      conv.pads = std::vector<int64_t>{1, 1, 1, 1};
      Value* x = b.add(Op(ops::Relu{}), {b.add(Op(conv), {cast(in[0], dt), k(w1), k(b1)})});
      ops::Conv depthwise;
      depthwise.group = 8;
      depthwise.pads = std::vector<int64_t>{1, 1, 1, 1};
      Value* d = b.add(Op(depthwise), {x, k(dw)});
      Value* n = b.add(Op(ops::BatchNormalization{}), {d, k(scale), k(shift), k(mean), k(var)});
      Value* r = b.add(Op(ops::Relu{}), {b.add(Op(ops::Add{}), {n, x})});
      ops::MaxPool mp;
      mp.kernel_shape = std::vector<int64_t>{2, 2};
      mp.strides = std::vector<int64_t>{2, 2};
      b.output(cast(b.add(Op(mp), {r}), DType::kF32));
      ops::Flatten flat;
      Value* g = b.add(Op(flat), {b.add(Op(ops::GlobalAveragePool{}), {r})});
      Value* logits = b.add(Op(ops::Gemm{}), {g, k(fc), k(fc_bias)});
      b.output(cast(b.add(Op(ops::Softmax{}), {logits}), DType::kF32));
      // Attention-shaped: batched MatMul, Transpose, Sigmoid.
      Value* scores = b.add(Op(ops::MatMul{}), {cast(in[1], dt), cast(in[2], dt)});
      ops::Transpose tr;
      tr.perm = std::vector<int64_t>{0, 2, 1, 3};
      b.output(cast(b.add(Op(ops::Sigmoid{}), {b.add(Op(tr), {scores})}), DType::kF32));
    };
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build_in(DType::kF32)), "ref");
  ASSERT_NE(ref, nullptr);
  const std::vector<Tensor> want = run(*ref, inputs);
  // NHWC (the default for f16/bf16 convolutions) and NCHW; then fp32 forced NHWC.
  for (const char* layout : {"nhwc", "nchw"}) {
    ::setenv("KILN_CUDA_LAYOUT", layout, 1);
    const bool nhwc = std::string(layout) == "nhwc";
    for (const DType dt : {DType::kF16, DType::kBF16, DType::kF32}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + layout);
      std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build_in(dt)), "cuda");
      ASSERT_NE(exe, nullptr);
      // bf16 keeps 8 bits of mantissa, f16 11: 2^-7 and 2^-10 per rounding, a few roundings deep.
      const float tolerance = dt == DType::kF16 ? 1e-2f : dt == DType::kBF16 ? 6e-2f : 1e-4f;
      expect_close(want, run(*exe, inputs), tolerance);
      const cuda::Program* program = cuda_program(*exe);
      ASSERT_NE(program, nullptr);
      EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()))
          << "every step on the device";
      if (dt != DType::kF32) {
        EXPECT_GE(program->count_steps("Cast"), 4);
      }
      // NHWC: the input goes channels last once (its 3 channels padded to 8 for tensor cores in
      // the same step: "Pad channels"), the pooled output comes back once; the global pool reads
      // NHWC directly. (fp32 and bf16 may find no NHWC algorithm for a convolution and run it
      // NCHW, with more reorders: only f16's count is fixed.)
      if (dt == DType::kF16 || !nhwc) {
        // (Or none: the own kernel reads the image as it is, where tuning measured it faster.)
        const int into_nhwc =
            program->count_steps("Reorder NCHW>NHWC") + program->count_steps("Pad channels");
        if (nhwc) {
          EXPECT_LE(into_nhwc, 1);
        } else {
          EXPECT_EQ(into_nhwc, 0);
        }
        EXPECT_EQ(program->count_steps("Reorder NHWC>NCHW"), nhwc ? 1 : 0);
      }
    }
  }
  ::unsetenv("KILN_CUDA_LAYOUT");
}

// The steps of `program` whose kind starts with `prefix`.
int steps_starting(const cuda::Program& program, std::string_view prefix) {
  int n = 0;
  for (const auto& step : program.steps()) n += step->kind.starts_with(prefix) ? 1 : 0;
  return n;
}

// KILN_CUDA_NVRTC=1: a chain of elementwise ops (an input read twice, a scalar constant, a Unary
// with an attribute) runs as one generated kernel, in f32 and between f16 Casts, matching ref.
TEST(CudaTarget, ElementwiseChainsRunAsOneNvrtcKernel) {
  SKIP_WITHOUT_GPU();
  ::setenv("KILN_CUDA_NVRTC", "1", 1);
  const std::string cache = testing::TempDir() + "kiln_nvrtc_chain_cache";
  ::setenv("KILN_CACHE_DIR", cache.c_str(), 1);
  for (int64_t pixels : {int64_t{8}, int64_t{7}}) {  // n = 240: 8 elements a thread; 210: one
    const std::vector<Tensor> inputs = {random_tensor(Shape{2, 3, pixels, 5}, 70),
                                        random_tensor(Shape{2, 3, pixels, 5}, 71)};
    for (DType dt : {DType::kF32, DType::kF16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " pixels " + std::to_string(pixels));
      std::shared_ptr<Executable> ref, exe;
      for (const char* target : {"ref", "cuda"}) {
        const DType g = std::string(target) == "ref" ? DType::kF32 : dt;  // ref in f32
        auto graph = make_graph(inputs, [&](GraphBuilder& b, const std::vector<Value*>& in) {
          auto cast = [&](Value* v, DType to) { return g == DType::kF32 ? v : cast_to(b, v, to); };
          Value* x = cast(in[0], g);
          Value* two = b.constant(in_dtype(Tensor::scalar(2.0f), g));
          Value* v = b.add(Op(ops::Mul{}), {x, two});
          v = b.add(Op(ops::Add{}), {v, cast(in[1], g)});
          v = b.add(Op(ops::Tanh{}), {v});
          ops::LeakyRelu leaky;
          leaky.alpha = 0.2f;
          v = b.add(Op(leaky), {v});
          v = b.add(Op(ops::Sub{}), {x, v});
          b.output(cast(v, DType::kF32));
        });
        (std::string(target) == "ref" ? ref : exe) = compile_for(std::move(graph), target);
      }
      ASSERT_NE(ref, nullptr);
      ASSERT_NE(exe, nullptr);
      expect_close(run(*ref, inputs), run(*exe, inputs), dt == DType::kF32 ? 1e-5f : 1e-2f);
      const cuda::Program* program = cuda_program(*exe);
      ASSERT_NE(program, nullptr);
      EXPECT_EQ(steps_starting(*program, "Fused elementwise"), 1);
      if (dt == DType::kF32) {
        EXPECT_EQ(program->steps().size(), 1u);
      }
    }
  }
  ::unsetenv("KILN_CUDA_NVRTC");
  ::unsetenv("KILN_CACHE_DIR");
  std::filesystem::remove_all(cache);
}

// One case of the NVRTC row and transpose fusions: a graph of the inputs in `dt` (f32 at its edges,
// Casts around the row ops in f16 as quantize_fp16 leaves them), the fused step it must give.
struct FusedCase {
  std::string name;
  std::vector<Tensor> inputs;
  std::function<void(GraphBuilder&, const std::vector<Value*>&, DType)> build;
  std::string step;  // the one fused step expected
  int steps;         // the cuda program's steps in f32
};

// Helpers for FusedCase graphs in `dt`.
struct InDtype {
  GraphBuilder& b;
  DType dt;
  Value* cast(Value* v, DType to) const { return dt == DType::kF32 ? v : cast_to(b, v, to); }
  Value* scalar(float v) const { return b.constant(in_dtype(Tensor::scalar<float>(v), dt)); }
  // The graph's inputs in dt, all cast before any other node, so that every op finds its
  // operands computed.
  std::vector<Value*> inputs(const std::vector<Value*>& in) const {
    std::vector<Value*> out;
    for (Value* v : in) out.push_back(cast(v, dt));
    return out;
  }
  // `op` on `v` in f32 (between Casts when dt is a half type), extra inputs `more`.
  Value* in_f32(Op op, Value* v, std::vector<Value*> more = {}) const {
    std::vector<Value*> args = {cast(v, DType::kF32)};
    args.insert(args.end(), more.begin(), more.end());
    return cast(b.add(std::move(op), args), dt);
  }
};

std::vector<FusedCase> fused_cases() {
  const Tensor gamma = random_tensor(Shape{96}, 180);
  const Tensor beta = random_tensor(Shape{96}, 181);
  auto layernorm = [=](const InDtype& h, Value* x) {
    return h.in_f32(Op(ops::LayerNormalization{}), x, {h.b.constant(gamma), h.b.constant(beta)});
  };
  std::vector<FusedCase> cases;
  // 96 columns, and ViT-B's 768 (f16 rows in 16-byte chunks), the LayerNorm's own scale and bias.
  for (int64_t cols : {int64_t{96}, int64_t{768}}) {
    const std::string wide = cols == 96 ? "" : "_" + std::to_string(cols);
    const Tensor g = random_tensor(Shape{cols}, 192), bt = random_tensor(Shape{cols}, 193);
    auto norm = [=](const InDtype& h, Value* x) {
      return h.in_f32(Op(ops::LayerNormalization{}), x, {h.b.constant(g), h.b.constant(bt)});
    };
    // A transformer's residual Add before LayerNorm.
    cases.push_back({"add_layernorm" + wide,
                     {random_tensor(Shape{2, 5, cols}, 182), random_tensor(Shape{2, 5, cols}, 183)},
                     [=](GraphBuilder& b, const std::vector<Value*>& graph_in, DType dt) {
                       InDtype h{b, dt};
                       const std::vector<Value*> in = h.inputs(graph_in);
                       Value* sum = b.add(Op(ops::Add{}), {in[0], in[1]});
                       b.output(h.cast(norm(h, sum), DType::kF32));
                     },
                     "Add+LayerNormalization",
                     1});
    // Pre-LN ViT: the residual sum also feeds the next residual Add (and a Neg): the kernel's
    // second output. (Not a Cast of the sum as an output: in f16 it would be the same node as
    // LayerNorm's Cast to f32, which then has two readers and is not fused.)
    cases.push_back({"add_layernorm_sum_read_too" + wide,
                     {random_tensor(Shape{3, 7, cols}, 184), random_tensor(Shape{3, 7, cols}, 185)},
                     [=](GraphBuilder& b, const std::vector<Value*>& graph_in, DType dt) {
                       InDtype h{b, dt};
                       const std::vector<Value*> in = h.inputs(graph_in);
                       Value* sum = b.add(Op(ops::Add{}), {in[0], in[1]});
                       Value* ln = norm(h, sum);
                       b.output(h.cast(b.add(Op(ops::Add{}), {sum, ln}), DType::kF32));
                       b.output(h.cast(b.add(Op(ops::Neg{}), {sum}), DType::kF32));
                     },
                     "Add+LayerNormalization",
                     3});
  }
  // Attention scores scaled and masked (the mask broadcast over heads and rows), then Softmax.
  {
    Tensor mask = random_tensor(Shape{2, 1, 1, 40}, 186);
    for (float& v : mask.span<float>()) v = v > 0.5f ? -30.0f : 0.0f;
    cases.push_back({"mul_mask_softmax",
                     {random_tensor(Shape{2, 3, 6, 40}, 187), mask},
                     [=](GraphBuilder& b, const std::vector<Value*>& graph_in, DType dt) {
                       InDtype h{b, dt};
                       const std::vector<Value*> in = h.inputs(graph_in);
                       Value* s = b.add(Op(ops::Mul{}), {in[0], h.scalar(2.5f)});
                       s = b.add(Op(ops::Add{}), {s, in[1]});
                       b.output(h.cast(h.in_f32(Op(ops::Softmax{}), s), DType::kF32));
                     },
                     "Mul+Add+Softmax",
                     1});
  }
  // A mean over the last axis of a sum, wide rows (several warps a row).
  cases.push_back({"add_reducemean",
                   {random_tensor(Shape{4, 3, 1500}, 188), random_tensor(Shape{1500}, 189)},
                   [=](GraphBuilder& b, const std::vector<Value*>& graph_in, DType dt) {
                     InDtype h{b, dt};
                     const std::vector<Value*> in = h.inputs(graph_in);
                     Value* sum = b.add(Op(ops::Add{}), {in[0], in[1]});
                     ops::ReduceMean mean;
                     mean.axes = std::vector<int64_t>{-1};
                     b.output(h.cast(h.in_f32(Op(mean), sum), DType::kF32));
                   },
                   "Add+ReduceMean",
                   1});
  // LayerNorm with a chain after it (epilogue): scaled and offset by another input.
  cases.push_back({"layernorm_mul_add",
                   {random_tensor(Shape{6, 96}, 190), random_tensor(Shape{6, 96}, 191)},
                   [=](GraphBuilder& b, const std::vector<Value*>& graph_in, DType dt) {
                     InDtype h{b, dt};
                     const std::vector<Value*> in = h.inputs(graph_in);
                     Value* ln = layernorm(h, in[0]);
                     Value* y = b.add(Op(ops::Mul{}), {ln, h.scalar(0.5f)});
                     y = b.add(Op(ops::Add{}), {y, in[1]});
                     b.output(h.cast(y, DType::kF32));
                   },
                   "LayerNormalization+Mul+Add",
                   1});
  // A chain written transposed, and a transpose read by a chain.
  cases.push_back({"chain_transpose",
                   {random_tensor(Shape{2, 9, 24}, 192), random_tensor(Shape{9, 24}, 193)},
                   [=](GraphBuilder& b, const std::vector<Value*>& graph_in, DType dt) {
                     InDtype h{b, dt};
                     const std::vector<Value*> in = h.inputs(graph_in);
                     Value* v = b.add(Op(ops::Add{}), {in[0], in[1]});
                     v = b.add(Op(ops::Tanh{}), {v});
                     ops::Transpose t;
                     t.perm = std::vector<int64_t>{0, 2, 1};
                     b.output(h.cast(b.add(Op(t), {v}), DType::kF32));
                   },
                   "Add+Tanh+Transpose",
                   1});
  cases.push_back({"transpose_chain",
                   {random_tensor(Shape{2, 9, 24}, 194), random_tensor(Shape{24, 1, 9}, 195)},
                   [=](GraphBuilder& b, const std::vector<Value*>& graph_in, DType dt) {
                     InDtype h{b, dt};
                     const std::vector<Value*> in = h.inputs(graph_in);
                     ops::Transpose t;
                     t.perm = std::vector<int64_t>{2, 0, 1};
                     Value* v = b.add(Op(t), {in[0]});
                     v = b.add(Op(ops::Mul{}), {v, in[1]});
                     b.output(h.cast(b.add(Op(ops::Sigmoid{}), {v}), DType::kF32));
                   },
                   "Transpose+Mul+Sigmoid",
                   1});
  return cases;
}

// KILN_CUDA_NVRTC=1: elementwise chains before a row op (LayerNorm, Softmax, ReduceMean) or after
// one, and before or after a Transpose, run inside one generated kernel, in f32 and f16 (ref in
// f32); with KILN_CUDA_NVRTC=0 the same graphs run unfused (ReduceMean on the host) and match too.
TEST(CudaTarget, ChainsFuseIntoRowKernelsAndTransposes) {
  SKIP_WITHOUT_GPU();
  const std::string cache = testing::TempDir() + "kiln_nvrtc_rows_cache";
  ::setenv("KILN_CACHE_DIR", cache.c_str(), 1);
  for (const FusedCase& c : fused_cases()) {
    std::shared_ptr<Executable> ref = compile_for(
        make_graph(c.inputs, [&](GraphBuilder& b,
                                 const std::vector<Value*>& in) { c.build(b, in, DType::kF32); }),
        "ref");
    ASSERT_NE(ref, nullptr) << c.name;
    const std::vector<Tensor> want = run(*ref, c.inputs);
    for (const char* nvrtc : {"1", "0"}) {
      ::setenv("KILN_CUDA_NVRTC", nvrtc, 1);
      for (DType dt : {DType::kF32, DType::kF16}) {
        SCOPED_TRACE(c.name + " " + std::string(dtype_name(dt)) + " KILN_CUDA_NVRTC=" + nvrtc);
        std::shared_ptr<Executable> exe = compile_for(
            make_graph(c.inputs,
                       [&](GraphBuilder& b, const std::vector<Value*>& in) { c.build(b, in, dt); }),
            "cuda");
        ASSERT_NE(exe, nullptr);
        expect_close(want, run(*exe, c.inputs), dt == DType::kF32 ? 1e-4f : 1e-2f);
        const cuda::Program* program = cuda_program(*exe);
        ASSERT_NE(program, nullptr);
        const bool fused = std::string(nvrtc) == "1";
        EXPECT_EQ(program->count_steps(c.step), fused ? 1 : 0);
        if (fused) {
          EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
        }
        if (fused && dt == DType::kF32) {
          EXPECT_EQ(static_cast<int>(program->steps().size()), c.steps);
        }
      }
    }
  }
  ::unsetenv("KILN_CUDA_NVRTC");
  ::unsetenv("KILN_CACHE_DIR");
  std::filesystem::remove_all(cache);
}

// Depthwise convolutions run on the own kernel (not cuDNN), in every layout and float type: the
// vectorized NHWC kernel (channels a multiple of 16 bytes, kw 3 or 5, sw 1 or 2) and the one
// element a thread kernel (NCHW, other channel counts, dilation), with bias and ReLU/ReLU6 fused.
TEST(CudaTarget, DepthwiseConvolutionsMatchRef) {
  SKIP_WITHOUT_GPU();
  struct Case {
    Shape x, w;
    std::vector<int64_t> strides, pads, dilations;
    bool bias = true;
    int activation = 0;  // 0 none, 1 Relu, 2 Clip [0, 6]
  };
  const std::vector<Case> cases = {
      {Shape{2, 16, 9, 11}, Shape{16, 1, 3, 3}, {}, {1, 1, 1, 1}, {}, true, 2},
      {Shape{3, 24, 12, 10}, Shape{24, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, true, 1},
      {Shape{2, 32, 13, 13}, Shape{32, 1, 5, 5}, {2, 2}, {2, 2, 2, 2}, {}, true, 2},
      {Shape{1, 12, 7, 9}, Shape{12, 1, 5, 5}, {}, {2, 2, 2, 2}, {}, false, 0},     // C % 8 != 0
      {Shape{2, 8, 8, 8}, Shape{8, 1, 3, 3}, {}, {0, 1, 2, 0}, {}, true, 0},        // asymmetric
      {Shape{2, 8, 9, 9}, Shape{8, 1, 3, 3}, {}, {2, 2, 2, 2}, {2, 2}, true, 1},    // dilated
      {Shape{1, 16, 6, 7}, Shape{16, 1, 3, 5}, {2, 1}, {1, 2, 1, 2}, {}, true, 2},  // 3x5
      {Shape{2, 5, 6, 6}, Shape{5, 1, 3, 3}, {1, 2}, {1, 1, 1, 1}, {}, true, 2},
  };
  uint32_t seed = 300;
  for (const Case& c : cases) {
    const Tensor w = random_tensor(c.w, seed++);
    Tensor bias = random_tensor(Shape{c.w[0]}, seed++);
    for (float& v : bias.span<float>()) v *= 2.0f;  // some outputs clamp at 0 and at 6
    Tensor x = random_tensor(c.x, seed++);
    for (float& v : x.span<float>()) v *= 3.0f;
    const std::vector<Tensor> inputs = {x};
    auto build_in = [&](DType dt) {
      return [&, dt](GraphBuilder& b, const std::vector<Value*>& in) {
        ops::Conv op;
        op.group = c.x[1];
        if (!c.strides.empty()) op.strides = c.strides;
        if (!c.pads.empty()) op.pads = c.pads;
        if (!c.dilations.empty()) op.dilations = c.dilations;
        Value* from = dt == DType::kF32 ? in[0] : cast_to(b, in[0], dt);
        std::vector<Value*> args = {from, b.constant(in_dtype(w, dt), "w")};
        if (c.bias) args.push_back(b.constant(in_dtype(bias, dt), "b"));
        Value* y = b.add(Op(op), args);
        if (c.activation == 1) y = b.add(Op(ops::Relu{}), {y});
        if (c.activation == 2) {
          y = b.add(Op(ops::Clip{}), {y, b.constant(in_dtype(Tensor::scalar<float>(0.0f), dt)),
                                      b.constant(in_dtype(Tensor::scalar<float>(6.0f), dt))});
        }
        b.output(dt == DType::kF32 ? y : cast_to(b, y, DType::kF32));
      };
    };
    std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build_in(DType::kF32)), "ref");
    ASSERT_NE(ref, nullptr);
    const std::vector<Tensor> want = run(*ref, inputs);
    for (const char* layout : {"nhwc", "nchw"}) {
      ::setenv("KILN_CUDA_LAYOUT", layout, 1);
      for (const DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
        SCOPED_TRACE(c.x.to_string() + " * " + c.w.to_string() + " " + std::string(dtype_name(dt)) +
                     " " + layout);
        std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build_in(dt)), "cuda");
        ASSERT_NE(exe, nullptr);
        // f16/bf16: the input, filter and bias rounded once each, the output once (f32 sums).
        const float tolerance = dt == DType::kF16 ? 1e-2f : dt == DType::kBF16 ? 6e-2f : 2e-5f;
        expect_close(want, run(*exe, inputs), tolerance);
        const cuda::Program* program = cuda_program(*exe);
        ASSERT_NE(program, nullptr);
        EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
        EXPECT_EQ(steps_starting(*program, "DepthwiseConv"), 1);
        EXPECT_EQ(steps_starting(*program, "Conv"), 0);
        EXPECT_EQ(steps_starting(*program, "Relu") + steps_starting(*program, "Clip"), 0)
            << "the activation runs in the convolution's step";
      }
    }
    ::unsetenv("KILN_CUDA_LAYOUT");
  }
}

// The own tensor-core convolution (conv_mma.h, forced by KILN_CUDA_CONV_MMA=1; tuning otherwise
// takes it only where it measures faster than cuDNN) against ref in f32: stems reading the NCHW
// image as it is (3 channels, 3x3 and 7x7 stride 2; 5 channels, a 3x5 window, strides 1 and 2),
// 1x1 convolutions of NHWC inputs (16 -> 96 with ReLU6, 48 -> 40 with SiLU, 32 -> 16 with a
// residual Add), output pixel counts that leave partial tiles; then with the kernel off (cuDNN) as
// well.
TEST(CudaTarget, OwnConvolutionKernelMatchesRef) {
  SKIP_WITHOUT_GPU();
  struct Case {
    Shape x, w;
    std::vector<int64_t> strides, pads, dilations;
    bool bias = true;
    int activation = 0;  // 0 none, 1 Relu, 2 Clip [0, 6], 3 SiLU, 4 residual Add
  };
  const std::vector<Case> cases = {
      {Shape{2, 3, 23, 21}, Shape{32, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, true, 2},
      {Shape{1, 3, 30, 30}, Shape{64, 3, 7, 7}, {2, 2}, {3, 3, 3, 3}, {}, true, 1},
      {Shape{2, 5, 13, 12}, Shape{24, 5, 3, 5}, {1, 2}, {1, 2, 1, 2}, {}, false, 0},
      {Shape{2, 16, 9, 7}, Shape{96, 16, 1, 1}, {}, {}, {}, true, 2},
      {Shape{3, 48, 5, 6}, Shape{40, 48, 1, 1}, {}, {}, {}, true, 3},
      {Shape{2, 32, 11, 10}, Shape{16, 32, 1, 1}, {}, {}, {}, true, 4},
  };
  uint32_t seed = 700;
  for (const Case& c : cases) {
    Tensor w = random_tensor(c.w, seed++);
    // Outputs of a few units (some clamped at 0 and at 6) whatever the reduction's length.
    const float gain = 3.0f / std::sqrt(static_cast<float>(c.w[1] * c.w[2] * c.w[3]));
    for (float& v : w.span<float>()) v *= gain;
    const Tensor bias = random_tensor(Shape{c.w[0]}, seed++);
    const Tensor x = random_tensor(c.x, seed++);
    std::vector<Tensor> inputs = {x};
    if (c.activation == 4)
      inputs.push_back(random_tensor(Shape{c.x[0], c.w[0], c.x[2], c.x[3]}, seed++));
    auto build_in = [&](DType dt) {
      return [&, dt](GraphBuilder& b, const std::vector<Value*>& in) {
        auto cast = [&](Value* v, DType to) { return dt == DType::kF32 ? v : cast_to(b, v, to); };
        ops::Conv op;
        if (!c.strides.empty()) op.strides = c.strides;
        if (!c.pads.empty()) op.pads = c.pads;
        if (!c.dilations.empty()) op.dilations = c.dilations;
        Value* z = c.activation == 4 ? cast(in[1], dt) : nullptr;
        std::vector<Value*> args = {cast(in[0], dt), b.constant(in_dtype(w, dt), "w")};
        if (c.bias) args.push_back(b.constant(in_dtype(bias, dt), "b"));
        Value* y = b.add(Op(op), args);
        if (c.activation == 1) y = b.add(Op(ops::Relu{}), {y});
        if (c.activation == 2) {
          y = b.add(Op(ops::Clip{}), {y, b.constant(in_dtype(Tensor::scalar<float>(0.0f), dt)),
                                      b.constant(in_dtype(Tensor::scalar<float>(6.0f), dt))});
        }
        if (c.activation == 3) y = b.add(Op(ops::Mul{}), {y, b.add(Op(ops::Sigmoid{}), {y})});
        if (c.activation == 4) y = b.add(Op(ops::Add{}), {y, z});
        b.output(cast(y, DType::kF32));
      };
    };
    std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build_in(DType::kF32)), "ref");
    ASSERT_NE(ref, nullptr);
    const std::vector<Tensor> want = run(*ref, inputs);
    for (const char* mode : {"1", "0"}) {
      ::setenv("KILN_CUDA_CONV_MMA", mode, 1);
      const bool own = std::string(mode) == "1";
      for (const DType dt : {DType::kF16, DType::kBF16}) {
        SCOPED_TRACE(c.x.to_string() + " * " + c.w.to_string() + " " + std::string(dtype_name(dt)) +
                     (own ? " own" : " cuDNN"));
        std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build_in(dt)), "cuda");
        ASSERT_NE(exe, nullptr);
        // The input, filter and bias rounded once each, the output once (f32 sums).
        expect_close(want, run(*exe, inputs), dt == DType::kF16 ? 1e-2f : 6e-2f);
        const cuda::Program* program = cuda_program(*exe);
        ASSERT_NE(program, nullptr);
        EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
        EXPECT_EQ(steps_starting(*program, "ConvMma"), own ? 1 : 0);
        EXPECT_EQ(steps_starting(*program, "Conv"), 1);
        // The image is read as it is: no padded copy (nor reorder) before the own kernel.
        if (own) {
          EXPECT_EQ(program->count_steps("Pad channels"), 0);
        }
        EXPECT_EQ(steps_starting(*program, "Relu") + steps_starting(*program, "Clip") +
                      steps_starting(*program, "Sigmoid") + steps_starting(*program, "Add"),
                  0)
            << "the epilogue runs in the convolution's step";
      }
    }
    ::unsetenv("KILN_CUDA_CONV_MMA");
  }
}

// A ReLU6 between a dense convolution and a depthwise one (MobileNetV2's expansions and stem):
// the dense convolution's epilogue is a plain ReLU (which cuDNN fuses) and the depthwise kernel
// clamps at 6 as it reads; outputs well above 6 check the bound still holds, in f32 (NCHW) and
// f16/bf16 (NHWC), with the own convolution kernel off and on.
TEST(CudaTarget, Relu6BeforeADepthwiseConvolutionClampsAsItIsRead) {
  SKIP_WITHOUT_GPU();
  Tensor expand = random_tensor(Shape{16, 8, 1, 1}, 800);
  for (float& v : expand.span<float>()) v *= 4.0f;  // |outputs| up to about 16: many above 6
  const Tensor expand_bias = random_tensor(Shape{16}, 801);
  const Tensor dw = random_tensor(Shape{16, 1, 3, 3}, 802);
  const Tensor dw_bias = random_tensor(Shape{16}, 803);
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 8, 10, 9}, 804)};
  auto build_in = [&](DType dt, float hi = 6.0f) {
    return [&, dt, hi](GraphBuilder& b, const std::vector<Value*>& in) {
      auto k = [&](const Tensor& t) { return b.constant(in_dtype(t, dt)); };
      auto relu6 = [&](Value* v) {
        return b.add(Op(ops::Clip{}),
                     {v, k(Tensor::scalar<float>(0.0f)), k(Tensor::scalar<float>(hi))});
      };
      Value* x = dt == DType::kF32 ? in[0] : cast_to(b, in[0], dt);
      x = relu6(b.add(Op(ops::Conv{}), {x, k(expand), k(expand_bias)}));
      ops::Conv depthwise;
      depthwise.group = 16;
      depthwise.pads = std::vector<int64_t>{1, 1, 1, 1};
      x = b.add(Op(depthwise), {x, k(dw), k(dw_bias)});
      b.output(dt == DType::kF32 ? x : cast_to(b, x, DType::kF32));
    };
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build_in(DType::kF32)), "ref");
  ASSERT_NE(ref, nullptr);
  const std::vector<Tensor> want = run(*ref, inputs);
  float largest = 0.0f;
  for (float v : want[0].span<float>()) largest = std::max(largest, std::abs(v));
  // The bound matters: the same graph clipped at 1000 instead of 6 gives other outputs.
  std::shared_ptr<Executable> unbounded =
      compile_for(make_graph(inputs, build_in(DType::kF32, 1000.0f)), "ref");
  ASSERT_NE(unbounded, nullptr);
  float moved = 0.0f;
  const std::vector<Tensor> loose = run(*unbounded, inputs);
  for (int64_t i = 0; i < want[0].numel(); ++i) {
    moved = std::max(moved, std::abs(want[0].data<float>()[i] - loose[0].data<float>()[i]));
  }
  EXPECT_GT(moved, 1.0f);
  for (const char* mode : {"0", "1"}) {
    ::setenv("KILN_CUDA_CONV_MMA", mode, 1);
    for (const DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " own kernel " + mode);
      std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build_in(dt)), "cuda");
      ASSERT_NE(exe, nullptr);
      // Relative to the outputs' scale: sums of 9 terms of up to 6 times the weights.
      const float tolerance = dt == DType::kF32 ? 1e-4f : dt == DType::kF16 ? 1e-2f : 6e-2f;
      const std::vector<Tensor> got = run(*exe, inputs);
      expect_close(want, got, tolerance * std::max(1.0f, largest / 8.0f));
      const cuda::Program* program = cuda_program(*exe);
      ASSERT_NE(program, nullptr);
      EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
      EXPECT_EQ(steps_starting(*program, "Clip"), 0) << "the Clip runs in the convolutions";
      EXPECT_EQ(steps_starting(*program, "DepthwiseConv"), 1);
    }
  }
  ::unsetenv("KILN_CUDA_CONV_MMA");
}

// A MobileNetV2 block in f16 (expand 1x1 + ReLU6, depthwise 3x3 stride 2 + ReLU6, project 1x1):
// every convolution NHWC, so the only reorders are the graph's input and output.
TEST(CudaTarget, DepthwiseConvolutionsStayChannelsLastBetweenDenseOnes) {
  SKIP_WITHOUT_GPU();
  const Tensor expand = random_tensor(Shape{32, 8, 1, 1}, 400);
  const Tensor expand_bias = random_tensor(Shape{32}, 401);
  const Tensor dw = random_tensor(Shape{32, 1, 3, 3}, 402);
  const Tensor dw_bias = random_tensor(Shape{32}, 403);
  Tensor project = random_tensor(Shape{16, 32, 1, 1}, 404);
  for (float& v : project.span<float>()) v *= 0.25f;  // outputs of a few units, not tens
  const std::vector<Tensor> inputs = {random_tensor(Shape{4, 8, 14, 14}, 405)};
  auto build_in = [&](DType dt) {
    return [&, dt](GraphBuilder& b, const std::vector<Value*>& in) {
      auto k = [&](const Tensor& t) { return b.constant(in_dtype(t, dt)); };
      auto relu6 = [&](Value* v) {
        return b.add(Op(ops::Clip{}),
                     {v, k(Tensor::scalar<float>(0.0f)), k(Tensor::scalar<float>(6.0f))});
      };
      Value* x = dt == DType::kF32 ? in[0] : cast_to(b, in[0], dt);
      x = relu6(b.add(Op(ops::Conv{}), {x, k(expand), k(expand_bias)}));
      ops::Conv depthwise;
      depthwise.group = 32;
      depthwise.strides = std::vector<int64_t>{2, 2};
      depthwise.pads = std::vector<int64_t>{1, 1, 1, 1};
      x = relu6(b.add(Op(depthwise), {x, k(dw), k(dw_bias)}));
      x = b.add(Op(ops::Conv{}), {x, k(project)});
      b.output(dt == DType::kF32 ? x : cast_to(b, x, DType::kF32));
    };
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build_in(DType::kF32)), "ref");
  ASSERT_NE(ref, nullptr);
  std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build_in(DType::kF16)), "cuda");
  ASSERT_NE(exe, nullptr);
  expect_close(run(*ref, inputs), run(*exe, inputs), 3e-2f);
  const cuda::Program* program = cuda_program(*exe);
  ASSERT_NE(program, nullptr);
  EXPECT_EQ(program->count_steps("DepthwiseConv+Bias+Clip"), 1);
  EXPECT_EQ(program->count_steps("Reorder NCHW>NHWC"), 1);
  EXPECT_EQ(program->count_steps("Reorder NHWC>NCHW"), 1);
  EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
}

// Reshapes between NHWC convolutions, found by the differential tester (patterns transpose and
// detector): ShuffleNet's channel shuffle (Reshape to 5-D, Transpose, Reshape back) read by a
// convolution asked buffer_nhwc of a buffer holding the 5-D shape and aborted; a one-pixel head
// ([N, A*K, 1, 1], stored NHWC) reshaped to [N, A, K, 1, 1] was "reordered" as if 4-D.
TEST(CudaTarget, ReshapesOfChannelsLastBuffersMatchRef) {
  SKIP_WITHOUT_GPU();
  auto ints = [](std::vector<int64_t> v) {
    return Tensor::from_vector<int64_t>(v, Shape{static_cast<int64_t>(v.size())});
  };
  const Tensor w1 = random_tensor(Shape{16, 6, 3, 3}, 420);
  const Tensor w2 = random_tensor(Shape{16, 16, 1, 1}, 421);
  const Tensor w3 = random_tensor(Shape{21, 6, 3, 3}, 422);
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 6, 6, 6}, 423),
                                      random_tensor(Shape{2, 6, 1, 1}, 424)};
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    ops::Conv same;
    same.pads = std::vector<int64_t>{1, 1, 1, 1};
    Value* x = b.add(Op(ops::Relu{}), {b.add(Op(same), {in[0], b.constant(w1)})});
    x = b.add(Op(ops::Reshape{}), {x, b.constant(ints({2, 2, 8, 6, 6}))});
    ops::Transpose shuffle;
    shuffle.perm = std::vector<int64_t>{0, 2, 1, 3, 4};
    x = b.add(Op(shuffle), {x});
    x = b.add(Op(ops::Reshape{}), {x, b.constant(ints({2, 16, 6, 6}))});
    b.output(b.add(Op(ops::Conv{}), {x, b.constant(w2)}));
    Value* head = b.add(Op(same), {in[1], b.constant(w3)});
    head = b.add(Op(ops::Reshape{}), {head, b.constant(ints({2, 3, 7, 1, 1}))});
    ops::Transpose last;
    last.perm = std::vector<int64_t>{0, 1, 3, 4, 2};
    b.output(b.add(Op(ops::Sigmoid{}), {b.add(Op(last), {head})}));
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build), "ref");
  ASSERT_NE(ref, nullptr);
  const std::vector<Tensor> want = run(*ref, inputs);
  for (const char* layout : {"nchw", "nhwc"}) {
    SCOPED_TRACE(layout);
    std::shared_ptr<Executable> exe =
        compile_cuda_with(make_graph(inputs, build), "KILN_CUDA_LAYOUT", layout);
    ASSERT_NE(exe, nullptr);
    expect_close(want, run(*exe, inputs));
  }
}

// EfficientNet's MBConv block (expand 1x1 + SiLU, depthwise 3x3 + SiLU, squeeze-and-excitation:
// global average pool, 1x1 reduce + SiLU, 1x1 expand, Sigmoid, channel-wise Mul; project 1x1,
// residual Add) in f32 (NCHW) and f16 (NHWC): each SiLU inside its convolution's step, the
// Sigmoid and Mul one scaling step, no separate Sigmoid or Mul, no reorder of the squeeze.
TEST(CudaTarget, SiluAndSqueezeExcitationRunInsideTheirProducers) {
  SKIP_WITHOUT_GPU();
  const Tensor expand = random_tensor(Shape{32, 16, 1, 1}, 420);
  const Tensor expand_bias = random_tensor(Shape{32}, 421);
  const Tensor dw = random_tensor(Shape{32, 1, 3, 3}, 422);
  const Tensor dw_bias = random_tensor(Shape{32}, 423);
  const Tensor reduce = random_tensor(Shape{8, 32, 1, 1}, 424);
  const Tensor reduce_bias = random_tensor(Shape{8}, 425);
  const Tensor excite = random_tensor(Shape{32, 8, 1, 1}, 426);
  const Tensor excite_bias = random_tensor(Shape{32}, 427);
  Tensor project = random_tensor(Shape{16, 32, 1, 1}, 428);
  for (float& v : project.span<float>()) v *= 0.25f;
  const std::vector<Tensor> inputs = {random_tensor(Shape{4, 16, 14, 14}, 429)};
  auto build_in = [&](DType dt) {
    return [&, dt](GraphBuilder& b, const std::vector<Value*>& in) {
      auto k = [&](const Tensor& t) { return b.constant(in_dtype(t, dt)); };
      auto silu = [&](Value* v) {
        return b.add(Op(ops::Mul{}), {v, b.add(Op(ops::Sigmoid{}), {v})});
      };
      Value* x = dt == DType::kF32 ? in[0] : cast_to(b, in[0], dt);
      Value* e = silu(b.add(Op(ops::Conv{}), {x, k(expand), k(expand_bias)}));
      ops::Conv depthwise;
      depthwise.group = 32;
      depthwise.pads = std::vector<int64_t>{1, 1, 1, 1};
      Value* d = silu(b.add(Op(depthwise), {e, k(dw), k(dw_bias)}));
      Value* g = b.add(Op(ops::GlobalAveragePool{}), {d});
      Value* r = silu(b.add(Op(ops::Conv{}), {g, k(reduce), k(reduce_bias)}));
      Value* sig =
          b.add(Op(ops::Sigmoid{}), {b.add(Op(ops::Conv{}), {r, k(excite), k(excite_bias)})});
      Value* scaled = b.add(Op(ops::Mul{}), {d, sig});
      Value* y = b.add(Op(ops::Add{}), {b.add(Op(ops::Conv{}), {scaled, k(project)}), x});
      b.output(dt == DType::kF32 ? y : cast_to(b, y, DType::kF32));
    };
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build_in(DType::kF32)), "ref");
  ASSERT_NE(ref, nullptr);
  const std::vector<Tensor> want = run(*ref, inputs);
  for (const DType dt : {DType::kF32, DType::kF16}) {
    SCOPED_TRACE(dtype_name(dt));
    std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build_in(dt)), "cuda");
    ASSERT_NE(exe, nullptr);
    expect_close(want, run(*exe, inputs), dt == DType::kF32 ? 1e-4f : 3e-2f);
    const cuda::Program* program = cuda_program(*exe);
    ASSERT_NE(program, nullptr);
    // cuDNN's or the own kernel's (ConvMma), whichever tuning measured faster.
    EXPECT_EQ(program->count_steps("Conv+Bias+SiLU") + program->count_steps("ConvMma+Bias+SiLU"),
              2);
    EXPECT_EQ(program->count_steps("DepthwiseConv+Bias+SiLU"), 1);
    EXPECT_EQ(program->count_steps("Sigmoid+ChannelScale"), 1);
    EXPECT_EQ(steps_starting(*program, "Sigmoid") + steps_starting(*program, "Mul"), 1);
    // f16 runs NHWC: the squeeze's [N, C, 1, 1] values need no reorder, only the graph's input
    // and output do.
    EXPECT_EQ(steps_starting(*program, "Reorder"), dt == DType::kF16 ? 2 : 0);
    EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
  }
}

// The transformer pieces: LayerNormalization, Split, Slice (steps, negative indices), Gather of
// one index (ViT's class token), Expand; in f32, and LayerNormalization in f16 too.
TEST(CudaTarget, TransformerPiecesMatchRef) {
  SKIP_WITHOUT_GPU();
  const Tensor scale = random_tensor(Shape{8}, 90);
  const Tensor bias = random_tensor(Shape{8}, 91);
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 6, 8}, 92),
                                      random_tensor(Shape{3, 1, 4}, 93)};
  auto i64 = [](std::vector<int64_t> v) {
    return Tensor::from_vector<int64_t>(v, Shape{static_cast<int64_t>(v.size())});
  };
  auto build = [&](DType dt) {
    return [&, dt](GraphBuilder& b, const std::vector<Value*>& in) {
      auto cast = [&](Value* v, DType to) { return dt == DType::kF32 ? v : cast_to(b, v, to); };
      Value* x = cast(in[0], dt);
      b.output(cast(b.add(Op(ops::LayerNormalization{}),
                          {x, b.constant(in_dtype(scale, dt)), b.constant(in_dtype(bias, dt))}),
                    DType::kF32));
      ops::Split split;
      split.axis = 2;
      for (Value* part : b.add(Op(split), {in[0], b.constant(i64({3, 5}))}, 2)) b.output(part);
      b.output(b.add(Op(ops::Slice{}), {in[0], b.constant(i64({1, -1})), b.constant(i64({5, 0})),
                                        b.constant(i64({1, 2})), b.constant(i64({2, -3}))}));
      ops::Gather gather;
      gather.axis = 1;
      b.output(b.add(Op(gather), {in[0], b.constant(Tensor::scalar<int64_t>(-6))}));
      b.output(b.add(Op(ops::Expand{}), {in[1], b.constant(i64({2, 3, 5, 4}))}));
    };
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build(DType::kF32)), "ref");
  ASSERT_NE(ref, nullptr);
  const std::vector<Tensor> want = run(*ref, inputs);
  for (const DType dt : {DType::kF32, DType::kF16}) {
    SCOPED_TRACE(dtype_name(dt));
    std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build(dt)), "cuda");
    ASSERT_NE(exe, nullptr);
    expect_close(want, run(*exe, inputs), dt == DType::kF16 ? 1e-2f : 1e-4f);
    const cuda::Program* program = cuda_program(*exe);
    ASSERT_NE(program, nullptr);
    EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()))
        << "every step on the device";
  }
}

// An encoder layer as exported from PyTorch and converted to f16 by quantize_fp16 (LayerNorm,
// Softmax and Erf between Casts to f32 and back): Linear layers as MatMul + bias Add, attention
// as batched MatMuls of transposed heads with the scores scaled by a Mul, the exact GELU as
// Div/Erf/Add/Mul/Mul, the block's residual Add after the second Linear. In f32 and f16 against ref
// in f32; every step on the device, the bias Adds, the residual Add and the scaling inside the
// matmuls, the GELU one step, and in f16 no Cast but the graph's edges.
TEST(CudaTarget, EncoderLayerRunsFusedOnTheDevice) {
  SKIP_WITHOUT_GPU();
  const Tensor gamma = scaled_random(Shape{32}, 100, 1.0f);
  const Tensor beta = scaled_random(Shape{32}, 101, 1.0f);
  const Tensor w_in = scaled_random(Shape{32, 64}, 102, 0.3f);
  const Tensor b_in = scaled_random(Shape{64}, 103, 0.5f);
  const Tensor w_out = scaled_random(Shape{64, 32}, 104, 0.3f);
  const Tensor b_out = scaled_random(Shape{32}, 105, 0.5f);
  const std::vector<Tensor> inputs = {scaled_random(Shape{2, 16, 32}, 106, 2.0f)};
  auto i64 = [](std::vector<int64_t> v) {
    return Tensor::from_vector<int64_t>(v, Shape{static_cast<int64_t>(v.size())});
  };
  auto build = [&](DType dt) {
    return [&, dt](GraphBuilder& b, const std::vector<Value*>& in) {
      const bool half = dt != DType::kF32;
      auto cast = [&](Value* v, DType to) { return half ? cast_to(b, v, to) : v; };
      auto k = [&](const Tensor& t) { return b.constant(in_dtype(t, dt)); };
      auto scalar = [&](float v) { return k(Tensor::scalar<float>(v)); };
      // What quantize_fp16 leaves around the ops it keeps in f32.
      auto in_f32 = [&](Op op, Value* v, std::vector<Value*> more = {}) {
        std::vector<Value*> args = {cast(v, DType::kF32)};
        args.insert(args.end(), more.begin(), more.end());
        return cast(b.add(std::move(op), args), dt);
      };
      Value* x = cast(in[0], dt);
      Value* ln = in_f32(Op(ops::LayerNormalization{}), x, {b.constant(gamma), b.constant(beta)});
      // The bias constants come after their MatMuls, as the exporter and the fp16 conversion
      // leave them.
      Value* h_mm = b.add(Op(ops::MatMul{}), {ln, k(w_in)});
      Value* h = b.add(Op(ops::Add{}), {k(b_in), h_mm});
      ops::Reshape heads;
      Value* split = b.add(Op(heads), {h, b.constant(i64({2, 16, 4, 16}))});
      ops::Transpose tq;
      tq.perm = std::vector<int64_t>{0, 2, 1, 3};
      ops::Transpose tk;
      tk.perm = std::vector<int64_t>{0, 2, 3, 1};
      Value* q = b.add(Op(tq), {split});
      Value* scores = b.add(Op(ops::Mul{}),
                            {b.add(Op(ops::MatMul{}), {q, b.add(Op(tk), {split})}), scalar(0.25f)});
      Value* p = in_f32(Op(ops::Softmax{}), scores);
      Value* ctx = b.add(Op(tq), {b.add(Op(ops::MatMul{}), {p, q})});
      Value* merged = b.add(Op(heads), {ctx, b.constant(i64({2, 16, 64}))});
      Value* erf = in_f32(Op(ops::Erf{}), b.add(Op(ops::Div{}), {merged, scalar(1.4142135f)}));
      Value* gelu = b.add(
          Op(ops::Mul{}),
          {b.add(Op(ops::Mul{}), {merged, b.add(Op(ops::Add{}), {erf, scalar(1)})}), scalar(0.5f)});
      Value* y_mm = b.add(Op(ops::MatMul{}), {gelu, k(w_out)});
      Value* y = b.add(Op(ops::Add{}), {k(b_out), y_mm});
      b.output(cast(b.add(Op(ops::Add{}), {y, x}), DType::kF32));
    };
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build(DType::kF32)), "ref");
  ASSERT_NE(ref, nullptr);
  const std::vector<Tensor> want = run(*ref, inputs);
  for (const DType dt : {DType::kF32, DType::kF16}) {
    SCOPED_TRACE(dtype_name(dt));
    std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build(dt)), "cuda");
    ASSERT_NE(exe, nullptr);
    expect_close(want, run(*exe, inputs), dt == DType::kF16 ? 1e-2f : 1e-4f);
    const cuda::Program* program = cuda_program(*exe);
    ASSERT_NE(program, nullptr);
    EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()))
        << "every step on the device";
    EXPECT_EQ(program->count_steps("MatMul+Bias"), 1);
    EXPECT_EQ(program->count_steps("MatMul+Bias+Residual"), 1);
    EXPECT_EQ(program->count_steps("MatMul+Scale"), 1);
    EXPECT_EQ(program->count_steps("Gelu"), 1);
    EXPECT_EQ(program->count_steps("Softmax"), 1);
    EXPECT_EQ(program->count_steps("LayerNormalization"), 1);
    EXPECT_EQ(program->count_steps("Add"), 0) << "every Add inside a matmul";
    EXPECT_EQ(program->count_steps("Cast"), dt == DType::kF32 ? 0 : 2) << "the graph's edges";
  }
}

// Softmax and LayerNormalization rows of every width the one-warp-a-row kernels take (1 to 32
// elements a lane, a partial last one) and past them (the block-a-row kernels), LogSoftmax, and the
// scaling by a constant scalar (Mul either way round, Div), in f32 and f16, against ref in f32.
TEST(CudaTarget, RowKernelsAndScalarScalingMatchRef) {
  SKIP_WITHOUT_GPU();
  const std::vector<int64_t> widths = {5, 32, 33, 100, 197, 300, 512, 768, 1000, 1024, 1500};
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < widths.size(); ++i) {
    Tensor t = random_tensor(Shape{3, 2, widths[i]}, 110 + static_cast<uint32_t>(i));
    for (float& v : t.span<float>()) v *= 4.0f;
    inputs.push_back(std::move(t));
  }
  auto build = [&](DType dt) {
    return [&, dt](GraphBuilder& b, const std::vector<Value*>& in) {
      auto cast = [&](Value* v, DType to) { return dt == DType::kF32 ? v : cast_to(b, v, to); };
      auto scalar = [&](float v) { return b.constant(in_dtype(Tensor::scalar<float>(v), dt)); };
      for (size_t i = 0; i < in.size(); ++i) {
        const Tensor scale = random_tensor(Shape{widths[i]}, 130 + static_cast<uint32_t>(i));
        const Tensor bias = random_tensor(Shape{widths[i]}, 150 + static_cast<uint32_t>(i));
        Value* x = cast(in[i], dt);
        b.output(cast(b.add(Op(ops::Softmax{}), {x}), DType::kF32));
        b.output(cast(b.add(Op(ops::LayerNormalization{}),
                            {x, b.constant(in_dtype(scale, dt)), b.constant(in_dtype(bias, dt))}),
                      DType::kF32));
        if (i % 3 == 0) b.output(cast(b.add(Op(ops::LogSoftmax{}), {x}), DType::kF32));
        Value* scaled =
            b.add(Op(ops::Mul{}), {scalar(0.5f), b.add(Op(ops::Mul{}), {x, scalar(3)})});
        b.output(cast(b.add(Op(ops::Div{}), {scaled, scalar(4)}), DType::kF32));
      }
    };
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build(DType::kF32)), "ref");
  ASSERT_NE(ref, nullptr);
  const std::vector<Tensor> want = run(*ref, inputs);
  for (const DType dt : {DType::kF32, DType::kF16}) {
    SCOPED_TRACE(dtype_name(dt));
    std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build(dt)), "cuda");
    ASSERT_NE(exe, nullptr);
    expect_close(want, run(*exe, inputs), dt == DType::kF16 ? 1e-2f : 1e-4f);
    const cuda::Program* program = cuda_program(*exe);
    ASSERT_NE(program, nullptr);
    EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()))
        << "every step on the device";
  }
}

// A row or window of nothing but -inf (an attention row masked whole) has the maximum -inf, as
// ONNX and ref say: with -FLT_MAX as the identity, the ONNX 1.23 attention tests' guard
// Where(ReduceMax(mask) == -inf, 0, Softmax(...)) missed the masked rows and let NaN through.
TEST(CudaTarget, MaximaOfRowsOfMinusInfinityAreMinusInfinity) {
  SKIP_WITHOUT_GPU();
  const float inf = std::numeric_limits<float>::infinity();
  Tensor rows = random_tensor(Shape{4, 40}, 170);
  for (int64_t j = 0; j < 40; ++j) rows.span<float>()[j] = -inf;      // row 0
  for (int64_t j = 40; j < 80; j += 2) rows.span<float>()[j] = -inf;  // row 1 half
  Tensor maps = random_tensor(Shape{1, 3, 4, 4}, 171);
  for (int64_t j = 0; j < 16; ++j) maps.span<float>()[j] = -inf;  // channel 0
  const std::vector<Tensor> inputs = {rows, maps};
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    ops::ReduceMax reduce;
    reduce.axes = std::vector<int64_t>{-1};
    Value* row_max = b.add(Op(reduce), {in[0]});
    b.output(row_max);
    Value* masked = b.add(Op(ops::Equal{}), {row_max, b.constant(Tensor::scalar<float>(-inf))});
    Value* soft = b.add(Op(ops::Softmax{}), {in[0]});
    b.output(b.add(Op(ops::Where{}), {masked, b.constant(Tensor::scalar<float>(0.0f)), soft}));
    b.output(b.add(Op(ops::GlobalMaxPool{}), {in[1]}));
    ops::MaxPool pool;
    pool.kernel_shape = std::vector<int64_t>{2, 2};
    pool.strides = std::vector<int64_t>{2, 2};
    b.output(b.add(Op(pool), {in[1]}));
  };
  std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build), "cuda");
  ASSERT_NE(exe, nullptr);
  const std::vector<Tensor> got = run(*exe, inputs);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].span<float>()[0], -inf) << "ReduceMax of a row of -inf";
  EXPECT_TRUE(std::isfinite(got[0].span<float>()[1]));
  for (int64_t j = 0; j < 40; ++j) EXPECT_EQ(got[1].span<float>()[j], 0.0f) << "masked row " << j;
  for (int64_t j = 40; j < 160; ++j) EXPECT_TRUE(std::isfinite(got[1].span<float>()[j])) << j;
  EXPECT_EQ(got[2].span<float>()[0], -inf) << "GlobalMaxPool of a channel of -inf";
  for (int64_t j = 0; j < 4; ++j)
    EXPECT_EQ(got[3].span<float>()[j], -inf) << "MaxPool window " << j;
  std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build), "ref");
  ASSERT_NE(ref, nullptr);
  const std::vector<Tensor> want = run(*ref, inputs);
  for (size_t o = 0; o < want.size(); ++o) {
    const auto w = want[o].span<float>();
    const auto g = got[o].span<float>();
    for (size_t i = 0; i < w.size(); ++i) {
      EXPECT_TRUE(w[i] == g[i] || std::fabs(w[i] - g[i]) <= 1e-5f) << o << " " << i;
    }
  }
}

// Attention's head split: a Split (BERT), Slice (ViT, torch 1.x) or Gather (ViT, torch 2.x) of the
// QKV projection, reshaped to heads and transposed, is one strided copy each, no Transpose step.
TEST(CudaTarget, HeadSplitsFoldIntoOneCopy) {
  SKIP_WITHOUT_GPU();
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 5, 48}, 170),
                                      random_tensor(Shape{5, 2, 3, 16}, 171)};
  auto i64 = [](std::vector<int64_t> v) {
    return Tensor::from_vector<int64_t>(v, Shape{static_cast<int64_t>(v.size())});
  };
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    ops::Transpose bhsd;
    bhsd.perm = std::vector<int64_t>{0, 2, 1, 3};
    ops::Transpose bhds;
    bhds.perm = std::vector<int64_t>{0, 2, 3, 1};
    ops::Split split;
    split.axis = 2;
    ops::Reshape reshape;
    const std::vector<Value*> qkv = b.add(Op(split), {in[0], b.constant(i64({16, 16, 16}))}, 3);
    for (int i = 0; i < 3; ++i) {
      Value* heads =
          b.add(Op(reshape), {qkv[static_cast<size_t>(i)], b.constant(i64({2, 5, 4, 4}))});
      b.output(b.add(Op(i == 1 ? bhds : bhsd), {heads}));
    }
    Value* sliced = b.add(Op(ops::Slice{}), {in[0], b.constant(i64({8})), b.constant(i64({24})),
                                             b.constant(i64({2}))});
    ops::Transpose reversed;  // no perm: reversed dims
    b.output(b.add(Op(reversed), {b.add(Op(reshape), {sliced, b.constant(i64({10, 2, 8}))})}));
    ops::Gather gather;
    gather.axis = 2;
    ops::Transpose heads_first;
    heads_first.perm = std::vector<int64_t>{1, 2, 0, 3};
    Value* k = b.add(Op(gather), {in[1], b.constant(Tensor::scalar<int64_t>(1))});
    b.output(b.add(Op(heads_first), {b.add(Op(reshape), {k, b.constant(i64({5, 2, 4, 4}))})}));
  };
  auto [device, total] = expect_cuda_matches_ref(inputs, build, 0.0f);
  EXPECT_EQ(device, total) << "every step on the device";
  std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build), "cuda");
  ASSERT_NE(exe, nullptr);
  const cuda::Program* program = cuda_program(*exe);
  ASSERT_NE(program, nullptr);
  EXPECT_EQ(program->count_steps("Transpose"), 0);
  EXPECT_EQ(static_cast<int>(program->steps().size()), 3) << "Split, Slice, Gather";
}

// Attention subgraphs as torch exports them: `kBert` (Split, heads transposed, scores scaled after
// the MatMul), `kSdpa` (torch 2.x's MultiheadAttention: [S, B, 3E] unflattened, one 5-D Transpose,
// Gather, heads through [S, B*H, D], q and kᵀ each scaled by a Mul), `kBmm` (torch 1.x's: 3-D
// batches of B*H heads, q scaled before the MatMul), `kMasked` (kBert with an additive mask) and
// `kProjected` (kSdpa as MultiheadAttention runs it: batch-first x transposed, the QKV projection,
// and after it the output projection, back to [S, B, E] and transposed to batch first).
enum class AttentionForm { kBert, kSdpa, kBmm, kMasked, kProjected };
constexpr int64_t kAttnB = 2, kAttnH = 3, kAttnD = 64, kAttnE = kAttnH * kAttnD;

// The inputs of attention_graph: the QKV projection's output (and the mask).
std::vector<Tensor> attention_inputs(AttentionForm form, int64_t seq) {
  const bool seq_first = form == AttentionForm::kSdpa || form == AttentionForm::kBmm;
  const int64_t width = form == AttentionForm::kProjected ? kAttnE : 3 * kAttnE;
  Tensor x = random_tensor(seq_first ? Shape{seq, kAttnB, width} : Shape{kAttnB, seq, width},
                           200 + static_cast<uint32_t>(seq));
  for (float& v : x.span<float>()) v *= 2.0f;
  std::vector<Tensor> inputs = {x};
  if (form == AttentionForm::kMasked) {
    inputs.push_back(random_tensor(Shape{kAttnB, 1, seq, seq}, 201));
  }
  return inputs;
}

// Attention of `form` over `seq` tokens in `dt` (Casts from and to f32 at the edges and around the
// Softmax, as quantize_fp16 leaves them), heads merged as the output projection reads them.
BuildFn attention_graph(AttentionForm form, int64_t seq, DType dt) {
  return [=](GraphBuilder& b, const std::vector<Value*>& in) {
    auto i64 = [](std::vector<int64_t> v) {
      return Tensor::from_vector<int64_t>(v, Shape{static_cast<int64_t>(v.size())});
    };
    auto perm = [](std::vector<int64_t> p) {
      ops::Transpose t;
      t.perm = std::move(p);
      return Op(t);
    };
    const bool half = dt != DType::kF32;
    auto cast = [&](Value* v, DType to) { return half ? cast_to(b, v, to) : v; };
    auto scalar = [&](float v) { return b.constant(in_dtype(Tensor::scalar<float>(v), dt)); };
    auto reshape = [&](Value* v, std::vector<int64_t> shape) {
      return b.add(Op(ops::Reshape{}), {v, b.constant(i64(std::move(shape)))});
    };
    const int64_t B = kAttnB, H = kAttnH, D = kAttnD, E = kAttnE;
    const bool bert = form == AttentionForm::kBert || form == AttentionForm::kMasked;
    Value* qkv = cast(in[0], dt);
    if (form == AttentionForm::kProjected) {
      Tensor w = random_tensor(Shape{E, 3 * E}, 230);
      for (float& x : w.span<float>()) x *= 0.1f;
      const Tensor bias = random_tensor(Shape{3 * E}, 231);
      Value* rows = b.add(perm({1, 0, 2}), {qkv});
      qkv = b.add(Op(ops::Add{}), {b.add(Op(ops::MatMul{}), {rows, b.constant(in_dtype(w, dt))}),
                                   b.constant(in_dtype(bias, dt))});
    }
    Value* q = nullptr;
    Value* kt = nullptr;  // k transposed: [..., D, S]
    Value* v = nullptr;
    if (bert) {
      ops::Split split;
      split.axis = 2;
      auto parts = b.add(Op(split), {qkv, b.constant(i64({E, E, E}))}, 3);
      q = b.add(perm({0, 2, 1, 3}), {reshape(parts[0], {B, seq, H, D})});
      kt = b.add(perm({0, 2, 3, 1}), {reshape(parts[1], {B, seq, H, D})});
      v = b.add(perm({0, 2, 1, 3}), {reshape(parts[2], {B, seq, H, D})});
    } else {
      Value* u = b.add(Op(ops::Unsqueeze{}), {reshape(qkv, {seq, B, 3, E}), b.constant(i64({0}))});
      Value* t =
          b.add(Op(ops::Squeeze{}), {b.add(perm({3, 1, 2, 0, 4}), {u}), b.constant(i64({3}))});
      std::vector<Value*> heads;
      for (int64_t i = 0; i < 3; ++i) {
        Value* part = b.add(Op(ops::Gather{}), {t, b.constant(Tensor::scalar<int64_t>(i))});
        heads.push_back(b.add(perm({1, 0, 2}), {reshape(part, {seq, B * H, D})}));
      }
      if (form == AttentionForm::kSdpa || form == AttentionForm::kProjected) {
        const float root = std::sqrt(1.0f / std::sqrt(static_cast<float>(D)));
        q = b.add(Op(ops::Mul{}), {reshape(heads[0], {B, H, seq, D}), scalar(root)});
        kt = b.add(Op(ops::Mul{}),
                   {b.add(perm({0, 1, 3, 2}), {reshape(heads[1], {B, H, seq, D})}), scalar(root)});
        v = reshape(heads[2], {B, H, seq, D});
      } else {
        q = b.add(Op(ops::Div{}), {heads[0], scalar(8.0f)});
        kt = b.add(perm({0, 2, 1}), {heads[1]});
        v = heads[2];
      }
    }
    Value* scores = b.add(Op(ops::MatMul{}), {q, kt});
    if (bert) scores = b.add(Op(ops::Mul{}), {scores, scalar(0.125f)});
    if (form == AttentionForm::kMasked) {
      scores = b.add(Op(ops::Add{}), {scores, cast(in[1], dt)});
    }
    Value* p = cast(b.add(Op(ops::Softmax{}), {cast(scores, DType::kF32)}), dt);
    Value* o = b.add(Op(ops::MatMul{}), {p, v});
    if (form == AttentionForm::kSdpa || form == AttentionForm::kProjected) {
      o = reshape(b.add(perm({2, 0, 1, 3}), {o}), {seq * B, E});
      if (form == AttentionForm::kProjected) {  // out_proj, back to [S, B, E], batch first
        Tensor w = random_tensor(Shape{E, E}, 232);
        for (float& x : w.span<float>()) x *= 0.1f;
        const Tensor bias = random_tensor(Shape{E}, 233);
        ops::Gemm gemm;
        gemm.transB = 1;
        o = b.add(Op(gemm), {o, b.constant(in_dtype(w, dt)), b.constant(in_dtype(bias, dt))});
        o = b.add(perm({1, 0, 2}), {reshape(o, {seq, B, E})});
      }
    } else if (form == AttentionForm::kBmm) {
      o = reshape(b.add(perm({1, 0, 2}), {o}), {seq * B, E});
    } else {
      o = reshape(b.add(perm({0, 2, 1, 3}), {o}), {B, seq, E});
    }
    b.output(cast(o, DType::kF32));
  };
}

// Runs without a GPU: the forms torch exports are found in f16 and bf16 (not in f32, which keeps
// the unfused path, nor with a mask).
TEST(CudaAttention, PlanFindsTheExportedForms) {
  for (const AttentionForm form : {AttentionForm::kBert, AttentionForm::kSdpa, AttentionForm::kBmm,
                                   AttentionForm::kMasked, AttentionForm::kProjected}) {
    for (const DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " form " + std::to_string(static_cast<int>(form)));
      const std::vector<Tensor> inputs = attention_inputs(form, 197);
      std::shared_ptr<Graph> graph = make_graph(inputs, attention_graph(form, 197, dt));
      cuda::Builder builder(*graph, 0, nullptr, nullptr, {});
      const bool fused = dt != DType::kF32 && form != AttentionForm::kMasked;
      EXPECT_EQ(cuda::plan_attention(builder), fused ? 1 : 0);
    }
  }
}

// Each form as one fused Attention step in f16 and bf16 (no Transpose, Softmax or MatMul step left:
// q, k and v read in place from the projection's output), the old path in f32 and with a mask;
// sequence lengths 128 and 197 (BERT's and ViT's) and 5 (one partial tile); against ref in f32.
// One test per exported form, so that a sanitizer run can pick forms (the projected form runs
// cuBLASLt GEMMs too).
class CudaFusedAttention : public ::testing::TestWithParam<AttentionForm> {};

TEST_P(CudaFusedAttention, MatchesRef) {
  SKIP_WITHOUT_GPU();
  const AttentionForm form = GetParam();
  for (const int64_t seq : {int64_t{128}, int64_t{197}, int64_t{5}}) {
    if (form == AttentionForm::kMasked && seq != 5) continue;
    const std::vector<Tensor> inputs = attention_inputs(form, seq);
    std::shared_ptr<Executable> ref =
        compile_for(make_graph(inputs, attention_graph(form, seq, DType::kF32)), "ref");
    ASSERT_NE(ref, nullptr);
    const std::vector<Tensor> want = run(*ref, inputs);
    for (const DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " form " + std::to_string(static_cast<int>(form)) +
                   " seq " + std::to_string(seq));
      std::shared_ptr<Executable> exe =
          compile_for(make_graph(inputs, attention_graph(form, seq, dt)), "cuda");
      ASSERT_NE(exe, nullptr);
      const float tolerance = dt == DType::kF16 ? 1e-2f : dt == DType::kBF16 ? 6e-2f : 1e-4f;
      expect_close(want, run(*exe, inputs), tolerance);
      const cuda::Program* program = cuda_program(*exe);
      ASSERT_NE(program, nullptr);
      EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
      const bool fused = dt != DType::kF32 && form != AttentionForm::kMasked;
      EXPECT_EQ(program->count_steps("Attention"), fused ? 1 : 0);
      if (fused && form == AttentionForm::kProjected) {
        EXPECT_EQ(static_cast<int>(program->steps().size()), 5)
            << "Cast, MatMul+Bias (on the untransposed rows), Attention, Gemm+Bias, Cast";
        EXPECT_EQ(program->count_steps("Transpose"), 0);
      } else if (fused) {
        EXPECT_EQ(static_cast<int>(program->steps().size()), 3) << "Cast, Attention, Cast";
      }
    }
  }
}

std::string attention_form_name(const ::testing::TestParamInfo<AttentionForm>& info) {
  static const char* const kNames[] = {"Bert", "Sdpa", "Bmm", "Masked", "Projected"};
  return kNames[static_cast<int>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(Forms, CudaFusedAttention,
                         ::testing::Values(AttentionForm::kBert, AttentionForm::kSdpa,
                                           AttentionForm::kBmm, AttentionForm::kMasked,
                                           AttentionForm::kProjected),
                         attention_form_name);

// A transformer MLP (Linear, exact GELU as exported, Linear): in f16 and bf16 the GELU runs as
// cuBLASLt's GELU_BIAS epilogue of the first matmul (the tanh approximation: within f16's
// tolerance), in f32 as its own exact step; against ref in f32.
TEST(CudaTarget, GeluRunsInTheMatmulEpilogueInHalfPrecision) {
  SKIP_WITHOUT_GPU();
  const Tensor w1 = scaled_random(Shape{64, 256}, 220, 0.25f);
  const Tensor b1 = random_tensor(Shape{256}, 221);
  const Tensor w2 = scaled_random(Shape{256, 64}, 222, 0.1f);
  const Tensor b2 = random_tensor(Shape{64}, 223);
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 24, 64}, 224)};
  auto build = [&](DType dt) {
    return [&, dt](GraphBuilder& b, const std::vector<Value*>& in) {
      const bool half = dt != DType::kF32;
      auto cast = [&](Value* v, DType to) { return half ? cast_to(b, v, to) : v; };
      auto k = [&](const Tensor& t) { return b.constant(in_dtype(t, dt)); };
      auto scalar = [&](float v) { return k(Tensor::scalar<float>(v)); };
      Value* h = b.add(Op(ops::Add{}), {b.add(Op(ops::MatMul{}), {cast(in[0], dt), k(w1)}), k(b1)});
      Value* erf = cast(b.add(Op(ops::Erf{}),
                              {cast(b.add(Op(ops::Div{}), {h, scalar(1.4142135f)}), DType::kF32)}),
                        dt);
      Value* gelu = b.add(
          Op(ops::Mul{}),
          {b.add(Op(ops::Mul{}), {h, b.add(Op(ops::Add{}), {erf, scalar(1)})}), scalar(0.5f)});
      Value* y = b.add(Op(ops::Add{}), {b.add(Op(ops::MatMul{}), {gelu, k(w2)}), k(b2)});
      b.output(cast(y, DType::kF32));
    };
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build(DType::kF32)), "ref");
  ASSERT_NE(ref, nullptr);
  const std::vector<Tensor> want = run(*ref, inputs);
  for (const DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dt));
    std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build(dt)), "cuda");
    ASSERT_NE(exe, nullptr);
    expect_close(want, run(*exe, inputs),
                 dt == DType::kF16    ? 1e-2f
                 : dt == DType::kBF16 ? 6e-2f
                                      : 1e-4f);
    const cuda::Program* program = cuda_program(*exe);
    ASSERT_NE(program, nullptr);
    EXPECT_EQ(program->count_steps("MatMul+Bias+Gelu"), dt == DType::kF32 ? 0 : 1);
    EXPECT_EQ(program->count_steps("Gelu"), dt == DType::kF32 ? 1 : 0);
    EXPECT_EQ(program->count_steps("MatMul+Bias"), dt == DType::kF32 ? 2 : 1);
  }
}

// The same MLP with the Gelu op (as ONNX opset 20 and com.microsoft Gelu/FastGelu import): in f16
// and bf16 it runs as the GELU_BIAS epilogue too, in f32 as one elementwise step, either form; the
// Swish op after the second matmul runs on the device too.
TEST(CudaTarget, GeluOpRunsInTheMatmulEpilogueInHalfPrecision) {
  SKIP_WITHOUT_GPU();
  const Tensor w1 = scaled_random(Shape{64, 256}, 230, 0.25f);
  const Tensor b1 = random_tensor(Shape{256}, 231);
  const Tensor w2 = scaled_random(Shape{256, 64}, 232, 0.1f);
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 24, 64}, 234)};
  for (const std::string form : {"none", "tanh"}) {
    auto build = [&](DType dt) {
      return [&, dt](GraphBuilder& b, const std::vector<Value*>& in) {
        const bool half = dt != DType::kF32;
        auto cast = [&](Value* v, DType to) { return half ? cast_to(b, v, to) : v; };
        auto k = [&](const Tensor& t) { return b.constant(in_dtype(t, dt)); };
        ops::Gelu gelu;
        gelu.approximate = form;
        ops::Swish swish;
        swish.alpha = 1.5f;
        Value* h =
            b.add(Op(ops::Add{}), {b.add(Op(ops::MatMul{}), {cast(in[0], dt), k(w1)}), k(b1)});
        Value* y = b.add(Op(ops::MatMul{}), {b.add(Op(gelu), {h}), k(w2)});
        b.output(cast(b.add(Op(swish), {y}), DType::kF32));
      };
    };
    std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build(DType::kF32)), "ref");
    ASSERT_NE(ref, nullptr);
    const std::vector<Tensor> want = run(*ref, inputs);
    for (const DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(form + " " + std::string(dtype_name(dt)));
      std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build(dt)), "cuda");
      ASSERT_NE(exe, nullptr);
      expect_close(want, run(*exe, inputs),
                   dt == DType::kF16    ? 1e-2f
                   : dt == DType::kBF16 ? 6e-2f
                                        : 1e-4f);
      const cuda::Program* program = cuda_program(*exe);
      ASSERT_NE(program, nullptr);
      EXPECT_EQ(program->count_steps("MatMul+Bias+Gelu"), dt == DType::kF32 ? 0 : 1);
      EXPECT_EQ(program->count_steps("Gelu"), dt == DType::kF32 ? 1 : 0);
      // In f16 and bf16 the Swish joins the Cast after it in one generated kernel.
      if (dt == DType::kF32) {
        EXPECT_EQ(program->count_steps("Swish"), 1);
      }
    }
  }
}

TEST(CudaTarget, TheBundledModelMatchesRef) {
  SKIP_WITHOUT_GPU();
  // The source tree, or the current folder where the binary runs from a copy of the repository
  // (the device machine).
  std::string path = std::string(KILN_SOURCE_DIR) + "/examples/models/tiny_cnn.onnx";
  if (!std::filesystem::exists(path)) path = "examples/models/tiny_cnn.onnx";
  auto load = [&]() -> std::shared_ptr<Graph> {
    ImportOptions options;
    options.default_dim_value = 3;  // the batch
    auto model = import_onnx_file(path, options);
    EXPECT_TRUE(model.ok()) << model.status().to_string();
    if (!model.ok()) return nullptr;
    return std::shared_ptr<Graph>(std::move((*model)->graph));
  };
  std::shared_ptr<Graph> graph = load();
  ASSERT_NE(graph, nullptr);
  std::vector<Tensor> inputs;
  uint32_t seed = 3;
  for (const Value* v : graph->inputs()) {
    inputs.push_back(random_tensor(v->tensor_type().shape(), seed++));
  }
  std::vector<Tensor> want = run(*compile_for(graph, "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(load(), "cuda");
  ASSERT_NE(exe, nullptr);
  const cuda::Program* program = cuda_program(*exe);
  ASSERT_NE(program, nullptr);
  EXPECT_GT(program->device_steps(), 0);
  expect_close(want, run(*exe, inputs), 1e-3f);
}

// relu(in0) compiled for `target`.
std::shared_ptr<Executable> relu_for(const std::vector<Tensor>& inputs, const char* target) {
  return compile_for(make_graph(inputs,
                                [](GraphBuilder& b, const std::vector<Value*>& in) {
                                  b.output(b.add(Op(ops::Relu{}), {in[0]}));
                                }),
                     target);
}

// ---- int8 (QLinearConv and the QDQ patterns around it) ----

template <class T>
Tensor random_ints(Shape shape, int lo, int hi, uint32_t seed) {
  Tensor t(std::is_same_v<T, uint8_t>  ? DType::kU8
           : std::is_same_v<T, int8_t> ? DType::kI8
                                       : DType::kI32,
           std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  for (T& v : t.span<T>()) v = static_cast<T>(dist(rng));
  return t;
}

Tensor channel_scales(int64_t n, uint32_t seed) {
  Tensor t(DType::kF32, Shape{n});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.002f, 0.01f);
  for (float& v : t.span<float>()) v = dist(rng);
  return t;
}

// Q(Conv(DQ(x), DQ(w), bias)) as QLinearConv: s8 weights [k, c, r, s] with per-channel scales,
// an int32 bias, output u8 with scale `ys` and zero point `yz` (0: the Relu's saturation).
Value* qconv(GraphBuilder& b, Value* x, float xs, uint8_t xz, int64_t k, int64_t c, int64_t r,
             int64_t stride, float ys, uint8_t yz, uint32_t seed) {
  ops::QLinearConv op;
  const int64_t pad = r / 2;
  op.pads = std::vector<int64_t>{pad, pad, pad, pad};
  op.strides = std::vector<int64_t>{stride, stride};
  return b.add(Op(op),
               {x, b.constant(Tensor::scalar(xs)), b.constant(Tensor::scalar<uint8_t>(xz)),
                b.constant(random_ints<int8_t>(Shape{k, c, r, r}, -127, 127, seed)),
                b.constant(channel_scales(k, seed + 1)), b.constant(Tensor(DType::kI8, Shape{k})),
                b.constant(Tensor::scalar(ys)), b.constant(Tensor::scalar<uint8_t>(yz)),
                b.constant(random_ints<int32_t>(Shape{k}, -2000, 2000, seed + 2))});
}

// `got` against `want` (u8 or f32 in steps of `step`): at most `worst` steps apart, at most
// `off_fraction` of the elements differing by a step or more, and not a constant output.
void expect_within_steps(const Tensor& want, const Tensor& got, double step, double worst,
                         double off_fraction = 0.01) {
  ASSERT_EQ(want.dtype(), got.dtype());
  ASSERT_EQ(want.shape(), got.shape());
  auto at = [](const Tensor& t, int64_t i) {
    return t.dtype() == DType::kU8 ? static_cast<double>(t.data<uint8_t>()[i])
                                   : static_cast<double>(t.data<float>()[i]);
  };
  int64_t off = 0;
  double max_diff = 0;
  double lo = INFINITY;
  double hi = -INFINITY;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double d = std::abs(at(want, i) - at(got, i)) / step;
    off += d >= 0.5 ? 1 : 0;
    max_diff = std::max(max_diff, d);
    lo = std::min(lo, at(want, i));
    hi = std::max(hi, at(want, i));
  }
  EXPECT_LE(max_diff, worst);
  EXPECT_LE(static_cast<double>(off), off_fraction * static_cast<double>(want.numel()))
      << off << " of " << want.numel() << " differ";
  EXPECT_GT(hi - lo, 20 * step) << "a degenerate case: the output is nearly constant";
}

TEST(CudaInt8, QLinearConvMatchesRefWithinOneStep) {
  SKIP_WITHOUT_GPU();
  // A u8 input (converted to s8 on the device), 3x3 64 -> 64 and a strided 1x1 64 -> 128, output
  // zero point 128: the tensor-core int8 convolution with per-channel requantization and bias.
  const Tensor x = random_ints<uint8_t>(Shape{2, 64, 14, 14}, 0, 127, 41);
  auto build = [](GraphBuilder& b, Value* in) {
    Value* y = qconv(b, in, 0.02f, 128, 64, 64, 3, 1, 0.25f, 128, 42);
    return qconv(b, y, 0.25f, 128, 128, 64, 1, 2, 0.5f, 128, 45);
  };
  auto [ref_exe, want] = run_one("ref", x, build);
  auto [exe, got] = run_one("cuda", x, build);
  ASSERT_NE(exe, nullptr);
  expect_within_steps(want, got, 1.0, 1.0);
  const cuda::Program* program = cuda_program(*exe);
  ASSERT_NE(program, nullptr);
  // cuDNN's or, for the 1x1, the own kernel's ("QLinearConv int8 gemm").
  EXPECT_EQ(steps_starting(*program, "QLinearConv int8"), 2) << print_graph(exe->graph());
  EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
}

TEST(CudaInt8, QuantizedStemAndMaxPoolMatchRef) {
  SKIP_WITHOUT_GPU();
  // f32 image -> Q (u8, zero point 128; centered f16 integers on the device) -> conv 7x7/2 on f16
  // tensor cores -> MaxPool between DQ and Q -> DQ -> f32.
  const Tensor x = random_tensor(Shape{2, 3, 32, 32}, 71);
  // u8 activations with zero point 128, which the centered s8 form holds exactly (other u8 zero
  // points, which it cannot, take the float path, as the differential tester's qdq patterns
  // showed).
  const float scale = 0.2f;
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    Value* image = b.add(Op(ops::QuantizeLinear{}), {in[0], b.constant(Tensor::scalar(0.0157f)),
                                                     b.constant(Tensor::scalar<uint8_t>(128))});
    Value* stem = qconv(b, image, 0.0157f, 128, 64, 3, 7, 2, scale, 128, 72);
    Value* s = b.constant(Tensor::scalar(scale));
    Value* z = b.constant(Tensor::scalar<uint8_t>(128));
    ops::MaxPool mp;
    mp.kernel_shape = std::vector<int64_t>{3, 3};
    mp.strides = std::vector<int64_t>{2, 2};
    mp.pads = std::vector<int64_t>{1, 1, 1, 1};
    Value* pooled = b.add(Op(mp), {b.add(Op(ops::DequantizeLinear{}), {stem, s, z})});
    Value* q = b.add(Op(ops::QuantizeLinear{}), {pooled, s, z});
    b.output(b.add(Op(ops::DequantizeLinear{}), {q, s, z}));
    // A 2x2/1 pool too (the kernel's runtime window; 3x3 is unrolled), after a 3x3/1
    // convolution of its own (f16, 8 channels): an int8 MaxPool needs its convolution's output
    // to have one reader.
    // Other parameters than the first QuantizeLinear's, which it would otherwise merge with.
    Value* image2 = b.add(Op(ops::QuantizeLinear{}), {in[0], b.constant(Tensor::scalar(0.0156f)),
                                                      b.constant(Tensor::scalar<uint8_t>(60))});
    Value* conv2 = qconv(b, image2, 0.0156f, 60, 64, 3, 3, 1, scale, 128, 73);
    ops::MaxPool mp2;
    mp2.kernel_shape = std::vector<int64_t>{2, 2};
    Value* pooled2 = b.add(Op(mp2), {b.add(Op(ops::DequantizeLinear{}), {conv2, s, z})});
    Value* q2 = b.add(Op(ops::QuantizeLinear{}), {pooled2, s, z});
    b.output(b.add(Op(ops::DequantizeLinear{}), {q2, s, z}));
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph({x}, build), "ref");
  ASSERT_NE(ref, nullptr);
  const std::vector<Tensor> want = run(*ref, {x});
  // On cuDNN's f16 graph (KILN_CUDA_INT8_GEMM=0) and on the own s8 kernel (=1).
  for (const char* mode : {"0", "1"}) {
    SCOPED_TRACE(fmt::format("KILN_CUDA_INT8_GEMM={}", mode));
    std::shared_ptr<Executable> exe =
        compile_cuda_with(make_graph({x}, build), "KILN_CUDA_INT8_GEMM", mode);
    ASSERT_NE(exe, nullptr);
    const std::vector<Tensor> got = run(*exe, {x});
    expect_within_steps(want[0], got[0], scale, 1.0);
    expect_within_steps(want[1], got[1], scale, 1.0);
    const cuda::Program* program = cuda_program(*exe);
    ASSERT_NE(program, nullptr);
    const std::string ir = print_graph(exe->graph());
    const bool own = std::string_view(mode) == "1";
    // Stride 2 on an even image: space-to-depth (16 channels of 2x2 blocks, a 4x4 stride-1
    // filter), quantized straight to s8 for the own kernel (no conversion step), to f16 integers
    // for cuDNN.
    EXPECT_EQ(program->count_steps("QuantizeLinear f16 s2d"), own ? 0 : 1) << ir;
    EXPECT_EQ(program->count_steps("QuantizeLinear s2d int8"), own ? 1 : 0) << ir;
    EXPECT_EQ(program->count_steps("QLinearConv f16 int8"), own ? 1 : 2) << ir;
    EXPECT_EQ(program->count_steps("QLinearConv stem int8 gemm"), own ? 1 : 0) << ir;
    EXPECT_EQ(program->count_steps("MaxPool int8"), 2) << ir;
    EXPECT_EQ(program->count_steps("DequantizeLinear"), 2) << ir;
  }
}

TEST(CudaInt8, FirstConvolutionOnF16TensorCoresMatchesRefWithinOneStep) {
  SKIP_WITHOUT_GPU();
  // A one-channel image (the digit classifier's) of odd size -> Q (u8, zero point 100) -> conv
  // 3x3/1 1 -> 32 with outputs on both sides of the zero point 128 -> a u8 graph output: the f16
  // input (8 channels) and filter hold the centered integers, so the f32 sums are the s8 kernels'
  // exactly.
  const Tensor x = random_tensor(Shape{3, 1, 17, 19}, 81);
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    Value* image = b.add(Op(ops::QuantizeLinear{}), {in[0], b.constant(Tensor::scalar(0.008f)),
                                                     b.constant(Tensor::scalar<uint8_t>(100))});
    b.output(qconv(b, image, 0.008f, 100, 32, 1, 3, 1, 0.05f, 128, 82));
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph({x}, build), "ref");
  std::shared_ptr<Executable> exe = compile_for(make_graph({x}, build), "cuda");
  ASSERT_NE(exe, nullptr);
  expect_within_steps(run(*ref, {x})[0], run(*exe, {x})[0], 1.0, 1.0);
  const cuda::Program* program = cuda_program(*exe);
  ASSERT_NE(program, nullptr);
  const std::string ir = print_graph(exe->graph());
  EXPECT_EQ(program->count_steps("QuantizeLinear f16"), 1) << ir;
  EXPECT_EQ(program->count_steps("QLinearConv f16 int8"), 1) << ir;
  EXPECT_EQ(program->count_steps("Uncenter int8"), 1) << ir;
  EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
}

TEST(CudaInt8, DequantizeAndGlobalAveragePoolRunAsOneMeanOfTheBytes) {
  SKIP_WITHOUT_GPU();
  // u8 [3, 64, 7, 7] with zero point 37 -> DequantizeLinear -> GlobalAveragePool -> f32: the mean
  // of the centered bytes, scaled once (ResNet's head). Values up to zero point + 127, which the
  // centered s8 data holds exactly (above, they saturate: "On the GPU" in docs/quantization.md).
  const Tensor x = random_ints<uint8_t>(Shape{3, 64, 7, 7}, 0, 37 + 127, 91);
  auto build = [](GraphBuilder& b, Value* in) {
    Value* dq = b.add(Op(ops::DequantizeLinear{}), {in, b.constant(Tensor::scalar(0.043f)),
                                                    b.constant(Tensor::scalar<uint8_t>(37))});
    return b.add(Op(ops::GlobalAveragePool{}), {dq});
  };
  auto [ref_exe, want] = run_one("ref", x, build);
  auto [exe, got] = run_one("cuda", x, build);
  ASSERT_NE(exe, nullptr);
  expect_close({want}, {got}, 1e-5f);
  const cuda::Program* program = cuda_program(*exe);
  ASSERT_NE(program, nullptr);
  EXPECT_EQ(program->count_steps("DequantizeLinear+GlobalAveragePool int8"), 1);
  EXPECT_EQ(program->count_steps("Center int8"), 1);
  EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
}

TEST(CudaInt8, QdqResidualBlockRunsOnInt8KernelsAndMatchesRef) {
  SKIP_WITHOUT_GPU();
  // ResNet's stem and a bottleneck as PyTorch's FX quantization exports them (QDQ around every
  // op): f32 image -> Q -> conv 7x7/2 (3 channels, f16) -> MaxPool between DQ/Q ->
  // 1x1 -> 3x3 -> 1x1 whose DQ meets the identity's in Add -> Relu -> Q -> DQ -> f32.
  const Tensor x = random_tensor(Shape{2, 3, 32, 32}, 51);
  // Scales from the range of each layer's values (random weights; checked with a float model of
  // the same distributions); u8 activations with zero point 128, which centered s8 holds exactly.
  const float out_scale = 12.0f;
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    auto q = [&](Value* v, float s, uint8_t z) {
      return b.add(Op(ops::QuantizeLinear{}),
                   {v, b.constant(Tensor::scalar(s)), b.constant(Tensor::scalar<uint8_t>(z))});
    };
    auto dq = [&](Value* v, float s, uint8_t z) {
      return b.add(Op(ops::DequantizeLinear{}),
                   {v, b.constant(Tensor::scalar(s)), b.constant(Tensor::scalar<uint8_t>(z))});
    };
    Value* image = q(in[0], 0.0157f, 128);
    Value* stem = qconv(b, image, 0.0157f, 128, 64, 3, 7, 2, 0.2f, 128, 52);
    ops::MaxPool mp;
    mp.kernel_shape = std::vector<int64_t>{3, 3};
    mp.strides = std::vector<int64_t>{2, 2};
    mp.pads = std::vector<int64_t>{1, 1, 1, 1};
    Value* pooled = q(b.add(Op(mp), {dq(stem, 0.2f, 128)}), 0.2f, 128);
    Value* a = qconv(b, pooled, 0.2f, 128, 32, 64, 1, 1, 1.2f, 128, 55);
    Value* c = qconv(b, a, 1.2f, 128, 32, 32, 3, 1, 6.0f, 128, 58);
    Value* e = qconv(b, c, 6.0f, 128, 64, 32, 1, 1, 12.0f, 128, 61);
    Value* sum = b.add(Op(ops::Add{}), {dq(e, 12.0f, 128), dq(pooled, 0.2f, 128)});
    b.output(dq(q(b.add(Op(ops::Relu{}), {sum}), out_scale, 128), out_scale, 128));
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph({x}, build), "ref");
  std::shared_ptr<Executable> exe = compile_for(make_graph({x}, build), "cuda");
  ASSERT_NE(exe, nullptr);
  // Fused into the last convolution, the residual add rounds once where ref rounds twice (the
  // conv's output first): results a step apart are common, two at most.
  expect_within_steps(run(*ref, {x})[0], run(*exe, {x})[0], out_scale, 2.0, 0.5);
  const cuda::Program* program = cuda_program(*exe);
  ASSERT_NE(program, nullptr);
  const std::string ir = print_graph(exe->graph());
  // The stem's input quantized to s8 for the own kernel, to f16 integers for cuDNN.
  const int own_stem = program->count_steps("QLinearConv stem int8 gemm");
  EXPECT_EQ(program->count_steps("QuantizeLinear s2d int8"), own_stem) << ir;
  EXPECT_EQ(program->count_steps("QuantizeLinear f16 s2d"), 1 - own_stem) << ir;
  // The Add runs in the last convolution where a cuDNN engine takes the fused graph, else as
  // its own int8 step; each 1x1 on cuDNN or the own kernel ("... gemm").
  const int fused = steps_starting(*program, "QLinearConv+Add+Relu int8");
  EXPECT_EQ(fused + program->count_steps("Add+Relu int8"), 1) << ir;
  // The stem on cuDNN's f16 graph or the own s8 kernel, whichever tuning measured faster.
  EXPECT_EQ(program->count_steps("QLinearConv f16 int8") +
                program->count_steps("QLinearConv stem int8 gemm"),
            1)
      << ir;
  EXPECT_EQ(steps_starting(*program, "QLinearConv int8"), 3 - fused) << ir;
  EXPECT_EQ(program->count_steps("MaxPool int8"), 1) << ir;
  EXPECT_EQ(program->count_steps("DequantizeLinear"), 1) << ir;
  EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
}

TEST(CudaTarget, HostTargetsSayTheyTakeNoDeviceArguments) {
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 3}, 70)};
  std::shared_ptr<Executable> exe = relu_for(inputs, "ref");
  ASSERT_NE(exe, nullptr);
  const Status s = exe->run_device({nullptr}, {nullptr});
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("runs on host memory"), std::string::npos) << s.to_string();
}

TEST(CudaTarget, DeviceResidentArgumentsGiveWhatHostTensorsGive) {
  SKIP_WITHOUT_GPU();
  const Tensor w = random_tensor(Shape{4, 3, 3, 3}, 71);
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 3, 8, 8}, 72),
                                      random_tensor(Shape{2, 4, 8, 8}, 73)};
  std::shared_ptr<Executable> exe = compile_for(
      make_graph(inputs,
                 [&](GraphBuilder& b, const std::vector<Value*>& in) {
                   ops::Conv op;
                   op.pads = std::vector<int64_t>{1, 1, 1, 1};
                   Value* y = b.add(Op(op), {in[0], b.constant(w, "w")});
                   b.output(b.add(Op(ops::Relu{}), {b.add(Op(ops::Add{}), {y, in[1]})}));
                   b.output(b.add(Op(ops::Sigmoid{}), {in[1]}));
                 }),
      "cuda");
  ASSERT_NE(exe, nullptr);
  const std::vector<Tensor> want = run(*exe, inputs);
  ASSERT_EQ(want.size(), 2u);
  std::vector<std::shared_ptr<void>> memory;
  std::vector<const void*> in;
  std::vector<void*> out;
  for (const Tensor& t : inputs) {
    auto p = gpu_alloc(t.nbytes());
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    ASSERT_TRUE(gpu_upload(p->get(), t.raw_data(), t.nbytes()).ok());
    in.push_back(p->get());
    memory.push_back(*p);
  }
  for (const Tensor& t : want) {
    auto p = gpu_alloc(t.nbytes());
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    out.push_back(p->get());
    memory.push_back(*p);
  }
  for (int round = 0; round < 3; ++round) {  // the first run captures the CUDA graph
    for (size_t i = 0; i < want.size(); ++i) {
      const std::vector<uint8_t> poison(want[i].nbytes(), 0xff);
      ASSERT_TRUE(gpu_upload(out[i], poison.data(), poison.size()).ok());
    }
    const Status ran = exe->run_device(in, out);
    ASSERT_TRUE(ran.ok()) << ran.to_string();
    for (size_t i = 0; i < want.size(); ++i) {
      Tensor got(want[i].dtype(), want[i].shape());
      ASSERT_TRUE(gpu_download(got.raw_data(), out[i], got.nbytes()).ok());
      expect_close({want[i]}, {got}, 0.0f);
    }
  }
  EXPECT_EQ(exe->run_device(in, {out[0]}).code(), StatusCode::kInvalidArgument);
}

// The element offsets a view reads, in row-major order of its dims.
std::vector<int64_t> offsets_of(const cuda::StridedView& v) {
  int64_t n = 1;
  for (int64_t d : v.dims) n *= d;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, at = v.offset;
    for (size_t d = v.dims.size(); d-- > 0;) {
      at += (rest % v.dims[d]) * v.strides[d];
      rest /= v.dims[d];
    }
    out.push_back(at);
  }
  return out;
}

// Runs without a GPU. Attention's head split (a Split/Slice view of the QKV projection, reshaped
// to heads, transposed) folds into one strided view; reshapes that need a copy are refused.
TEST(CudaViews, ReshapeAndPermuteReadTheSameElements) {
  // BERT's q: [B, S, 2304] sliced to [B, S, 768] at 768, heads [B, S, 12, 64], then (0, 2, 1, 3).
  const int64_t batch = 2, seq = 5;
  cuda::StridedView q{{batch, seq, 768}, {seq * 2304, 2304, 1}, 768};
  std::optional<cuda::StridedView> heads = cuda::reshape_view(q, {batch, seq, 12, 64});
  ASSERT_TRUE(heads.has_value());
  EXPECT_EQ(offsets_of(*heads), offsets_of(q)) << "a reshape reads the same elements in order";
  const cuda::StridedView t = cuda::permute_view(*heads, {0, 2, 1, 3});
  EXPECT_EQ(t.dims, (std::vector<int64_t>{batch, 12, seq, 64}));
  EXPECT_EQ(t.strides, (std::vector<int64_t>{seq * 2304, 64, 2304, 1}));
  // Element (b, h, s, d) of the transposed heads is q[b, s, h * 64 + d].
  EXPECT_EQ(offsets_of(t)[((1 * 12 + 3) * seq + 4) * 64 + 7],
            768 + 1 * seq * 2304 + 4 * 2304 + 3 * 64 + 7);
  // Random views and shapes: a reshape that succeeds reads the same elements in the same order;
  // merging dims of a non-contiguous view is refused.
  std::mt19937 rng(7);
  int folded = 0, refused = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int64_t> dims;
    const int rank = 1 + static_cast<int>(rng() % 4);
    for (int d = 0; d < rank; ++d) dims.push_back(1 + static_cast<int64_t>(rng() % 4));
    // A permuted plain layout, or one sliced along a dim.
    std::vector<int64_t> plain(dims.size());
    int64_t stride = 1;
    for (size_t d = dims.size(); d-- > 0;) {
      plain[d] = stride;
      stride *= dims[d] + (trial % 3 == 0 ? 1 : 0);  // every third: padded rows (a slice)
    }
    std::vector<int64_t> perm(dims.size());
    std::iota(perm.begin(), perm.end(), 0);
    if (trial % 2 == 0) std::shuffle(perm.begin(), perm.end(), rng);
    const cuda::StridedView v = cuda::permute_view(cuda::StridedView{dims, plain, 3}, perm);
    // A random factorization of the element count into a new shape.
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<int64_t> shape;
    for (int64_t left = n; left > 1;) {
      int64_t f = 1 + static_cast<int64_t>(rng() % static_cast<uint32_t>(left));
      while (left % f != 0) --f;
      shape.push_back(f);
      left /= f;
      if (f == 1) shape.push_back(1);
    }
    if (shape.empty()) shape.push_back(1);
    std::optional<cuda::StridedView> r = cuda::reshape_view(v, shape);
    if (r) {
      EXPECT_EQ(offsets_of(*r), offsets_of(v)) << "trial " << trial;
      ++folded;
    } else {
      ++refused;
    }
  }
  EXPECT_GT(folded, 50);
  EXPECT_GT(refused, 10);
  EXPECT_FALSE(cuda::reshape_view(cuda::StridedView{{2, 3}, {1, 2}, 0}, {6}).has_value())
      << "a transposed [2, 3] cannot be flattened without a copy";
}

TEST(CudaTuning, EncodesAndDecodesAndRejectsDamage) {
  cuda::Tuning t;
  t.fingerprint = "GPU X; sm_90";
  t.choices["conv a"] = {1, 2, 3};
  t.choices["matmul b"] = std::vector<uint8_t>(64, 7);
  const std::vector<uint8_t> bytes = t.encode();
  auto back = cuda::Tuning::decode(bytes);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->fingerprint, t.fingerprint);
  EXPECT_EQ(back->choices, t.choices);
  for (size_t cut : {size_t{0}, size_t{3}, size_t{9}, bytes.size() - 1}) {
    auto bad = cuda::Tuning::decode(std::span<const uint8_t>(bytes.data(), cut));
    EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss) << cut;
  }
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_EQ(cuda::Tuning::decode(longer).status().code(), StatusCode::kDataLoss);
}

// A conv + Gemm graph: two tuned problems.
std::shared_ptr<Graph> tuned_graph(const std::vector<Tensor>& inputs) {
  const Tensor w = random_tensor(Shape{8, 3, 3, 3}, 80);
  const Tensor fc = random_tensor(Shape{8, 5}, 81);
  return make_graph(inputs, [&](GraphBuilder& b, const std::vector<Value*>& in) {
    ops::Conv op;
    op.pads = std::vector<int64_t>{1, 1, 1, 1};
    Value* y = b.add(Op(ops::Relu{}), {b.add(Op(op), {in[0], b.constant(w, "w")})});
    Value* g = b.add(Op(ops::Flatten{}), {b.add(Op(ops::GlobalAveragePool{}), {y})});
    b.output(b.add(Op(ops::Gemm{}), {g, b.constant(fc, "fc")}));
  });
}

// ---- the own int8 1x1 kernel (int8_gemm.h) ----

// Device copies of host bytes, freed on scope exit.
struct DeviceBytes {
  DeviceBytes() = default;
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  ~DeviceBytes() {
    for (void* p : blocks) cudaFree(p);
  }
  template <class T>
  void* copy(const std::vector<T>& host) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(host.size() * sizeof(T), 1)), cudaSuccess);
    blocks.push_back(p);
    cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
    return p;
  }
  std::vector<void*> blocks;
};

template <class T>
std::vector<T> random_values(size_t n, T lo, T hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<T> dist(lo, hi);
    for (T& x : v) x = dist(rng);
  } else {
    std::uniform_int_distribution<int> dist(lo, hi);
    for (T& x : v) x = static_cast<T>(dist(rng));
  }
  return v;
}

// The kernel's result on the host: the s32 sums, then its epilogue in f32 steps rounded to
// nearest (volatile: no contraction into fused multiply-adds).
std::vector<int8_t> int8_gemm_on_host(const cuda::Int8Gemm& p, const std::vector<int8_t>& x,
                                      const std::vector<int8_t>& w, const std::vector<float>& scale,
                                      const std::vector<float>& bias,
                                      const std::vector<int8_t>& z) {
  std::vector<int8_t> y(static_cast<size_t>(p.n * p.oh * p.ow * p.k));
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t i = 0; i < p.oh; ++i) {
      for (int64_t j = 0; j < p.ow; ++j) {
        const size_t at = static_cast<size_t>(((n * p.oh + i) * p.ow + j) * p.k);
        for (int64_t k = 0; k < p.k; ++k) {
          int32_t acc = 0;
          for (int64_t ty = 0; ty < p.r; ++ty) {
            for (int64_t tx = 0; tx < p.s; ++tx) {
              const int64_t iy = i * p.stride - p.ph + ty;
              const int64_t ix = j * p.stride - p.pw + tx;
              if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
              const int8_t* in = &x[static_cast<size_t>(((n * p.h + iy) * p.w + ix) * p.c)];
              const int8_t* f = &w[static_cast<size_t>(((k * p.r + ty) * p.s + tx) * p.c)];
              for (int64_t c = 0; c < p.c; ++c) acc += in[c] * f[c];
            }
          }
          volatile float v = static_cast<float>(acc) * scale[static_cast<size_t>(k)];
          v = v + bias[static_cast<size_t>(k)];
          if (p.residual) {
            v = v + static_cast<float>(z[at + static_cast<size_t>(k)]);
            v = v * p.rescale;
          }
          const float clamped = std::min(std::max(static_cast<float>(v), static_cast<float>(p.lo)),
                                         static_cast<float>(p.hi));
          y[at + static_cast<size_t>(k)] = static_cast<int8_t>(std::nearbyint(clamped));
        }
      }
    }
  }
  return y;
}

TEST(CudaInt8, OwnGemmMatchesTheHostForEveryTileConfiguration) {
  SKIP_WITHOUT_GPU();
  // 1x1 and 3x3 (pads 1) on 80 input channels (a partial 64-byte reduction step), 4x4 (pads 2)
  // on 16 (the space-to-depth stem's: several taps in one step); stride 1 and 2 (odd input size:
  // the last row and column unread by a strided 1x1), with and without a residual, a negative
  // lower clamp and a ReLU's; 48 output channels and pixel counts that fill no tile.
  for (const int64_t window : {1, 3, 4}) {
    for (const int stride : {1, 2}) {
      for (const bool residual : {false, true}) {
        SCOPED_TRACE(fmt::format("{}x{} stride {} residual {}", window, window, stride, residual));
        cuda::Int8Gemm p;
        p.n = 3;
        p.h = 13;
        p.w = 11;
        p.c = window == 4 ? 16 : 80;
        p.k = 48;
        p.r = p.s = window;
        p.ph = p.pw = window / 2;  // 4x4: pads 2 before, 1 after
        p.stride = stride;
        p.oh = (p.h + 2 * p.ph - (window == 4 ? 1 : 0) - p.r) / stride + 1;
        p.ow = (p.w + 2 * p.pw - (window == 4 ? 1 : 0) - p.s) / stride + 1;
        p.residual = residual;
        p.rescale = 0.75f;
        p.lo = residual ? 0 : -100;
        p.hi = 120;
        ASSERT_TRUE(cuda::int8_gemm_supported(p));
        const auto x = random_values<int8_t>(static_cast<size_t>(p.n * p.h * p.w * p.c), -128, 127,
                                             11 + stride);
        const auto w =
            random_values<int8_t>(static_cast<size_t>(p.k * p.r * p.s * p.c), -127, 127, 12);
        // Sums of 80 products spread about 5e4 (more for longer windows, as the square root):
        // scales that spread them over s8.
        const float spread = std::sqrt(80.0f / static_cast<float>(p.r * p.s * p.c));
        const auto scale =
            random_values<float>(static_cast<size_t>(p.k), 1e-4f * spread, 8e-4f * spread, 13);
        const auto bias = random_values<float>(static_cast<size_t>(p.k), -20.0f, 20.0f, 14);
        const auto z =
            random_values<int8_t>(static_cast<size_t>(p.n * p.oh * p.ow * p.k), -128, 127, 15);
        const std::vector<int8_t> want = int8_gemm_on_host(p, x, w, scale, bias, z);
        int lo = 127, hi = -128;
        for (int8_t v : want) lo = std::min<int>(lo, v), hi = std::max<int>(hi, v);
        EXPECT_LT(lo, residual ? 1 : -50) << "a degenerate case";
        EXPECT_GT(hi, 60) << "a degenerate case";
        DeviceBytes d;
        void* xd = d.copy(x);
        void* wd = d.copy(w);
        void* sd = d.copy(scale);
        void* bd = d.copy(bias);
        void* zd = d.copy(z);
        void* yd = d.copy(std::vector<int8_t>(want.size(), 0x55));
        for (int config = 0; config < cuda::int8_gemm_configs(); ++config) {
          SCOPED_TRACE(cuda::int8_gemm_config_name(config));
          cudaMemset(yd, 0x55, want.size());
          Status st = cuda::launch_int8_gemm(config, p, xd, wd, static_cast<const float*>(sd),
                                             static_cast<const float*>(bd), zd, yd, nullptr);
          ASSERT_TRUE(st.ok()) << st.to_string();
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          std::vector<int8_t> got(want.size());
          cudaMemcpy(got.data(), yd, got.size(), cudaMemcpyDeviceToHost);
          int64_t off = 0;
          for (size_t i = 0; i < got.size(); ++i) off += got[i] != want[i] ? 1 : 0;
          EXPECT_EQ(off, 0) << off << " of " << got.size() << " differ";
        }
      }
    }
  }
}

TEST(CudaInt8, DenseF16QuantizeMatchesTheHost) {
  SKIP_WITHOUT_GPU();
  // launch_quantize8 from f16 where x and y share one dense layout (the 8-a-thread path: the
  // `Round f16 int8` step after an f16-output stem), with halves (ties to even), values beyond the
  // bounds, u8 and s8 outputs; against the host formula clamp(rint(x / scale) + off, lo, hi).
  const int64_t n = 3, c = 16, pixels = 35;  // 1680 elements: 210 groups of 8
  std::vector<uint16_t> bits(static_cast<size_t>(n * c * pixels));
  std::vector<float> values(bits.size());
  std::mt19937 rng(171);
  std::uniform_int_distribution<int> halves(-400, 400);
  for (size_t i = 0; i < bits.size(); ++i) {
    bits[i] = Half(static_cast<float>(halves(rng)) * 0.5f).bits;
    values[i] = static_cast<float>(Half::from_bits(bits[i]));
  }
  cuda::Int8Layout l;
  l.n = n;
  l.c = c;
  l.s = pixels;
  l.stored_c = c;
  l.nhwc = true;
  DeviceBytes d;
  void* xd = d.copy(bits);
  void* yd = d.copy(std::vector<uint8_t>(bits.size(), 0x55));
  struct Case {
    bool u8;
    float scale;
    int32_t off, lo, hi;
  };
  for (const Case k : {Case{false, 1.0f, 0, -128, 127}, Case{true, 0.5f, 100, 0, 255},
                       Case{false, 2.0f, -3, -100, 90}}) {
    SCOPED_TRACE(fmt::format("u8 {} scale {} off {}", k.u8, k.scale, k.off));
    Status st = cuda::launch_quantize8(cuda::Elem::kF16, xd, l, yd, l, k.u8, k.scale, k.off, k.lo,
                                       k.hi, nullptr);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint8_t> got(bits.size());
    cudaMemcpy(got.data(), yd, got.size(), cudaMemcpyDeviceToHost);
    int64_t off = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const float q =
          std::min(std::max(std::nearbyint(values[i] / k.scale) + k.off, static_cast<float>(k.lo)),
                   static_cast<float>(k.hi));
      const int want = static_cast<int>(q);
      const int have = k.u8 ? got[i] : static_cast<int8_t>(got[i]);
      off += want != have ? 1 : 0;
    }
    EXPECT_EQ(off, 0) << off << " of " << got.size() << " differ";
  }
}

TEST(CudaInt8, OwnGemmRejectsWhatItDoesNotTake) {
  cuda::Int8Gemm p;
  p.n = 2, p.h = 8, p.w = 8, p.c = 64, p.k = 64, p.oh = 8, p.ow = 8;
  EXPECT_TRUE(cuda::int8_gemm_supported(p));
  cuda::Int8Gemm odd = p;
  odd.c = 36;  // channels padded to a multiple of 4 only: cuDNN runs it
  EXPECT_FALSE(cuda::int8_gemm_supported(odd));
  odd = p;
  odd.k = 40;
  EXPECT_FALSE(cuda::int8_gemm_supported(odd));
  odd = p;
  odd.stride = 3;
  odd.oh = odd.ow = 3;
  EXPECT_FALSE(cuda::int8_gemm_supported(odd));
  odd = p;
  odd.r = odd.s = 3;
  odd.ph = 3;  // a leading pad as large as the window
  EXPECT_FALSE(cuda::int8_gemm_supported(odd));
  // The launch says why.
  odd = p;
  odd.c = 36;
  Status st =
      cuda::launch_int8_gemm(0, odd, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.to_string().find("multiples of 16"), std::string::npos) << st.to_string();
  st = cuda::launch_int8_gemm(cuda::int8_gemm_configs(), p, nullptr, nullptr, nullptr, nullptr,
                              nullptr, nullptr, nullptr);
  EXPECT_NE(st.to_string().find("no tile configuration"), std::string::npos) << st.to_string();
}

TEST(CudaInt8, PointwiseConvolutionsOnTheOwnKernelMatchCudnnAndRef) {
  SKIP_WITHOUT_GPU();
  // 1x1 64 -> 128 (output zero point 128: a negative lower clamp), a strided 1x1 128 -> 64, and a
  // 1x1 64 -> 64 whose DQ meets the strided one's in Add -> Relu -> Q (the residual fused), then
  // DQ -> f32; with KILN_CUDA_INT8_GEMM=1 (the own kernel) and =0 (cuDNN).
  const Tensor x = random_ints<uint8_t>(Shape{2, 64, 14, 14}, 0, 127, 141);
  // Scales from each layer's spread (random weights); u8 activations with zero point 128, which
  // centered s8 holds exactly.
  const float out_scale = 6.0f;
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    auto dq = [&](Value* v, float s, uint8_t z) {
      return b.add(Op(ops::DequantizeLinear{}),
                   {v, b.constant(Tensor::scalar(s)), b.constant(Tensor::scalar<uint8_t>(z))});
    };
    Value* a = qconv(b, in[0], 0.02f, 128, 128, 64, 1, 1, 0.25f, 128, 142);
    Value* s2 = qconv(b, a, 0.25f, 128, 64, 128, 1, 2, 2.0f, 128, 145);
    Value* e = qconv(b, s2, 2.0f, 128, 64, 64, 1, 1, 4.0f, 128, 148);
    Value* sum = b.add(Op(ops::Add{}), {dq(e, 4.0f, 128), dq(s2, 2.0f, 128)});
    Value* q = b.add(Op(ops::QuantizeLinear{}),
                     {b.add(Op(ops::Relu{}), {sum}), b.constant(Tensor::scalar(out_scale)),
                      b.constant(Tensor::scalar<uint8_t>(128))});
    b.output(dq(q, out_scale, 128));
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph({x}, build), "ref");
  ASSERT_NE(ref, nullptr);
  const Tensor want = run(*ref, {x})[0];
  std::map<std::string, Tensor> got;
  for (const char* mode : {"1", "0"}) {
    SCOPED_TRACE(fmt::format("KILN_CUDA_INT8_GEMM={}", mode));
    std::shared_ptr<Executable> exe =
        compile_cuda_with(make_graph({x}, build), "KILN_CUDA_INT8_GEMM", mode);
    ASSERT_NE(exe, nullptr);
    got[mode] = run(*exe, {x})[0];
    // As in QdqResidualBlockRunsOnInt8KernelsAndMatchesRef: the fused residual rounds once.
    expect_within_steps(want, got[mode], out_scale, 2.0, 0.5);
    const cuda::Program* program = cuda_program(*exe);
    ASSERT_NE(program, nullptr);
    const std::string ir = print_graph(exe->graph());
    const bool own = std::string_view(mode) == "1";
    EXPECT_EQ(program->count_steps("QLinearConv int8 gemm"), own ? 2 : 0) << ir;
    EXPECT_EQ(program->count_steps("QLinearConv+Add+Relu int8 gemm"), own ? 1 : 0) << ir;
    EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
  }
  // The same epilogue as cuDNN's graph: equal but where cuDNN clamps no negative lower bound (the
  // first convolution's; a value below it stays unclipped there) or rounds a tie differently.
  expect_within_steps(got["0"], got["1"], out_scale, 1.0, 0.05);
}

// The bytes of the executable's one artifact section, its tuning.
std::vector<uint8_t> tuning_bytes(const Executable& exe) {
  const std::vector<TargetSection> sections = exe.artifact_sections();
  EXPECT_EQ(sections.size(), 1u);
  std::vector<uint8_t> bytes;
  if (sections.empty()) return bytes;
  EXPECT_EQ(sections[0].name, cuda::kTuningSection);
  for (std::span<const uint8_t> piece : sections[0].pieces) {
    bytes.insert(bytes.end(), piece.begin(), piece.end());
  }
  return bytes;
}

TEST(CudaTarget, ArtifactsKeepTheTuningAndLoadingReusesItOnTheSameGpu) {
  SKIP_WITHOUT_GPU();
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 3, 12, 12}, 82)};
  std::shared_ptr<Executable> exe = compile_for(tuned_graph(inputs), "cuda");
  ASSERT_NE(exe, nullptr);
  const std::vector<uint8_t> data = tuning_bytes(*exe);
  auto tuning = cuda::Tuning::decode(data);
  ASSERT_TRUE(tuning.ok()) << tuning.status().to_string();
  EXPECT_EQ(tuning->fingerprint, cuda::gpu_fingerprint());
  EXPECT_EQ(tuning->choices.size(), 2u);  // the convolution and the Gemm

  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("kiln_cuda_tuning_" + std::to_string(::getpid()));
  ArtifactSource source;
  source.name = "tuned.onnx";
  ASSERT_TRUE(save_artifact(file.string(), *exe, {}, source).ok());
  auto loaded = load_artifact(file.string());
  std::filesystem::remove(file);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  // The same choices, taken from the file: nothing measured again, the same results.
  EXPECT_EQ(tuning_bytes(*loaded->executable), data);
  expect_close(run(*exe, inputs), run(*loaded->executable, inputs), 0.0f);

  // Tuning from another GPU (or library version) is measured again, not trusted.
  cuda::Tuning other = *tuning;
  other.fingerprint = "another GPU";
  for (auto& [key, value] : other.choices) std::fill(value.begin(), value.end(), 0xff);
  auto target = make_target("cuda");
  ASSERT_TRUE(target.ok());
  const std::vector<uint8_t> other_bytes = other.encode();
  auto stored = std::make_shared<LoadedSections>();
  stored->sections.emplace_back(cuda::kTuningSection, other_bytes);
  CompileOptions options;
  options.loaded = stored;
  auto retuned = compile(tuned_graph(inputs), **target, options);
  ASSERT_TRUE(retuned.ok()) << retuned.status().to_string();
  auto retuned_tuning = cuda::Tuning::decode(tuning_bytes(**retuned));
  ASSERT_TRUE(retuned_tuning.ok());
  EXPECT_EQ(retuned_tuning->fingerprint, cuda::gpu_fingerprint());
  std::shared_ptr<Executable> ref = compile_for(tuned_graph(inputs), "ref");
  expect_close(run(*ref, inputs), run(**retuned, inputs));
}

TEST(CudaTarget, ConcurrentRunsGiveEachCallerItsOwnResult) {
  SKIP_WITHOUT_GPU();
  const Tensor w = random_tensor(Shape{8, 3, 3, 3}, 50);
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    ops::Conv op;
    op.pads = std::vector<int64_t>{1, 1, 1, 1};
    Value* y = b.add(Op(ops::Relu{}), {b.add(Op(op), {in[0], b.constant(w, "w")})});
    b.output(b.add(Op(ops::GlobalAveragePool{}), {y}));
  };
  const std::vector<Tensor> shape_only = {random_tensor(Shape{2, 3, 16, 16}, 0)};
  std::shared_ptr<Executable> ref = compile_for(make_graph(shape_only, build), "ref");
  std::shared_ptr<Executable> exe = compile_for(make_graph(shape_only, build), "cuda");
  ASSERT_NE(exe, nullptr);
  constexpr int kThreads = 4;
  std::vector<std::vector<Tensor>> inputs(kThreads);
  std::vector<std::vector<Tensor>> want(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    inputs[t] = {random_tensor(Shape{2, 3, 16, 16}, 100 + static_cast<uint32_t>(t))};
    want[t] = run(*ref, inputs[t]);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 10; ++r) expect_close(want[t], run(*exe, inputs[t]));
    });
  }
  for (std::thread& t : threads) t.join();
}

TEST(CudaTarget, WrongInputShapeIsAClearError) {
  SKIP_WITHOUT_GPU();
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 3}, 1)};
  std::shared_ptr<Executable> exe = relu_for(inputs, "cuda");
  ASSERT_NE(exe, nullptr);
  std::vector<Argument> args;
  args.emplace_back(random_tensor(Shape{3, 3}, 2));
  auto out = exe->run(std::move(args));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("in0"), std::string::npos) << out.status().to_string();
}

}  // namespace
}  // namespace kiln::compiler
