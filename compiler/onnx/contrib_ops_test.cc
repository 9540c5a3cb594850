// SPDX-License-Identifier: Apache-2.0
// The com.microsoft and ai.onnx.ml ops kiln imports, checked against their formulas on ref.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>

#include "compiler/onnx/importer.h"
#include "compiler/ops/elementwise.h"
#include "compiler/targets/target.h"

namespace kiln::compiler {
namespace {

struct Attr {
  std::string name;
  std::variant<float, int64_t, std::string, std::vector<float>> value;
};

// One node of `domain`/`op` over f32 inputs of the given shapes, with `num_outputs` outputs.
onnx::ModelProto one_node(const std::string& domain, const std::string& op,
                          const std::vector<std::vector<int64_t>>& shapes,
                          std::vector<Attr> attrs = {}, int num_outputs = 1) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* d = m.add_opset_import();
  d->set_domain(domain);
  d->set_version(1);
  auto* g = m.mutable_graph();
  g->set_name(op);
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_domain(domain);
  n->set_name("n");
  for (size_t i = 0; i < shapes.size(); ++i) {
    auto* in = g->add_input();
    in->set_name("x" + std::to_string(i));
    auto* t = in->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t s : shapes[i]) t->mutable_shape()->add_dim()->set_dim_value(s);
    n->add_input(in->name());
  }
  for (int i = 0; i < num_outputs; ++i) {
    n->add_output("y" + std::to_string(i));
    g->add_output()->set_name("y" + std::to_string(i));
  }
  for (const Attr& a : attrs) {
    auto* p = n->add_attribute();
    p->set_name(a.name);
    if (auto* f = std::get_if<float>(&a.value)) {
      p->set_type(onnx::AttributeProto::FLOAT);
      p->set_f(*f);
    } else if (auto* i = std::get_if<int64_t>(&a.value)) {
      p->set_type(onnx::AttributeProto::INT);
      p->set_i(*i);
    } else if (auto* s = std::get_if<std::string>(&a.value)) {
      p->set_type(onnx::AttributeProto::STRING);
      p->set_s(*s);
    } else {
      p->set_type(onnx::AttributeProto::FLOATS);
      for (float v : std::get<std::vector<float>>(a.value)) p->add_floats(v);
    }
  }
  return m;
}

std::vector<std::vector<float>> run(const onnx::ModelProto& m, const std::vector<Tensor>& inputs) {
  std::string bytes = m.SerializeAsString();
  auto model =
      import_onnx_bytes(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  if (!model.ok()) return {};
  auto exe = compile(std::shared_ptr<Graph>(std::move((*model)->graph)), **make_target("ref"));
  EXPECT_TRUE(exe.ok()) << exe.status().to_string();
  std::vector<Argument> args(inputs.begin(), inputs.end());
  auto out = (*exe)->run(std::move(args));
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  std::vector<std::vector<float>> values;
  for (const Argument& a : *out) {
    auto span = a.tensor().span<float>();
    values.emplace_back(span.begin(), span.end());
  }
  return values;
}

const Tensor kX = Tensor::from_vector<float>({-2, -0.5f, 0, 0.25f, 1, 3});

TEST(ContribOps, GeluVariantsFollowTheirFormulas) {
  Tensor x = kX.reshaped(Shape{2, 3});
  auto gelu = run(one_node("com.microsoft", "Gelu", {{2, 3}}), {x})[0];
  auto fast = run(one_node("com.microsoft", "FastGelu", {{2, 3}}), {x})[0];
  auto quick = run(one_node("com.microsoft", "QuickGelu", {{2, 3}}, {{"alpha", 1.5f}}), {x})[0];
  Tensor b = Tensor::from_vector<float>({0.5f, -1, 2});
  auto bias = run(one_node("com.microsoft", "BiasGelu", {{2, 3}, {3}}), {x, b})[0];
  for (int i = 0; i < 6; ++i) {
    double v = kX.data<float>()[i];
    EXPECT_NEAR(gelu[i], 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))), 1e-5) << i;
    EXPECT_NEAR(fast[i], 0.5 * v * (1 + std::tanh(0.7978845608 * (v + 0.044715 * v * v * v))), 1e-5)
        << i;
    EXPECT_NEAR(quick[i], v / (1 + std::exp(-1.5 * v)), 1e-5) << i;
    double s = v + b.data<float>()[i % 3];
    EXPECT_NEAR(bias[i], 0.5 * s * (1 + std::erf(s / std::sqrt(2.0))), 1e-5) << i;
  }
}

// The op kinds of the imported graph's nodes, constants left out.
std::vector<std::string> imported_ops(const onnx::ModelProto& m) {
  std::string bytes = m.SerializeAsString();
  auto model =
      import_onnx_bytes(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  std::vector<std::string> kinds;
  if (!model.ok()) return kinds;
  for (const auto& node : (*model)->graph->nodes()) {
    if (node->kind() == OpKind::kConstant) continue;
    std::string kind(node->op().name());
    if (const auto* gelu = node->op().get_if<ops::Gelu>()) kind += "(" + gelu->approximate + ")";
    kinds.push_back(kind);
  }
  return kinds;
}

TEST(ContribOps, GeluVariantsImportAsTheGeluOp) {
  using V = std::vector<std::string>;
  EXPECT_EQ(imported_ops(one_node("com.microsoft", "Gelu", {{2, 3}})),
            (V{"Gelu(none)", "Identity"}));
  EXPECT_EQ(imported_ops(one_node("com.microsoft", "BiasGelu", {{2, 3}, {3}})),
            (V{"Add", "Gelu(none)", "Identity"}));
  EXPECT_EQ(imported_ops(one_node("com.microsoft", "FastGelu", {{2, 3}})),
            (V{"Gelu(tanh)", "Identity"}));
  EXPECT_EQ(imported_ops(one_node("com.microsoft", "FastGelu", {{2, 3}, {3}})),
            (V{"Add", "Gelu(tanh)", "Identity"}));
}

TEST(ContribOps, FusedMatMulTransposesAndScales) {
  Tensor a = kX.reshaped(Shape{3, 2});  // used as A^T: A is [2,3]
  Tensor b = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}).reshaped(Shape{3, 2});
  auto y = run(one_node("com.microsoft", "FusedMatMul", {{3, 2}, {3, 2}},
                        {{"transA", int64_t{1}}, {"alpha", 2.0f}}),
               {a, b})[0];
  ASSERT_EQ(y.size(), 4u);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      double acc = 0;
      for (int k = 0; k < 3; ++k) acc += a.data<float>()[k * 2 + i] * b.data<float>()[k * 2 + j];
      EXPECT_NEAR(y[i * 2 + j], 2 * acc, 1e-5);
    }
  }
}

TEST(ContribOps, SkipLayerNormalizationNormalizesTheSum) {
  Tensor x = kX.reshaped(Shape{1, 2, 3});
  Tensor skip = Tensor::from_vector<float>({1, 1, 1, -1, 0, 2}).reshaped(Shape{1, 2, 3});
  Tensor gamma = Tensor::from_vector<float>({1, 2, 0.5f});
  Tensor beta = Tensor::from_vector<float>({0, 1, -1});
  auto out = run(one_node("com.microsoft", "SkipLayerNormalization",
                          {{1, 2, 3}, {1, 2, 3}, {3}, {3}}, {{"epsilon", 1e-5f}}, 4),
                 {x, skip, gamma, beta});
  ASSERT_EQ(out.size(), 4u);
  for (int row = 0; row < 2; ++row) {
    double s[3], mean = 0, var = 0;
    for (int c = 0; c < 3; ++c)
      mean += (s[c] = x.data<float>()[row * 3 + c] + skip.data<float>()[row * 3 + c]) / 3;
    for (int c = 0; c < 3; ++c) var += (s[c] - mean) * (s[c] - mean) / 3;
    for (int c = 0; c < 3; ++c) {
      double want =
          (s[c] - mean) / std::sqrt(var + 1e-5) * gamma.data<float>()[c] + beta.data<float>()[c];
      EXPECT_NEAR(out[0][row * 3 + c], want, 1e-4);
      EXPECT_NEAR(out[3][row * 3 + c], s[c], 1e-6);
    }
  }
}

TEST(MlOps, BinarizerScalerNormalizer) {
  Tensor x = kX.reshaped(Shape{2, 3});
  auto bin = run(one_node("ai.onnx.ml", "Binarizer", {{2, 3}}, {{"threshold", 0.1f}}), {x})[0];
  auto scaled =
      run(one_node("ai.onnx.ml", "Scaler", {{2, 3}},
                   {{"offset", std::vector<float>{1, 2, 3}}, {"scale", std::vector<float>{2}}}),
          {x})[0];
  auto l2 =
      run(one_node("ai.onnx.ml", "Normalizer", {{2, 3}}, {{"norm", std::string("L2")}}), {x})[0];
  for (int i = 0; i < 6; ++i) {
    float v = kX.data<float>()[i];
    EXPECT_EQ(bin[i], v > 0.1f ? 1.0f : 0.0f) << i;
    EXPECT_NEAR(scaled[i], (v - (i % 3 + 1)) * 2, 1e-6) << i;
    int row = i / 3;
    double norm = 0;
    for (int c = 0; c < 3; ++c) norm += std::pow(kX.data<float>()[row * 3 + c], 2);
    EXPECT_NEAR(l2[i], v / std::sqrt(norm), 1e-6) << i;
  }
}

TEST(MlOps, LinearRegressorAndBadNorm) {
  Tensor x = kX.reshaped(Shape{2, 3});
  auto y = run(one_node("ai.onnx.ml", "LinearRegressor", {{2, 3}},
                        {{"coefficients", std::vector<float>{1, 0, -1, 0.5f, 0.5f, 0.5f}},
                         {"intercepts", std::vector<float>{10, -10}},
                         {"targets", int64_t{2}}}),
               {x})[0];
  ASSERT_EQ(y.size(), 4u);
  EXPECT_NEAR(y[0], -2 - 0 + 10, 1e-5);
  EXPECT_NEAR(y[1], 0.5 * (-2 - 0.5 + 0) - 10, 1e-5);
  std::string bytes = one_node("ai.onnx.ml", "Normalizer", {{2, 3}}, {{"norm", std::string("L7")}})
                          .SerializeAsString();
  auto bad =
      import_onnx_bytes(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("norm must be MAX, L1 or L2"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace kiln::compiler
