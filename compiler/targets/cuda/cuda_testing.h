// SPDX-License-Identifier: Apache-2.0
// What the cuda target's tests share: random inputs (fixed seeds), graphs built here, compiling
// for a target, running, comparing with ref, and the GPU check every case starts with (each skips
// where no GPU is present, as on CI).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/ir/builder.h"
#include "compiler/ops/all_ops.h"
#include "compiler/targets/cuda/builder.h"
#include "compiler/targets/cuda/cuda_target.h"
#include "core/gpu.h"
#include "core/half.h"
#include "core/testing/scoped_env.h"

namespace kiln::compiler {

inline bool have_gpu() {
  return !list_gpus().empty();
}

#define SKIP_WITHOUT_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no GPU on this machine"

inline Tensor random_tensor(Shape shape, uint32_t seed) {
  Tensor t(DType::kF32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : t.span<float>()) v = dist(rng);
  return t;
}

// random_tensor's values times `by`.
inline Tensor scaled_random(Shape shape, uint32_t seed, float by) {
  Tensor t = random_tensor(std::move(shape), seed);
  for (float& v : t.span<float>()) v *= by;
  return t;
}

using BuildFn = std::function<void(GraphBuilder&, const std::vector<Value*>&)>;

inline std::shared_ptr<Graph> make_graph(const std::vector<Tensor>& inputs, const BuildFn& build) {
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

inline std::shared_ptr<Executable> compile_for(std::shared_ptr<Graph> graph, const char* name) {
  auto target = make_target(name);
  EXPECT_TRUE(target.ok()) << target.status().to_string();
  if (!target.ok()) return nullptr;
  auto exe = compile(std::move(graph), **target);
  EXPECT_TRUE(exe.ok()) << exe.status().to_string();
  return exe.ok() ? *exe : nullptr;
}

// `graph` compiled for cuda with the environment variable `flag` set to `value` while it compiles
// (a KILN_CUDA_* choice made at lowering).
inline std::shared_ptr<Executable> compile_cuda_with(std::shared_ptr<Graph> graph, const char* flag,
                                                     const char* value) {
  test::ScopedEnv env(flag, value);
  return compile_for(std::move(graph), "cuda");
}

inline std::vector<Tensor> run(const Executable& exe, const std::vector<Tensor>& inputs) {
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

inline void expect_close(const std::vector<Tensor>& want, const std::vector<Tensor>& got,
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
inline std::pair<std::shared_ptr<Executable>, Tensor> run_one(
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
inline std::pair<int, int> expect_cuda_matches_ref(const std::vector<Tensor>& inputs,
                                                   const BuildFn& build, float tolerance = 1e-4f) {
  std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build), "ref");
  std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build), "cuda");
  if (ref == nullptr || exe == nullptr) return {-1, -1};
  expect_close(run(*ref, inputs), run(*exe, inputs), tolerance);
  const cuda::Program* program = cuda_program(*exe);
  EXPECT_NE(program, nullptr);
  if (program == nullptr) return {-1, -1};
  return {program->device_steps(), static_cast<int>(program->steps().size())};
}

// `t` in `dtype` (f32, f16 or bf16), rounded to nearest even.
inline Tensor in_dtype(const Tensor& t, DType dtype) {
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
inline Value* cast_to(GraphBuilder& b, Value* v, DType to) {
  ops::Cast c;
  c.to = to;
  return b.add(Op(c), {v});
}

// The steps of `program` whose kind starts with `prefix`.
inline int steps_starting(const cuda::Program& program, std::string_view prefix) {
  int n = 0;
  for (const auto& step : program.steps()) n += step->kind.starts_with(prefix) ? 1 : 0;
  return n;
}

}  // namespace kiln::compiler
