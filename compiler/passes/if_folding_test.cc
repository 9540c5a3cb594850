// SPDX-License-Identifier: Apache-2.0
// If folding, and If branches that do not type-check for the shapes given (Silero VAD's decoder:
// `if x.shape[-1] == 1: x = x.squeeze(-1)`), through import, the passes and the ref target.
#include <onnx/onnx_pb.h>

#include "compiler/onnx/importer.h"
#include "compiler/passes/pass_test_util.h"
#include "compiler/targets/target.h"

namespace kiln::compiler {
namespace {

using testing::f32;

TEST(IfFolding, AConstantConditionInlinesTheTakenBranch) {
  Graph g("fold");
  GraphBuilder b(g);
  Value* x = b.input("x", f32({2, 3}));
  Value* cond = b.constant(Tensor::scalar<bool>(false), "cond");
  auto then_branch = std::make_shared<Graph>("then", &g);
  GraphBuilder tb(*then_branch);
  tb.output(tb.add(Op(ops::Relu{}), {x}, "relu"));
  auto else_branch = std::make_shared<Graph>("else", &g);
  GraphBuilder eb(*else_branch);
  eb.output(eb.add(Op(ops::Neg{}), {eb.add(Op(ops::Abs{}), {x}, "abs")}, "neg"));
  ops::If op;
  op.then_branch = then_branch;
  op.else_branch = else_branch;
  Value* y = b.add(Op(op), {cond}, "y");
  b.output(y);
  b.output(b.add(Op(ops::Sigmoid{}), {y}, "z"));
  ASSERT_TRUE(b.status().ok() && tb.status().ok() && eb.status().ok()) << b.status().to_string();
  auto pass = make_if_folding();
  EXPECT_TRUE(testing::expect_rewrite(g, *pass,
                                      "graph fold(%x: f32[2,3]) {\n"
                                      "  %cond: bool[] = Constant[value=bool[]{false}]()  # "
                                      "\"cond\"\n"
                                      "  %y: f32[2,3] = If[else_branch=<graph else>, "
                                      "then_branch=<graph then>](%cond)  # \"y\"\n"
                                      "    graph else() {\n"
                                      "      %abs: f32[2,3] = Abs(%x)  # \"abs\"\n"
                                      "      %neg: f32[2,3] = Neg(%abs)  # \"neg\"\n"
                                      "      return %neg\n"
                                      "    }\n"
                                      "    graph then() {\n"
                                      "      %relu: f32[2,3] = Relu(%x)  # \"relu\"\n"
                                      "      return %relu\n"
                                      "    }\n"
                                      "  %z: f32[2,3] = Sigmoid(%y)  # \"z\"\n"
                                      "  return %y, %z\n"
                                      "}\n",
                                      "graph fold(%x: f32[2,3]) {\n"
                                      "  %abs: f32[2,3] = Abs(%x)  # \"abs\"\n"
                                      "  %y: f32[2,3] = Neg(%abs)  # \"neg\"\n"
                                      "  %z: f32[2,3] = Sigmoid(%y)  # \"z\"\n"
                                      "  return %y, %z\n"
                                      "}\n"));
  EXPECT_EQ(x->uses().size(), 1u) << "the dropped Relu no longer uses x";
}

// ONNX: x: f32[N,C,T] -> If(Equal(Gather(Shape(x), -1), 1)) then Squeeze(x, [-1]) else
// Identity(x) -> Relu -> y. With `data_dependent` the condition is a bool input "c" instead.
onnx::ModelProto squeeze_if_model(bool data_dependent) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("decoder");
  auto input = [&](const std::string& name, int32_t elem, std::vector<std::string> dims) {
    auto* v = g->add_input();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    t->mutable_shape();
    for (const std::string& d : dims) t->mutable_shape()->add_dim()->set_dim_param(d);
  };
  auto node = [](onnx::GraphProto* graph, const std::string& op, std::vector<std::string> ins,
                 std::vector<std::string> outs) {
    auto* n = graph->add_node();
    n->set_op_type(op);
    n->set_name(outs[0]);
    for (const auto& s : ins) n->add_input(s);
    for (const auto& s : outs) n->add_output(s);
    return n;
  };
  auto int_constant = [](onnx::GraphProto* graph, const std::string& name,
                         std::vector<int64_t> values, bool scalar) {
    auto* t = graph->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    if (!scalar) t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
  };
  input("x", onnx::TensorProto::FLOAT, {"N", "C", "T"});
  std::string cond = "c";
  if (data_dependent) {
    input("c", onnx::TensorProto::BOOL, {});
  } else {
    int_constant(g, "last", {-1}, true);
    int_constant(g, "one", {1}, true);
    node(g, "Shape", {"x"}, {"shape"});
    node(g, "Gather", {"shape", "last"}, {"t"});
    node(g, "Equal", {"t", "one"}, {"c"});
  }
  auto* n = node(g, "If", {cond}, {"branched"});
  auto* then_attr = n->add_attribute();
  then_attr->set_name("then_branch");
  then_attr->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* then_g = then_attr->mutable_g();
  then_g->set_name("then");
  int_constant(then_g, "axes", {-1}, false);
  node(then_g, "Squeeze", {"x", "axes"}, {"squeezed"});
  then_g->add_output()->set_name("squeezed");
  auto* else_attr = n->add_attribute();
  else_attr->set_name("else_branch");
  else_attr->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* else_g = else_attr->mutable_g();
  else_g->set_name("else");
  node(else_g, "Identity", {"x"}, {"same"});
  else_g->add_output()->set_name("same");
  node(g, "Relu", {"branched"}, {"y"});
  g->add_output()->set_name("y");
  return m;
}

Result<std::shared_ptr<Executable>> import_and_compile(const onnx::ModelProto& m,
                                                       const std::string& target_name) {
  std::string bytes = m.SerializeAsString();
  ImportOptions options;
  options.input_shapes["x"] = {1, 4, 2};
  KILN_ASSIGN_OR_RETURN(
      auto model,
      import_onnx_bytes(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
                        options, "decoder.onnx"));
  KILN_ASSIGN_OR_RETURN(auto target, make_target(target_name));
  return compile(std::shared_ptr<Graph>(std::move(model->graph)), *target);
}

Tensor ramp() {
  Tensor x(DType::kF32, Shape({1, 4, 2}));
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i) - 3.5f;
  return x;
}

TEST(IfFolding, ABranchNotTakenForTheseShapesNeitherFailsImportNorCompile) {
  for (const char* target : {"ref", "cpu"}) {
    if (!make_target(target).ok()) continue;
    SCOPED_TRACE(target);
    auto exe = import_and_compile(squeeze_if_model(/*data_dependent=*/false), target);
    ASSERT_TRUE(exe.ok()) << exe.status().to_string();
    for (const auto& node : (*exe)->graph().nodes()) EXPECT_NE(node->kind(), OpKind::kIf);
    EXPECT_EQ((*exe)->graph().outputs()[0]->name(), "y");
    auto out = (*exe)->run({Argument(ramp())});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const Tensor& y = (*out)[0].tensor();
    ASSERT_EQ(y.shape(), Shape({1, 4, 2}));
    for (int64_t i = 0; i < y.numel(); ++i)
      EXPECT_EQ(y.data<float>()[i], std::max(0.0f, static_cast<float>(i) - 3.5f));
  }
}

TEST(IfFolding, ADataDependentBranchFailsOnlyWhenItRuns) {
  for (const char* target : {"ref", "cpu"}) {
    if (!make_target(target).ok()) continue;
    SCOPED_TRACE(target);
    auto exe = import_and_compile(squeeze_if_model(/*data_dependent=*/true), target);
    ASSERT_TRUE(exe.ok()) << exe.status().to_string();
    auto kept = (*exe)->run({Argument(ramp()), Argument(Tensor::scalar<bool>(false))});
    ASSERT_TRUE(kept.ok()) << kept.status().to_string();
    EXPECT_EQ((*kept)[0].tensor().data<float>()[7], 3.5f);
    auto squeezed = (*exe)->run({Argument(ramp()), Argument(Tensor::scalar<bool>(true))});
    ASSERT_FALSE(squeezed.ok());
    EXPECT_NE(squeezed.status().message().find("Squeeze \"squeezed\""), std::string::npos)
        << squeezed.status().message();
  }
}

}  // namespace
}  // namespace kiln::compiler
