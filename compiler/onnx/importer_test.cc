// SPDX-License-Identifier: Apache-2.0
// Tests of ONNX import: good models, and the malformed ones a user can hand kiln.
#include "compiler/onnx/importer.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <tuple>

#include "compiler/ir/printer.h"
#include "compiler/onnx/tensor_proto.h"

namespace kiln::compiler {
namespace {

onnx::ValueInfoProto tensor_info(const std::string& name, int32_t elem, std::vector<int64_t> dims,
                                 const std::string& symbolic_first = "") {
  onnx::ValueInfoProto v;
  v.set_name(name);
  auto* t = v.mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  for (size_t i = 0; i < dims.size(); ++i) {
    auto* d = t->mutable_shape()->add_dim();
    if (i == 0 && !symbolic_first.empty()) {
      d->set_dim_param(symbolic_first);
    } else {
      d->set_dim_value(dims[i]);
    }
  }
  return v;
}

// x: f32[N,4] -> LeakyRelu "act" -> y
onnx::ModelProto leaky_relu_model(int64_t opset = 13) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  *g->add_input() = tensor_info("x", onnx::TensorProto::FLOAT, {0, 4}, "N");
  *g->add_output() = tensor_info("y", onnx::TensorProto::FLOAT, {0, 4}, "N");
  auto* n = g->add_node();
  n->set_op_type("LeakyRelu");
  n->set_name("act");
  n->add_input("x");
  n->add_output("y");
  auto* a = n->add_attribute();
  a->set_name("alpha");
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(0.25f);
  return m;
}

std::vector<uint8_t> bytes_of(const onnx::ModelProto& m) {
  std::string s = m.SerializeAsString();
  return {s.begin(), s.end()};
}

TEST(OnnxImport, KeepsNamesAndInfersTypes) {
  std::vector<uint8_t> bytes = bytes_of(leaky_relu_model());
  auto model = import_onnx_bytes(bytes);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_EQ((*model)->opset, 13);
  EXPECT_EQ(print_graph(*(*model)->graph),
            "graph g(%x: f32[N,4]) {\n"
            "  %y: f32[N,4] = LeakyRelu[alpha=0.25](%x)  # \"act\"\n"
            "  return %y\n"
            "}\n");
}

TEST(OnnxImport, InputShapesReplaceDynamicDims) {
  std::vector<uint8_t> bytes = bytes_of(leaky_relu_model());
  ImportOptions options;
  options.input_shapes["x"] = {8, 4};
  auto model = import_onnx_bytes(bytes, options);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_EQ((*model)->graph->outputs()[0]->type().to_string(), "f32[8,4]");

  options.input_shapes.clear();
  options.input_shapes["image"] = {1, 4};
  auto bad = import_onnx_bytes(bytes, options);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("input \"image\""), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("inputs are: x"), std::string::npos)
      << bad.status().message();
}

TEST(OnnxImport, TruncatedFileIsAClearError) {
  std::vector<uint8_t> bytes = bytes_of(leaky_relu_model());
  bytes.resize(bytes.size() / 2);
  auto model = import_onnx_bytes(bytes, {}, "half.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("half.onnx: not a valid ONNX model"), std::string::npos)
      << model.status().message();
}

TEST(OnnxImport, RandomBytesNeverCrash) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<uint8_t> bytes(static_cast<size_t>(rng() % 512));
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    auto model = import_onnx_bytes(bytes, {}, "noise.onnx");
    if (!model.ok()) {
      EXPECT_NE(model.status().message().find("noise.onnx"), std::string::npos);
    }
  }
  // Flipping bytes of a real model must not crash either.
  std::vector<uint8_t> good = bytes_of(leaky_relu_model());
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<uint8_t> bytes = good;
    bytes[rng() % bytes.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    auto model = import_onnx_bytes(bytes, {}, "flipped.onnx");
    (void)model;
  }
}

TEST(OnnxImport, UnknownOpNamesTheNodeAndOp) {
  onnx::ModelProto m = leaky_relu_model();
  m.mutable_graph()->mutable_node(0)->set_op_type("FancyActivation");
  m.mutable_graph()->mutable_node(0)->clear_attribute();
  auto model = import_onnx_bytes(bytes_of(m), {}, "m.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(model.status().message().find("node FancyActivation \"act\""), std::string::npos)
      << model.status().message();
  EXPECT_NE(model.status().message().find("not supported"), std::string::npos);
}

TEST(OnnxImport, UndefinedInputIsNamed) {
  onnx::ModelProto m = leaky_relu_model();
  m.mutable_graph()->mutable_node(0)->set_input(0, "missing");
  auto model = import_onnx_bytes(bytes_of(m), {}, "m.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("input \"missing\" is not defined"), std::string::npos)
      << model.status().message();
}

// Found by fuzz_onnx_import: importers of attribute-form ops (Squeeze-1..12 here) read input 0
// before the op's arity was checked, past the end of a node with no inputs.
TEST(OnnxImport, ANodeWithoutItsInputsIsAnErrorNotARead) {
  for (const char* op : {"Squeeze", "Unsqueeze", "Reshape", "Tile", "Pad", "Slice", "Split"}) {
    SCOPED_TRACE(op);
    onnx::ModelProto m = leaky_relu_model(11);
    onnx::NodeProto* n = m.mutable_graph()->mutable_node(0);
    n->set_op_type(op);
    n->clear_attribute();
    n->clear_input();
    auto model = import_onnx_bytes(bytes_of(m), {}, "m.onnx");
    ASSERT_FALSE(model.ok());
    EXPECT_NE(model.status().message().find("\"act\""), std::string::npos)
        << model.status().message();
  }
}

// Found by fuzz_onnx_import: Gemm read the dims of inputs whose rank is unknown (an input given
// without a shape).
TEST(OnnxImport, GemmOfUnrankedInputsMakesAMatrixOfUnknownDims) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("g");
  for (const char* name : {"a", "b"}) {
    auto* in = g->add_input();
    in->set_name(name);
    in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  *g->add_output() = tensor_info("y", onnx::TensorProto::FLOAT, {});
  g->mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  auto* n = g->add_node();
  n->set_op_type("Gemm");
  n->set_name("mm");
  n->add_input("a");
  n->add_input("b");
  n->add_output("y");
  auto model = import_onnx_bytes(bytes_of(m), {}, "m.onnx");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_EQ((*model)->graph->outputs()[0]->type().to_string(), "f32[?,?]");
}

TEST(OnnxImport, WrongAttributeTypeIsNamed) {
  onnx::ModelProto m = leaky_relu_model();
  auto* a = m.mutable_graph()->mutable_node(0)->mutable_attribute(0);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(1);
  auto model = import_onnx_bytes(bytes_of(m), {}, "m.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("attribute \"alpha\" must be a float"), std::string::npos)
      << model.status().message();
}

TEST(OnnxImport, KilnInternalFieldsAreNotOnnxAttributes) {
  onnx::ModelProto m = leaky_relu_model();
  auto* n = m.mutable_graph()->mutable_node(0);
  n->set_op_type("Conv");
  auto* a = n->mutable_attribute(0);
  a->set_name("activation");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("Relu");
  auto model = import_onnx_bytes(bytes_of(m), {}, "m.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("attribute \"activation\" is not supported"),
            std::string::npos)
      << model.status().message();
}

TEST(OnnxImport, TooNewOpsetSaysWhatToDo) {
  auto model = import_onnx_bytes(bytes_of(leaky_relu_model(99)), {}, "new.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("opset 99"), std::string::npos)
      << model.status().message();
}

TEST(OnnxImport, MissingFileIsNotFound) {
  auto model = import_onnx_file("/nonexistent/model.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kNotFound);
  EXPECT_NE(model.status().message().find("/nonexistent/model.onnx"), std::string::npos);
}

TEST(OnnxImport, ReadsInitializersFromExternalData) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kiln_external_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::vector<float> weights = {1.5f, -2.0f, 3.25f, 4.0f};
  {
    std::ofstream f(dir / "weights.bin", std::ios::binary);
    f.write("pad!", 4);
    f.write(reinterpret_cast<const char*>(weights.data()), sizeof(float) * weights.size());
  }
  onnx::ModelProto m = leaky_relu_model();
  auto* g = m.mutable_graph();
  g->mutable_node(0)->set_op_type("Add");
  g->mutable_node(0)->clear_attribute();
  g->mutable_node(0)->add_input("w");
  auto* init = g->add_initializer();
  init->set_name("w");
  init->set_data_type(onnx::TensorProto::FLOAT);
  init->add_dims(4);
  init->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add_kv = [&](const char* k, const char* v) {
    auto* kv = init->add_external_data();
    kv->set_key(k);
    kv->set_value(v);
  };
  add_kv("location", "weights.bin");
  add_kv("offset", "4");
  add_kv("length", "16");
  {
    std::ofstream f(dir / "model.onnx", std::ios::binary);
    f << m.SerializeAsString();
  }
  auto model = import_onnx_file((dir / "model.onnx").string());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const Tensor* w = nullptr;
  for (const auto& node : (*model)->graph->nodes()) {
    if (node->output(0)->name() == "w") w = node->output(0)->constant_value();
  }
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(w->numel(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(w->data<float>()[i], weights[static_cast<size_t>(i)]);

  add_kv("length", "64");  // a later key wins: now past the end of the file
  {
    std::ofstream f(dir / "model.onnx", std::ios::binary);
    f << m.SerializeAsString();
  }
  auto bad = import_onnx_file((dir / "model.onnx").string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("weights.bin"), std::string::npos)
      << bad.status().message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::compiler

namespace kiln::compiler {
namespace {

TEST(OnnxImport, SymbolicBatchDimSurvivesFlattenAndGemm) {
  auto model = import_onnx_file(KILN_SOURCE_DIR "/examples/models/tiny_cnn.onnx");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_EQ((*model)->graph->outputs()[0]->type().to_string(), "f32[batch,10]");
}

}  // namespace
}  // namespace kiln::compiler

namespace kiln::compiler {
namespace {

// x: f32[2,3] -> nodes given as (op, name, inputs, output), in file order -> y.
onnx::ModelProto chain_model(
    const std::vector<std::tuple<std::string, std::string, std::vector<std::string>, std::string>>&
        nodes) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("g");
  *g->add_input() = tensor_info("x", onnx::TensorProto::FLOAT, {2, 3});
  *g->add_output() = tensor_info("y", onnx::TensorProto::FLOAT, {2, 3});
  for (const auto& [op, name, inputs, output] : nodes) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const std::string& in : inputs) n->add_input(in);
    n->add_output(output);
    if (op == "Cast") {
      auto* a = n->add_attribute();
      a->set_name("to");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(output == "y" ? onnx::TensorProto::FLOAT : onnx::TensorProto::FLOAT16);
    }
  }
  return m;
}

std::vector<std::string> node_names(const Graph& g) {
  std::vector<std::string> names;
  for (const auto& node : g.nodes()) names.push_back(node->name());
  return names;
}

TEST(OnnxImport, NodesOutOfOrderAreSorted) {
  // onnxconverter-common's float16 conversion appends the Cast of each graph input last.
  onnx::ModelProto m = chain_model({{"Relu", "relu", {"graph_input_cast_0"}, "r"},
                                    {"Cast", "graph_output_cast0", {"r"}, "y"},
                                    {"Cast", "graph_input_cast0", {"x"}, "graph_input_cast_0"}});
  auto model = import_onnx_bytes(bytes_of(m), {}, "fp16.onnx");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_EQ(node_names(*(*model)->graph),
            (std::vector<std::string>{"graph_input_cast0", "relu", "graph_output_cast0"}));
  EXPECT_EQ((*model)->graph->outputs()[0]->type().to_string(), "f32[2,3]");
}

TEST(OnnxImport, AnOrderedGraphKeepsItsOrder) {
  // Independent nodes stay in file order, even where another order would also do.
  onnx::ModelProto m = chain_model(
      {{"Neg", "b", {"x"}, "nb"}, {"Abs", "a", {"x"}, "na"}, {"Add", "sum", {"na", "nb"}, "y"}});
  auto model = import_onnx_bytes(bytes_of(m), {}, "m.onnx");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_EQ(node_names(*(*model)->graph), (std::vector<std::string>{"b", "a", "sum"}));
}

TEST(OnnxImport, ACycleIsNamed) {
  onnx::ModelProto m = chain_model({{"Relu", "first", {"second_out"}, "first_out"},
                                    {"Neg", "second", {"first_out"}, "second_out"},
                                    {"Abs", "last", {"first_out"}, "y"}});
  auto model = import_onnx_bytes(bytes_of(m), {}, "cycle.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("node Relu \"first\": the graph has a cycle"),
            std::string::npos)
      << model.status().message();
  EXPECT_NE(model.status().message().find("cycle.onnx"), std::string::npos);
}

TEST(OnnxImport, AnUndefinedInputOfAnUnorderedGraphIsNamed) {
  onnx::ModelProto m =
      chain_model({{"Add", "sum", {"r", "nowhere"}, "y"}, {"Relu", "relu", {"x"}, "r"}});
  auto model = import_onnx_bytes(bytes_of(m), {}, "m.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("node Add \"sum\": input \"nowhere\" is not defined"),
            std::string::npos)
      << model.status().message();
}

TEST(OnnxImport, ASubgraphReadingALaterNodeIsSortedAfterIt) {
  // The If's branches read "late", which the file defines after the If.
  onnx::ModelProto m =
      chain_model({{"Identity", "out", {"branched"}, "y"}, {"Relu", "late", {"x"}, "late"}});
  auto* g = m.mutable_graph();
  auto* cond = g->add_initializer();
  cond->set_name("cond");
  cond->set_data_type(onnx::TensorProto::BOOL);
  cond->add_int32_data(1);
  onnx::NodeProto* n = g->mutable_node()->Add();
  g->mutable_node()->SwapElements(1, 2);  // [out, If, late]
  n = g->mutable_node(1);
  n->set_op_type("If");
  n->set_name("if");
  n->add_input("cond");
  n->add_output("branched");
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* a = n->add_attribute();
    a->set_name(branch);
    a->set_type(onnx::AttributeProto::GRAPH);
    a->mutable_g()->set_name(branch);
    auto* inner = a->mutable_g()->add_node();
    inner->set_op_type(std::string(branch) == "then_branch" ? "Neg" : "Abs");
    inner->add_input("late");
    inner->add_output(std::string(branch) + "_out");
    a->mutable_g()->add_output()->set_name(std::string(branch) + "_out");
  }
  auto model = import_onnx_bytes(bytes_of(m), {}, "m.onnx");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_EQ(node_names(*(*model)->graph), (std::vector<std::string>{"cond", "late", "if", "out"}));
}

}  // namespace
}  // namespace kiln::compiler
