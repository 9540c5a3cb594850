// SPDX-License-Identifier: Apache-2.0
// Gradient import: the backward graph agrees with finite differences of the forward graph.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "compiler/onnx/importer.h"
#include "compiler/targets/target.h"

namespace kiln::compiler {
namespace {

void add_input(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims) {
  auto* v = g->add_input();
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

void add_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
              std::string out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(out);
  for (auto& i : in) n->add_input(i);
  n->add_output(out);
}

// y = MatMul(a, b) * c - a / c, with c broadcast over rows; Gradient of y w.r.t. a, b and c.
onnx::ModelProto gradient_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* training = m.add_opset_import();
  training->set_domain("ai.onnx.preview.training");
  training->set_version(1);
  auto* g = m.mutable_graph();
  g->set_name("grad");
  add_input(g, "a", {2, 3});
  add_input(g, "b", {3, 3});
  add_input(g, "c", {3});
  add_node(g, "MatMul", {"a", "b"}, "ab");
  add_node(g, "Mul", {"ab", "c"}, "abc");
  add_node(g, "Div", {"a", "c"}, "q");
  add_node(g, "Sub", {"abc", "q"}, "y");
  auto* grad = g->add_node();
  grad->set_op_type("Gradient");
  grad->set_domain("ai.onnx.preview.training");
  for (const char* x : {"a", "b", "c"}) grad->add_input(x);
  for (const char* o : {"da", "db", "dc"}) grad->add_output(o);
  auto* xs = grad->add_attribute();
  xs->set_name("xs");
  xs->set_type(onnx::AttributeProto::STRINGS);
  for (const char* x : {"a", "b", "c"}) xs->add_strings(x);
  auto* y = grad->add_attribute();
  y->set_name("y");
  y->set_type(onnx::AttributeProto::STRING);
  y->set_s("y");
  for (const char* o : {"y", "da", "db", "dc"}) g->add_output()->set_name(o);
  return m;
}

TEST(GradientImport, MatchesFiniteDifferences) {
  std::string bytes = gradient_model().SerializeAsString();
  auto model =
      import_onnx_bytes(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  std::shared_ptr<Graph> graph(std::move((*model)->graph));
  EXPECT_EQ(graph->outputs()[1]->name(), "da");
  auto target = make_target("ref");
  auto exe = compile(graph, **target, CompileOptions{.optimize = false});
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();

  std::vector<Tensor> inputs = {Tensor(DType::kF32, Shape{2, 3}), Tensor(DType::kF32, Shape{3, 3}),
                                Tensor(DType::kF32, Shape{3})};
  float v = 0.3f;
  for (Tensor& t : inputs) {
    for (float& e : t.span<float>()) e = (v = v * 1.7f - static_cast<int>(v * 1.7f)) + 0.5f;
  }
  auto run = [&](const std::vector<Tensor>& in) {
    auto out = (*exe)->run({Argument(in[0]), Argument(in[1]), Argument(in[2])});
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    return std::move(out).value();
  };
  auto sum_y = [&](const std::vector<Tensor>& in) {
    std::vector<Argument> out = run(in);  // kept alive: the loop reads its storage
    double s = 0;
    for (float e : out[0].tensor().span<float>()) s += e;
    return s;
  };
  std::vector<Argument> out = run(inputs);
  for (size_t x = 0; x < 3; ++x) {
    const Tensor& grad = out[x + 1].tensor();
    ASSERT_EQ(grad.shape(), inputs[x].shape());
    for (int64_t i = 0; i < inputs[x].numel(); ++i) {
      std::vector<Tensor> plus = {inputs[0].clone(), inputs[1].clone(), inputs[2].clone()};
      std::vector<Tensor> minus = {inputs[0].clone(), inputs[1].clone(), inputs[2].clone()};
      const float h = 1e-2f;
      plus[x].data<float>()[i] += h;
      minus[x].data<float>()[i] -= h;
      double numeric = (sum_y(plus) - sum_y(minus)) / (2 * h);
      EXPECT_NEAR(grad.data<float>()[i], numeric, 2e-2 * std::max(1.0, std::abs(numeric)))
          << "x" << x << "[" << i << "]";
    }
  }
}

TEST(GradientImport, UnsupportedOpOnThePathIsNamed) {
  onnx::ModelProto m = gradient_model();
  m.mutable_graph()->mutable_node(2)->set_op_type("Pow");  // q = Pow(a, c)
  std::string bytes = m.SerializeAsString();
  auto model =
      import_onnx_bytes(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(model.status().message().find("Pow \"q\""), std::string::npos)
      << model.status().message();
}

}  // namespace
}  // namespace kiln::compiler
