// SPDX-License-Identifier: Apache-2.0
// If on the cpu target: branches planned as programs of their own, run over the enclosing
// program's buffers; a branch that cannot be planned runs the call on the interpreter.
#include "compiler/targets/cpu/program_testing.h"

namespace kiln::compiler {
namespace {

Tensor flag(bool value) {
  return Tensor::scalar(value);
}

// x: f32[1,16,6,6] -> r = Relu(Conv3x3(x)); y = If(c) then Flatten(GAP(Relu(Conv3x3(r)))) else
// Flatten(GAP(Sigmoid(Conv1x1(r)))); the If also returns r itself (a value of the enclosing graph)
// and a constant of its own; z = y * 2 after it.
std::shared_ptr<Graph> if_network() {
  auto graph = std::make_shared<Graph>("if_network");
  GraphBuilder b(*graph);
  Value* x = b.input("x", TensorType(DType::kF32, Shape{1, 16, 6, 6}));
  Value* c = b.input("c", TensorType(DType::kBool, Shape{}));
  Value* r = b.add(Op(ops::Relu{}), {conv(b, x, 16, 16, 3, 1, 300)}, "outer_relu");
  ops::Flatten flatten;
  flatten.axis = 1;
  auto then_branch = std::make_shared<Graph>("then", graph.get());
  GraphBuilder tb(*then_branch);
  Value* t = tb.add(Op(ops::Relu{}), {conv(tb, r, 16, 24, 3, 1, 310)}, "then_relu");
  tb.output(tb.add(Op(flatten), {tb.add(Op(ops::GlobalAveragePool{}), {t}, "then_gap")}, "t"));
  tb.output(r);
  tb.output(tb.constant(random_tensor(Shape{3}, 320), "then_const"));
  auto else_branch = std::make_shared<Graph>("else", graph.get());
  GraphBuilder eb(*else_branch);
  Value* e = eb.add(Op(ops::Sigmoid{}), {conv(eb, r, 16, 24, 1, 1, 330)}, "else_sigmoid");
  eb.output(eb.add(Op(flatten), {eb.add(Op(ops::GlobalAveragePool{}), {e}, "else_gap")}, "e"));
  eb.output(eb.add(Op(ops::Neg{}), {r}, "else_neg"));
  eb.output(eb.constant(random_tensor(Shape{3}, 340), "else_const"));
  ops::If op;
  op.then_branch = then_branch;
  op.else_branch = else_branch;
  Node* node = graph->add_node(Op(op), {c}, 3, "if");
  for (int i = 0; i < 3; ++i) node->output(i)->set_type(then_branch->outputs()[i]->type());
  b.output(b.add(Op(ops::Mul{}), {node->output(0), b.constant(Tensor::scalar(2.0f))}, "z"));
  b.output(node->output(1));
  b.output(node->output(2));
  EXPECT_TRUE(b.status().ok() && tb.status().ok() && eb.status().ok()) << b.status().to_string();
  return graph;
}

TEST(CpuIf, BranchesRunAsPlannedProgramsAndMatchRef) {
  std::shared_ptr<Executable> ref = compile_for(if_network(), "ref");
  std::shared_ptr<Executable> exe = compile_for(if_network(), "cpu");
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr) << "the If kept the graph from being planned";
  EXPECT_EQ(program->count_steps("If"), 1);
  const Tensor x = random_tensor(Shape{1, 16, 6, 6}, 350);
  // Both branches, each twice (the second run reuses the branch's session), alternating.
  for (bool c : {true, false, true, false}) {
    SCOPED_TRACE(c ? "then" : "else");
    expect_close(run(*ref, {x, flag(c)}), run(*exe, {x, flag(c)}));
  }
  expect_no_live_overlap(*program);
}

TEST(CpuIf, ProfilesListTheStepsOfTheBranchTaken) {
  std::shared_ptr<Executable> exe = compile_for(if_network(), "cpu");
  ASSERT_NE(exe, nullptr);
  for (bool c : {true, false}) {
    RunProfile profile;
    auto out = exe->run_profiled(
        {Argument(random_tensor(Shape{1, 16, 6, 6}, 360)), Argument(flag(c))}, profile);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    bool branch_step = false;
    for (const StepTime& s : profile.steps) {
      EXPECT_NE(s.kind, "If") << "the If step lists its branch's steps, not itself";
      branch_step |= s.node.find(c ? "then_relu" : "else_sigmoid") != std::string::npos ||
                     s.node.find(c ? "conv310" : "conv330") != std::string::npos;
    }
    EXPECT_TRUE(branch_step) << (c ? "then" : "else");
  }
}

// y = If(c) then Relu(x) else Cast<f32>(NonZero(x)): the else branch's shape depends on the data,
// so the If is planned with the then branch's types and the else branch runs the call on the
// interpreter.
std::shared_ptr<Graph> data_dependent_if() {
  auto graph = std::make_shared<Graph>("data_dependent_if");
  GraphBuilder b(*graph);
  Value* x = b.input("x", TensorType(DType::kF32, Shape{2, 3}));
  Value* c = b.input("c", TensorType(DType::kBool, Shape{}));
  auto then_branch = std::make_shared<Graph>("then", graph.get());
  GraphBuilder tb(*then_branch);
  tb.output(tb.add(Op(ops::Relu{}), {x}, "relu"));
  auto else_branch = std::make_shared<Graph>("else", graph.get());
  GraphBuilder eb(*else_branch);
  ops::Cast cast;
  cast.to = DType::kF32;
  eb.output(eb.add(Op(cast), {eb.add(Op(ops::NonZero{}), {x}, "nonzero")}, "cast"));
  ops::If op;
  op.then_branch = then_branch;
  op.else_branch = else_branch;
  b.output(b.add(Op(op), {c}, "if"));
  EXPECT_TRUE(b.status().ok() && tb.status().ok() && eb.status().ok()) << b.status().to_string();
  return graph;
}

TEST(CpuIf, ABranchThatCannotBePlannedRunsTheCallOnTheInterpreter) {
  std::shared_ptr<Executable> ref = compile_for(data_dependent_if(), "ref");
  std::shared_ptr<Executable> exe = compile_for(data_dependent_if(), "cpu");
  ASSERT_NE(exe, nullptr);
  ASSERT_NE(cpu_program(*exe), nullptr) << "the planned branch should make a program";
  Tensor x = random_tensor(Shape{2, 3}, 370);
  x.data<float>()[1] = 0.0f;  // five nonzeros: the else branch gives [2, 5]
  for (bool c : {false, true, false}) {
    SCOPED_TRACE(c ? "then" : "else");
    const std::vector<Tensor> got = run(*exe, {x, flag(c)});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].shape(), c ? Shape({2, 3}) : Shape({2, 5}));
    expect_close(run(*ref, {x, flag(c)}), got);
  }
}

}  // namespace
}  // namespace kiln::compiler
