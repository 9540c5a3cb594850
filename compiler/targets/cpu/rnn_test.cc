// SPDX-License-Identifier: Apache-2.0
// LSTM on kiln's kernel: the lowering's reach (directions, state in and out, the outputs asked
// for) against ref, and what it leaves to the ref kernel.
#include "compiler/targets/cpu/kernels/lstm.h"
#include "compiler/targets/cpu/program_testing.h"

namespace kiln::compiler {
namespace {

struct LstmCase {
  std::string direction = "forward";
  int64_t steps = 1;
  int64_t batch = 1;
  int64_t input = 5;
  int64_t hidden = 7;
  int outputs = 3;
  bool state_in = true;
  bool peepholes = false;
};

std::shared_ptr<Graph> lstm_graph(const LstmCase& c) {
  auto graph = std::make_shared<Graph>("lstm");
  GraphBuilder b(*graph);
  const int64_t d = c.direction == "bidirectional" ? 2 : 1;
  const int64_t h = c.hidden;
  std::vector<Value*> in = {b.input("x", TensorType(DType::kF32, Shape{c.steps, c.batch, c.input})),
                            b.constant(random_tensor(Shape{d, 4 * h, c.input}, 400, 0.4f)),
                            b.constant(random_tensor(Shape{d, 4 * h, h}, 401, 0.4f)),
                            b.constant(random_tensor(Shape{d, 8 * h}, 402, 0.4f)), nullptr};
  if (c.state_in) {
    in.push_back(b.input("h0", TensorType(DType::kF32, Shape{d, c.batch, h})));
    in.push_back(b.input("c0", TensorType(DType::kF32, Shape{d, c.batch, h})));
  } else {
    in.push_back(nullptr);
    in.push_back(nullptr);
  }
  if (c.peepholes) in.push_back(b.constant(random_tensor(Shape{d, 3 * h}, 403, 0.4f)));
  while (in.back() == nullptr) in.pop_back();
  ops::LSTM op;
  op.hidden_size = h;
  op.direction = c.direction;
  Node* node = graph->add_node(Op(op), in, c.outputs, "lstm");
  const std::vector<Shape> shapes = {Shape{c.steps, d, c.batch, h}, Shape{d, c.batch, h},
                                     Shape{d, c.batch, h}};
  for (int i = 0; i < c.outputs; ++i) {
    node->output(i)->set_type(TensorType(DType::kF32, shapes[static_cast<size_t>(i)]));
    b.output(node->output(i));
  }
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return graph;
}

std::vector<Tensor> lstm_inputs(const LstmCase& c) {
  const int64_t d = c.direction == "bidirectional" ? 2 : 1;
  std::vector<Tensor> inputs = {random_tensor(Shape{c.steps, c.batch, c.input}, 410)};
  if (c.state_in) {
    inputs.push_back(random_tensor(Shape{d, c.batch, c.hidden}, 411, 0.5f));
    inputs.push_back(random_tensor(Shape{d, c.batch, c.hidden}, 412, 0.5f));
  }
  return inputs;
}

// The step that runs the LSTM node, or null.
const cpu::Step* lstm_step(const cpu::Program& program) {
  for (const auto& step : program.steps()) {
    if (step->node != nullptr && step->node->name() == "lstm") return step.get();
  }
  return nullptr;
}

TEST(CpuLstm, RunsOnKilnsKernelAndMatchesRef) {
  if (!cpu::has_fast_lstm()) GTEST_SKIP() << "no AVX-512 here";
  const std::vector<LstmCase> cases = {
      {},                                              // Silero VAD's: one step
      {"forward", 4, 2, 33, 128, 3, true, false},      // wider than a block of 128 gates
      {"reverse", 3, 1, 16, 16, 2, false, false},      // backwards, zero state
      {"bidirectional", 5, 3, 5, 7, 3, true, false},   // both ways, Y interleaved
      {"bidirectional", 2, 1, 1, 1, 1, false, false},  // Y only
  };
  for (const LstmCase& c : cases) {
    SCOPED_TRACE(c.direction + " steps " + std::to_string(c.steps) + " hidden " +
                 std::to_string(c.hidden));
    const std::vector<Tensor> inputs = lstm_inputs(c);
    std::shared_ptr<Executable> exe =
        compile_matching_ref([&] { return lstm_graph(c); }, inputs, 1e-4f);
    ASSERT_NE(exe, nullptr);
    const cpu::Step* step = lstm_step(*cpu_program(*exe));
    ASSERT_NE(step, nullptr);
    EXPECT_STREQ(step->runs_on(), "kiln");
  }
}

TEST(CpuLstm, PeepholesRunOnTheRefKernel) {
  LstmCase c;
  c.peepholes = true;
  std::shared_ptr<Executable> exe =
      compile_matching_ref([&] { return lstm_graph(c); }, lstm_inputs(c), 1e-4f);
  ASSERT_NE(exe, nullptr);
  const cpu::Step* step = lstm_step(*cpu_program(*exe));
  ASSERT_NE(step, nullptr);
  EXPECT_STREQ(step->runs_on(), "ref");
}

}  // namespace
}  // namespace kiln::compiler
