// SPDX-License-Identifier: Apache-2.0
// Tests of GroupNormalization: the ref kernel against its formula, and opset 18's per-group scale
// and bias imported as per-channel ones.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <string>
#include <vector>

#include "compiler/onnx/importer.h"
#include "compiler/ops/all_ops.h"
#include "compiler/targets/ref/interpreter.h"

namespace kiln::compiler {
namespace {

// A GroupNormalization node "n" over X [2, 4, 3] with scale and bias of `param_size` values.
onnx::ModelProto group_norm_model(int64_t opset, int64_t param_size, int64_t groups) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto input = [&](const std::string& name, std::vector<int64_t> dims) {
    auto* v = g->add_input();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  input("x", {2, 4, 3});
  input("scale", {param_size});
  input("bias", {param_size});
  g->add_output()->set_name("y");
  auto* n = g->add_node();
  n->set_op_type("GroupNormalization");
  n->set_name("n");
  for (const char* in : {"x", "scale", "bias"}) n->add_input(in);
  n->add_output("y");
  auto* a = n->add_attribute();
  a->set_name("num_groups");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(groups);
  return m;
}

Result<std::vector<float>> import_and_run(const onnx::ModelProto& m, std::vector<Tensor> inputs) {
  std::string s = m.SerializeAsString();
  std::vector<uint8_t> bytes(s.begin(), s.end());
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                        import_onnx_bytes(bytes, ImportOptions{}, "m.onnx"));
  ref::Interpreter interpreter;
  std::vector<Argument> args(inputs.begin(), inputs.end());
  KILN_ASSIGN_OR_RETURN(std::vector<Argument> out, interpreter.run(*model->graph, std::move(args)));
  const Tensor& y = out[0].tensor();
  return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
}

// y = (x - mean) / sqrt(var + eps) * scale[c] + bias[c], statistics over each group's channels.
std::vector<float> expected_group_norm(const std::vector<float>& x, int64_t groups,
                                       const std::vector<float>& scale,
                                       const std::vector<float>& bias) {
  const int64_t channels = 4, plane = 3, per_group = channels / groups;
  std::vector<float> y(x.size());
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t base = (n * channels + g * per_group) * plane, count = per_group * plane;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < count; ++i) mean += x[static_cast<size_t>(base + i)];
      mean /= static_cast<double>(count);
      for (int64_t i = 0; i < count; ++i) {
        var += std::pow(x[static_cast<size_t>(base + i)] - mean, 2);
      }
      var /= static_cast<double>(count);
      for (int64_t i = 0; i < count; ++i) {
        const auto c = static_cast<size_t>(g * per_group + i / plane);
        const auto at = static_cast<size_t>(base + i);
        y[at] = static_cast<float>((x[at] - mean) / std::sqrt(var + 1e-5) * scale[c] + bias[c]);
      }
    }
  }
  return y;
}

std::vector<float> sample_x() {
  std::vector<float> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 1.7f) * 3.0f;
  return x;
}

TEST(GroupNormalizationRef, NormalizesEachGroupAndScalesEachChannel) {
  const std::vector<float> x = sample_x();
  const std::vector<float> scale = {1, 2, -1, 0.5f}, bias = {0, 1, -2, 3};
  Result<std::vector<float>> y = import_and_run(
      group_norm_model(21, 4, 2), {Tensor::from_vector(x).reshaped(Shape{2, 4, 3}),
                                   Tensor::from_vector(scale), Tensor::from_vector(bias)});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const std::vector<float> want = expected_group_norm(x, 2, scale, bias);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR((*y)[i], want[i], 1e-5f) << i;
}

TEST(GroupNormalizationImport, Opset18ScalesPerGroup) {
  const std::vector<float> x = sample_x();
  Result<std::vector<float>> y =
      import_and_run(group_norm_model(18, 2, 2),
                     {Tensor::from_vector(x).reshaped(Shape{2, 4, 3}),
                      Tensor::from_vector<float>({2, -1}), Tensor::from_vector<float>({0.5f, 4})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const std::vector<float> want = expected_group_norm(x, 2, {2, 2, -1, -1}, {0.5f, 0.5f, 4, 4});
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR((*y)[i], want[i], 1e-5f) << i;
}

TEST(GroupNormalizationInfer, ChannelsMustSplitIntoTheGroups) {
  Result<std::vector<float>> y = import_and_run(
      group_norm_model(21, 4, 3), {Tensor(DType::kF32, Shape{2, 4, 3}),
                                   Tensor(DType::kF32, Shape{4}), Tensor(DType::kF32, Shape{4})});
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("do not split into 3 groups"), std::string::npos)
      << y.status().to_string();
}

}  // namespace
}  // namespace kiln::compiler
