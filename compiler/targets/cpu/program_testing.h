// SPDX-License-Identifier: Apache-2.0
// What the cpu target's program tests share: random weights, compiling for a target, running,
// comparing with ref, the arena check, and a small ResNet.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "compiler/artifact/artifact.h"
#include "compiler/ir/builder.h"
#include "compiler/ir/clone.h"
#include "compiler/ir/printer.h"
#include "compiler/onnx/importer.h"
#include "compiler/ops/all_ops.h"
#include "compiler/quantize/quantize.h"
#include "compiler/runtime/shape_profiles.h"
#include "compiler/targets/cpu/builder.h"
#include "compiler/targets/cpu/cpu_target.h"
#include "compiler/targets/cpu/onednn.h"
#include "compiler/targets/cpu/packed_constants.h"
#include "compiler/targets/cpu/silu.h"
#include "core/testing/scoped_env.h"

namespace kiln::compiler {

inline Tensor random_tensor(Shape shape, uint32_t seed, float scale = 1.0f) {
  Tensor t(DType::kF32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (float& v : t.span<float>()) v = dist(rng);
  return t;
}

// Values in [0.5, 1.5): a variance.
inline Tensor positive_tensor(Shape shape, uint32_t seed) {
  Tensor t = random_tensor(std::move(shape), seed, 0.5f);
  for (float& v : t.span<float>()) v += 1.0f;
  return t;
}

inline std::shared_ptr<Executable> compile_for(const std::shared_ptr<Graph>& graph,
                                               const char* name) {
  auto target = make_target(name);
  EXPECT_TRUE(target.ok()) << target.status().to_string();
  auto exe = compile(graph, **target);
  EXPECT_TRUE(exe.ok()) << exe.status().to_string();
  return exe.ok() ? *exe : nullptr;
}

inline std::vector<Tensor> run(const Executable& exe, const std::vector<Tensor>& inputs) {
  std::vector<Argument> args(inputs.begin(), inputs.end());
  auto out = exe.run(std::move(args));
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  std::vector<Tensor> tensors;
  if (out.ok()) {
    for (const Argument& a : *out) tensors.push_back(a.tensor());
  }
  return tensors;
}

// Every element within 1e-4 absolute plus `rtol` relative.
inline void expect_close(const std::vector<Tensor>& want, const std::vector<Tensor>& got,
                         float rtol = 1e-4f) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(want[o].shape(), got[o].shape()) << "output " << o;
    ASSERT_EQ(want[o].dtype(), got[o].dtype()) << "output " << o;
    if (want[o].dtype() != DType::kF32) {
      EXPECT_EQ(std::memcmp(want[o].raw_data(), got[o].raw_data(), want[o].nbytes()), 0);
      continue;
    }
    int bad = 0;
    for (int64_t i = 0; i < want[o].numel() && bad < 5; ++i) {
      const float x = want[o].data<float>()[i];
      const float y = got[o].data<float>()[i];
      if (!(std::abs(x - y) <= 1e-4f + rtol * std::abs(x))) {
        ADD_FAILURE() << "output " << o << " element " << i << ": ref " << x << ", cpu " << y;
        ++bad;
      }
    }
  }
}

// Two buffers live at the same step never share bytes of the arena.
inline void expect_no_live_overlap(const cpu::Program& program) {
  const auto& buffers = program.buffers();
  const auto& offsets = program.offsets();
  for (size_t a = 0; a < buffers.size(); ++a) {
    if (buffers[a].kind != cpu::Buffer::Kind::kArena || buffers[a].bytes == 0) continue;
    EXPECT_LE(offsets[a] + buffers[a].bytes, program.arena_bytes());
    for (size_t b = a + 1; b < buffers.size(); ++b) {
      if (buffers[b].kind != cpu::Buffer::Kind::kArena || buffers[b].bytes == 0) continue;
      const bool live_together =
          buffers[a].first <= buffers[b].last && buffers[b].first <= buffers[a].last;
      const bool disjoint = offsets[a] + buffers[a].bytes <= offsets[b] ||
                            offsets[b] + buffers[b].bytes <= offsets[a];
      if (live_together) {
        EXPECT_TRUE(disjoint) << "buffers " << a << " and " << b;
      }
    }
  }
}

inline Value* conv(GraphBuilder& b, Value* x, int64_t in, int64_t out, int64_t k, int64_t stride,
                   uint32_t seed, int64_t group = 1) {
  ops::Conv op;
  op.group = group;
  op.strides = std::vector<int64_t>{stride, stride};
  op.pads = std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2};
  const float scale = 1.0f / std::sqrt(static_cast<float>(in / group * k * k));
  Value* w = b.constant(random_tensor(Shape{out, in / group, k, k}, seed, scale));
  Value* bias = b.constant(random_tensor(Shape{out}, seed + 1, 0.1f));
  return b.add(Op(op), {x, w, bias}, "conv" + std::to_string(seed));
}

// A small ResNet: stem conv + max pool, two residual blocks (one with a strided projection),
// global average pool, flatten, a classifier.
inline std::shared_ptr<Graph> tiny_resnet(int64_t batch) {
  auto graph = std::make_shared<Graph>("tiny_resnet");
  GraphBuilder b(*graph);
  Value* x = b.input("image", TensorType(DType::kF32, Shape{batch, 3, 32, 32}));
  Value* relu = b.add(Op(ops::Relu{}), {conv(b, x, 3, 16, 3, 1, 10)}, "stem_relu");
  ops::MaxPool pool;
  pool.kernel_shape = std::vector<int64_t>{2, 2};
  pool.strides = std::vector<int64_t>{2, 2};
  Value* h = b.add(Op(pool), {relu}, "pool");
  // Block 1: identity shortcut.
  Value* a = b.add(Op(ops::Relu{}), {conv(b, h, 16, 16, 3, 1, 20)}, "b1_relu");
  Value* sum = b.add(Op(ops::Add{}), {conv(b, a, 16, 16, 3, 1, 30), h}, "b1_add");
  h = b.add(Op(ops::Relu{}), {sum}, "b1_out");
  // Block 2: strided, with a 1x1 projection shortcut.
  a = b.add(Op(ops::Relu{}), {conv(b, h, 16, 32, 3, 2, 40)}, "b2_relu");
  Value* shortcut = conv(b, h, 16, 32, 1, 2, 50);
  sum = b.add(Op(ops::Add{}), {conv(b, a, 32, 32, 3, 1, 60), shortcut}, "b2_add");
  h = b.add(Op(ops::Relu{}), {sum}, "b2_out");
  Value* gap = b.add(Op(ops::GlobalAveragePool{}), {h}, "gap");
  ops::Flatten flatten;
  flatten.axis = 1;
  Value* flat = b.add(Op(flatten), {gap}, "flatten");
  ops::Gemm gemm;
  gemm.transB = 1;
  Value* logits = b.add(Op(gemm),
                        {flat, b.constant(random_tensor(Shape{10, 32}, 70)),
                         b.constant(random_tensor(Shape{10}, 71))},
                        "fc");
  b.output(b.add(Op(ops::Softmax{}), {logits}, "probs"));
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return graph;
}

using kiln::test::ScopedEnv;

// Compiles the graph `make` builds for ref and for cpu, checks cpu's outputs on `inputs` against
// ref's (`rtol`), and returns the cpu executable (null when it did not compile).
template <typename MakeGraph>
std::shared_ptr<Executable> compile_matching_ref(const MakeGraph& make,
                                                 const std::vector<Tensor>& inputs, float rtol) {
  std::vector<Tensor> want = run(*compile_for(make(), "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(make(), "cpu");
  if (exe != nullptr) expect_close(want, run(*exe, inputs), rtol);
  return exe;
}

}  // namespace kiln::compiler
