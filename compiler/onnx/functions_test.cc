// SPDX-License-Identifier: Apache-2.0
// Tests of model-local function inlining: values, attribute references and defaults, nesting,
// subgraphs in bodies, and the errors a malformed model gets.
#include "compiler/onnx/functions.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <string>
#include <vector>

#include "compiler/ir/printer.h"
#include "compiler/onnx/importer.h"
#include "compiler/targets/target.h"

namespace kiln::compiler {
namespace {

onnx::ValueInfoProto vector_info(const std::string& name, int64_t n) {
  onnx::ValueInfoProto v;
  v.set_name(name);
  auto* t = v.mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_value(n);
  return v;
}

onnx::NodeProto* add_node(google::protobuf::RepeatedPtrField<onnx::NodeProto>* nodes,
                          const std::string& op, std::vector<std::string> in,
                          std::vector<std::string> out, const std::string& domain = "") {
  onnx::NodeProto* n = nodes->Add();
  n->set_op_type(op);
  n->set_domain(domain);
  for (const std::string& s : in) n->add_input(s);
  for (const std::string& s : out) n->add_output(s);
  return n;
}

onnx::AttributeProto* float_attr(onnx::NodeProto* n, const std::string& name, float v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
  return a;
}

void ref_attr(onnx::NodeProto* n, const std::string& name, const std::string& ref) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_ref_attr_name(ref);
}

// custom.Scaled(X) = LeakyRelu(X, alpha=@alpha) + Inner(X); custom.Inner(X) = Neg(X). The
// graph calls Scaled twice ("first" with alpha -0.5, the second unnamed without it: LeakyRelu's
// own default 0.01 then), so each call's values and references stay its own.
onnx::ModelProto model_with_functions() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(18);
  m.add_opset_import()->set_domain("custom");
  m.mutable_opset_import(1)->set_version(1);
  auto* g = m.mutable_graph();
  g->set_name("g");
  *g->add_input() = vector_info("x", 4);
  *g->add_output() = vector_info("a", 4);
  *g->add_output() = vector_info("b", 4);
  float_attr(add_node(g->mutable_node(), "Scaled", {"x"}, {"a"}, "custom"), "alpha", -0.5f);
  g->mutable_node(0)->set_name("first");
  add_node(g->mutable_node(), "Scaled", {"a"}, {"b"}, "custom");

  onnx::FunctionProto* scaled = m.add_functions();
  scaled->set_name("Scaled");
  scaled->set_domain("custom");
  scaled->add_input("X");
  scaled->add_output("Y");
  scaled->add_attribute("alpha");
  scaled->add_opset_import()->set_version(18);
  scaled->add_opset_import()->set_domain("custom");
  scaled->mutable_opset_import(1)->set_version(1);
  ref_attr(add_node(scaled->mutable_node(), "LeakyRelu", {"X"}, {"act"}), "alpha", "alpha");
  add_node(scaled->mutable_node(), "Inner", {"X"}, {"neg"}, "custom");
  add_node(scaled->mutable_node(), "Add", {"act", "neg"}, {"Y"});

  onnx::FunctionProto* inner = m.add_functions();
  inner->set_name("Inner");
  inner->set_domain("custom");
  inner->add_input("X");
  inner->add_output("Y");
  inner->add_opset_import()->set_version(18);
  add_node(inner->mutable_node(), "Neg", {"X"}, {"Y"});
  return m;
}

std::vector<uint8_t> bytes_of(const onnx::ModelProto& m) {
  std::string s = m.SerializeAsString();
  return {s.begin(), s.end()};
}

std::vector<float> run_ref(const onnx::ModelProto& m, const std::vector<float>& x, int output) {
  auto model = import_onnx_bytes(bytes_of(m), {}, "functions.onnx");
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  if (!model.ok()) return {};
  std::shared_ptr<Graph> graph = std::move((*model)->graph);
  auto target = make_target("ref");
  auto exe = compile(graph, **target);
  EXPECT_TRUE(exe.ok()) << exe.status().to_string();
  if (!exe.ok()) return {};
  Tensor in(DType::kF32, Shape{static_cast<int64_t>(x.size())});
  std::copy(x.begin(), x.end(), in.data<float>());
  std::vector<Argument> args;
  args.emplace_back(std::move(in));
  auto out = (*exe)->run(std::move(args));
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return {};
  const auto got = (*out)[static_cast<size_t>(output)].tensor().span<float>();
  return {got.begin(), got.end()};
}

float scaled(float x, float alpha) {
  return (x >= 0 ? x : alpha * x) - x;
}

TEST(OnnxFunctions, CallsAreInlinedWithTheirOwnAttributesAndValues) {
  const std::vector<float> x = {-2.0f, -0.5f, 0.75f, 3.0f};
  const std::vector<float> a = run_ref(model_with_functions(), x, 0);
  const std::vector<float> b = run_ref(model_with_functions(), x, 1);
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (size_t i = 0; i < x.size(); ++i) {
    const float want_a = scaled(x[i], -0.5f);
    EXPECT_FLOAT_EQ(a[i], want_a) << i;
    EXPECT_FLOAT_EQ(b[i], scaled(want_a, 0.01f)) << i;
  }
  // The second call's (unnamed) values are its own: no name of the first is reused.
  onnx::ModelProto m = model_with_functions();
  ASSERT_TRUE(inline_local_functions(m, "functions.onnx").ok());
  std::vector<std::string> ops;
  for (const onnx::NodeProto& n : m.graph().node()) ops.push_back(n.op_type());
  EXPECT_EQ(ops, (std::vector<std::string>{"LeakyRelu", "Neg", "Add", "LeakyRelu", "Neg", "Add"}));
  EXPECT_EQ(m.graph().node(0).output(0), "first/act");
  EXPECT_EQ(m.graph().node(1).output(0), "first/neg");
  EXPECT_EQ(m.graph().node(2).output(0), "a");
  EXPECT_EQ(m.graph().node(3).input(0), "a");
  EXPECT_EQ(m.graph().node(3).output(0), "Scaled2/act");
  EXPECT_EQ(m.graph().node(0).attribute(0).f(), -0.5f);
  EXPECT_EQ(m.graph().node(3).attribute_size(), 0) << "no alpha given, none by default";
}

TEST(OnnxFunctions, ADefaultOfTheFunctionFillsAMissingAttribute) {
  onnx::ModelProto m = model_with_functions();
  // FunctionProto.attribute_proto (field 11): alpha defaults to -2, written as the newer schema
  // writes it (kiln's ONNX 1.12 schema reads it as an unknown field).
  onnx::AttributeProto def;
  def.set_name("alpha");
  def.set_type(onnx::AttributeProto::FLOAT);
  def.set_f(-2.0f);
  onnx::FunctionProto* f = m.mutable_functions(0);
  f->GetReflection()->MutableUnknownFields(f)->AddLengthDelimited(11, def.SerializeAsString());
  const std::vector<float> x = {-2.0f, -0.25f, 0.5f, 4.0f};
  const std::vector<float> b = run_ref(m, x, 1);
  ASSERT_EQ(b.size(), 4u);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_FLOAT_EQ(b[i], scaled(scaled(x[i], -0.5f), -2.0f)) << i;
  }
}

TEST(OnnxFunctions, AFunctionThatCallsItselfIsNamed) {
  onnx::ModelProto m = model_with_functions();
  // Inner calls Scaled, which calls Inner.
  add_node(m.mutable_functions(1)->mutable_node(), "Scaled", {"Y"}, {"Z"}, "custom");
  auto model = import_onnx_bytes(bytes_of(m), {}, "loop.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("loop.onnx"), std::string::npos);
  EXPECT_NE(model.status().message().find("calls itself"), std::string::npos)
      << model.status().message();
}

TEST(OnnxFunctions, ACallWithMoreInputsThanDeclaredIsNamed) {
  onnx::ModelProto m = model_with_functions();
  m.mutable_graph()->mutable_node(0)->add_input("x");
  auto model = import_onnx_bytes(bytes_of(m), {}, "wide.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("node Scaled \"first\": has 2 inputs"), std::string::npos)
      << model.status().message();
}

}  // namespace
}  // namespace kiln::compiler
