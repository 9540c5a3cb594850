// SPDX-License-Identifier: Apache-2.0
// Resize on oneDNN's resampling: in a Conv's blocked layout with no reorder, and the forms whose
// coordinates oneDNN does not share left to ref.
#include "compiler/targets/cpu/program_testing.h"

namespace kiln::compiler {
namespace {

std::shared_ptr<Graph> conv_resize(const std::string& mode, const std::string& transform,
                                   const std::string& nearest, float scale) {
  auto graph = std::make_shared<Graph>("resize");
  GraphBuilder b(*graph);
  Value* x = b.input("x", TensorType(DType::kF32, Shape{1, 16, 6, 6}));
  ops::Resize op;
  op.mode = mode;
  op.coordinate_transformation_mode = transform;
  op.nearest_mode = nearest;
  Value* scales =
      b.constant(Tensor::from_vector(std::vector<float>{1.0f, 1.0f, scale, scale}), "scales");
  Value* y = b.add(Op(op), {conv(b, x, 16, 32, 3, 1, 500), nullptr, scales}, "resize");
  b.output(conv(b, y, 32, 16, 3, 1, 510));
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return graph;
}

const cpu::Step* resize_step(const cpu::Program& program) {
  for (const auto& step : program.steps()) {
    if (step->node != nullptr && step->node->name() == "resize" && step->kind != "Reorder") {
      return step.get();
    }
  }
  return nullptr;
}

TEST(CpuResize, LinearHalfPixelRunsOnOneDnnInTheConvsLayout) {
  ScopedEnv layout("KILN_CPU_CONV_LAYOUT", "blocked16");
  const std::vector<Tensor> inputs = {random_tensor(Shape{1, 16, 6, 6}, 520)};
  for (const char* transform : {"half_pixel", "pytorch_half_pixel"}) {
    SCOPED_TRACE(transform);
    std::shared_ptr<Executable> exe = compile_matching_ref(
        [&] { return conv_resize("linear", transform, "round_prefer_floor", 2.0f); }, inputs,
        1e-4f);
    ASSERT_NE(exe, nullptr);
    const cpu::Program* program = cpu_program(*exe);
    const cpu::Step* step = resize_step(*program);
    ASSERT_NE(step, nullptr);
    EXPECT_STREQ(step->runs_on(), "onednn");
    // Only the input and the output change layout: the Resize reads and writes nChw16c.
    EXPECT_EQ(program->count_steps("Reorder"), 2);
  }
}

TEST(CpuResize, NearestWithTiesStaysOnRef) {
  const std::vector<Tensor> inputs = {random_tensor(Shape{1, 16, 6, 6}, 530)};
  // Downscaling by 2 with round_prefer_floor: every coordinate is a tie oneDNN rounds up.
  std::shared_ptr<Executable> exe = compile_matching_ref(
      [&] { return conv_resize("nearest", "half_pixel", "round_prefer_floor", 0.5f); }, inputs,
      1e-4f);
  ASSERT_NE(exe, nullptr);
  const cpu::Step* step = resize_step(*cpu_program(*exe));
  ASSERT_NE(step, nullptr);
  EXPECT_STREQ(step->runs_on(), "ref");
}

}  // namespace
}  // namespace kiln::compiler
