// SPDX-License-Identifier: Apache-2.0
// The standard pass pipeline on real models: deterministic (same model, same IR), verified, and
// value-preserving.
#include <gtest/gtest.h>

#include "compiler/ir/printer.h"
#include "compiler/ir/verifier.h"
#include "compiler/onnx/importer.h"
#include "compiler/passes/passes.h"
#include "compiler/targets/target.h"

namespace kiln::compiler {
namespace {

const char* kModels[] = {
    KILN_SOURCE_DIR "/examples/models/tiny_cnn.onnx",
    "/usr/share/libonnx-testdata/data/pytorch-converted/test_BatchNorm2d_eval/model.onnx",
    "/usr/share/libonnx-testdata/data/node/test_lstm_with_peepholes/model.onnx",
    "/usr/share/libonnx-testdata/data/node/test_range_float_type_positive_delta_expanded/"
    "model.onnx",
};

std::string optimized_ir(const std::string& path) {
  ImportOptions options;
  if (path.find("tiny_cnn") != std::string::npos) options.input_shapes["image"] = {2, 1, 28, 28};
  auto model = import_onnx_file(path, options);
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  if (!model.ok()) return "";
  PassManager pm(standard_passes());
  pm.set_verify(true);
  Status s = pm.run(*(*model)->graph);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return print_graph(*(*model)->graph);
}

TEST(StandardPasses, SameModelGivesTheSameIr) {
  for (const char* path : kModels) {
    std::string first = optimized_ir(path);
    EXPECT_FALSE(first.empty()) << path;
    EXPECT_EQ(first, optimized_ir(path)) << path;
  }
}

TEST(StandardPasses, OptimizedTinyCnnComputesTheSameValues) {
  auto run = [](bool optimize) {
    ImportOptions options;
    options.input_shapes["image"] = {2, 1, 28, 28};
    auto model = import_onnx_file(KILN_SOURCE_DIR "/examples/models/tiny_cnn.onnx", options);
    EXPECT_TRUE(model.ok());
    CompileOptions compile_options;
    compile_options.optimize = optimize;
    auto exe = compile(std::shared_ptr<Graph>(std::move((*model)->graph)), **make_target("ref"),
                       compile_options);
    EXPECT_TRUE(exe.ok()) << exe.status().to_string();
    Tensor x(DType::kF32, Shape{2, 1, 28, 28});
    for (int64_t i = 0; i < x.numel(); ++i)
      x.data<float>()[i] = static_cast<float>((i * 37) % 101) / 101.0f;
    auto out = (*exe)->run({Argument(x)});
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    return (*out)[0].tensor().clone();
  };
  Tensor plain = run(false);
  Tensor optimized = run(true);
  ASSERT_EQ(plain.shape(), optimized.shape());
  for (int64_t i = 0; i < plain.numel(); ++i) {
    EXPECT_NEAR(plain.data<float>()[i], optimized.data<float>()[i], 1e-6) << i;
  }
}

}  // namespace
}  // namespace kiln::compiler
