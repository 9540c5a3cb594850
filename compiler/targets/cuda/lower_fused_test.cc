// SPDX-License-Identifier: Apache-2.0
// Which nodes lower_fused puts in one generated kernel, without a GPU: lowering proceeds to the
// kernel's creation, which fails for want of a device, and the warning names the fused step.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/builder.h"
#include "compiler/ops/all_ops.h"
#include "compiler/targets/cuda/builder.h"
#include "core/gpu.h"
#include "core/logging.h"

namespace kiln::compiler::cuda {
namespace {

using BuildFn = std::function<void(GraphBuilder&, const std::vector<Value*>&)>;

// The warnings logged while lowering the graph `build` makes of f32 inputs of `shapes` (the
// program cannot be built without a device; only the lowering decisions matter here).
std::string lowering_warnings(const std::vector<Shape>& shapes, const BuildFn& build) {
  Graph graph("case");
  GraphBuilder gb(graph);
  std::vector<Value*> in;
  for (size_t i = 0; i < shapes.size(); ++i) {
    in.push_back(gb.input("in" + std::to_string(i), TensorType(DType::kF32, shapes[i])));
  }
  build(gb, in);
  EXPECT_TRUE(gb.status().ok()) << gb.status().to_string();
  std::string text;
  set_log_sink([&](LogLevel level, std::string_view m) {
    if (level == LogLevel::kWarning) text += std::string(m) + "\n";
  });
  Builder b(graph, 1, nullptr, nullptr, {});
  (void)b.build();
  set_log_sink({});
  return text;
}

Value* constant(GraphBuilder& b, Shape shape, float v) {
  Tensor t(DType::kF32, std::move(shape));
  for (float& x : t.span<float>()) x = v;
  return b.constant(t);
}

Value* layernorm(GraphBuilder& b, Value* x, int64_t cols) {
  return b.add(Op(ops::LayerNormalization{}),
               {x, constant(b, Shape{cols}, 1.0f), constant(b, Shape{cols}, 0.0f)});
}

#define SKIP_WITH_A_GPU()                                                                      \
  if (!list_gpus().empty()) {                                                                  \
    GTEST_SKIP() << "with a GPU the kernels are made; compiler_cuda_test checks these graphs"; \
  }

TEST(LowerFused, ChainsBeforeRowOpsJoinThem) {
  SKIP_WITH_A_GPU();
  std::string w = lowering_warnings({Shape{4, 64}, Shape{4, 64}}, [](GraphBuilder& b, auto in) {
    b.output(layernorm(b, b.add(Op(ops::Add{}), {in[0], in[1]}), 64));
  });
  EXPECT_NE(w.find("Add+LayerNormalization (2 ops from"), std::string::npos) << w;
  EXPECT_EQ(w.find("also written"), std::string::npos) << w;

  // The sum read again: written out too.
  w = lowering_warnings({Shape{4, 64}, Shape{4, 64}}, [](GraphBuilder& b, auto in) {
    Value* sum = b.add(Op(ops::Add{}), {in[0], in[1]});
    b.output(b.add(Op(ops::Add{}), {sum, layernorm(b, sum, 64)}));
  });
  EXPECT_NE(w.find("Add+LayerNormalization (2 ops from"), std::string::npos) << w;
  EXPECT_NE(w.find("its prologue also written"), std::string::npos) << w;

  // Scale, broadcast mask, Softmax.
  w = lowering_warnings({Shape{2, 3, 8, 8}, Shape{2, 1, 1, 8}}, [](GraphBuilder& b, auto in) {
    Value* s = b.add(Op(ops::Mul{}), {in[0], constant(b, Shape{}, 0.125f)});
    b.output(b.add(Op(ops::Softmax{}), {b.add(Op(ops::Add{}), {s, in[1]})}));
  });
  EXPECT_NE(w.find("Mul+Add+Softmax (3 ops"), std::string::npos) << w;

  // A trailing-axis mean of a sum; a mean over another axis is left alone.
  w = lowering_warnings({Shape{4, 32}, Shape{32}}, [](GraphBuilder& b, auto in) {
    ops::ReduceMean last;
    last.axes = std::vector<int64_t>{-1};
    ops::ReduceMean first;
    first.axes = std::vector<int64_t>{0};
    Value* sum = b.add(Op(ops::Add{}), {in[0], in[1]});
    b.output(b.add(Op(last), {sum}));
    b.output(b.add(Op(first), {b.add(Op(ops::Sub{}), {in[0], in[1]})}));
  });
  EXPECT_NE(w.find("Add+ReduceMean"), std::string::npos) << w;
  EXPECT_EQ(w.find("Sub+ReduceMean"), std::string::npos) << w;
}

TEST(LowerFused, ChainsAfterRowOpsAndAroundTransposes) {
  SKIP_WITH_A_GPU();
  std::string w = lowering_warnings({Shape{4, 64}, Shape{4, 64}}, [](GraphBuilder& b, auto in) {
    Value* y = b.add(Op(ops::Mul{}), {layernorm(b, in[0], 64), constant(b, Shape{}, 2.0f)});
    b.output(b.add(Op(ops::Add{}), {y, in[1]}));
  });
  EXPECT_NE(w.find("LayerNormalization+Mul+Add (3 ops"), std::string::npos) << w;

  // LayerNorm and Softmax alone keep the nvcc kernels: nothing generated.
  w = lowering_warnings({Shape{4, 64}}, [](GraphBuilder& b, auto in) {
    b.output(layernorm(b, in[0], 64));
    b.output(b.add(Op(ops::Softmax{}), {in[0]}));
  });
  EXPECT_EQ(w.find("runs unfused"), std::string::npos) << w;

  ops::Transpose t;
  t.perm = std::vector<int64_t>{0, 2, 1};
  w = lowering_warnings({Shape{2, 3, 5}, Shape{3, 5}}, [&](GraphBuilder& b, auto in) {
    Value* v = b.add(Op(ops::Tanh{}), {b.add(Op(ops::Add{}), {in[0], in[1]})});
    b.output(b.add(Op(t), {v}));
  });
  EXPECT_NE(w.find("Add+Tanh+Transpose (3 ops"), std::string::npos) << w;

  w = lowering_warnings({Shape{2, 3, 5}, Shape{5, 3}}, [&](GraphBuilder& b, auto in) {
    Value* v = b.add(Op(ops::Mul{}), {b.add(Op(t), {in[0]}), in[1]});
    b.output(b.add(Op(ops::Sigmoid{}), {v}));
  });
  EXPECT_NE(w.find("Transpose+Mul+Sigmoid (3 ops"), std::string::npos) << w;
}

}  // namespace
}  // namespace kiln::compiler::cuda
