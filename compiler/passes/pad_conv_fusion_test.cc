// SPDX-License-Identifier: Apache-2.0
// Pad-Conv fusion: tf2onnx's bottom-right zero Pad before a strided Conv becomes the Conv's pads;
// Pads that are not zeros of the spatial dims, or that something else reads, stay.
#include "compiler/passes/pass_test_util.h"

namespace kiln::compiler {
namespace {

using testing::f32;

// y = Conv(Pad(x, pads, value), w) with the Conv's own pads `conv_pads`.
void build(Graph& g, std::vector<int64_t> pads, float value, std::vector<int64_t> conv_pads,
           bool pad_is_output = false) {
  GraphBuilder b(g);
  Value* x = b.input("x", f32({1, 2, 5, 5}));
  Value* p = b.add(Op(ops::Pad{}),
                   {x, b.constant(Tensor::from_vector(pads), "pads"),
                    b.constant(Tensor::scalar(value), "value")},
                   "pad");
  ops::Conv conv;
  conv.strides = std::vector<int64_t>{2, 2};
  conv.pads = conv_pads;
  b.output(
      b.add(Op(conv), {p, b.constant(testing::random_tensor(Shape{2, 2, 3, 3}, 1), "w")}, "conv"));
  if (pad_is_output) b.output(p);
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
}

TEST(PadConvFusion, AZeroPadOfTheSpatialDimsBecomesTheConvsPads) {
  Graph g("same");
  build(g, {0, 0, 0, 0, 0, 0, 1, 1}, 0.0f, {1, 0, 0, 0});
  auto pass = make_pad_conv_fusion();
  EXPECT_TRUE(testing::expect_rewrite(
      g, *pass,
      "graph same(%x: f32[1,2,5,5]) {\n"
      "  %pads: i64[8] = Constant[value=i64[8]{0,0,0,0,0,0,1,1}]()  # \"pads\"\n"
      "  %value: f32[] = Constant[value=f32[]{0}]()  # \"value\"\n"
      "  %pad: f32[1,2,6,6] = Pad[mode=\"constant\"](%x, %pads, %value)  # \"pad\"\n"
      "  %w: f32[2,2,3,3] = Constant[value=f32[2,2,3,3]]()  # \"w\"\n"
      "  %conv: f32[1,2,3,2] = Conv[auto_pad=\"NOTSET\", group=1, pads=[1,0,0,0], "
      "strides=[2,2]](%pad, %w)  # \"conv\"\n"
      "  return %conv\n"
      "}\n",
      "graph same(%x: f32[1,2,5,5]) {\n"
      "  %w: f32[2,2,3,3] = Constant[value=f32[2,2,3,3]]()  # \"w\"\n"
      "  %conv: f32[1,2,3,2] = Conv[auto_pad=\"NOTSET\", group=1, pads=[1,0,1,1], "
      "strides=[2,2]](%x, %w)  # \"conv\"\n"
      "  return %conv\n"
      "}\n"));
}

TEST(PadConvFusion, LeavesOtherPads) {
  struct Case {
    const char* what;
    std::vector<int64_t> pads;
    float value;
    bool pad_is_output;
  };
  for (const Case& c : {Case{"a nonzero value", {0, 0, 0, 0, 0, 0, 1, 1}, 1.0f, false},
                        Case{"the batch", {1, 0, 0, 0, 0, 0, 0, 0}, 0.0f, false},
                        Case{"a crop", {0, 0, 0, 0, 0, 0, -1, 0}, 0.0f, false},
                        Case{"another reader", {0, 0, 1, 1, 0, 0, 1, 1}, 0.0f, true}}) {
    SCOPED_TRACE(c.what);
    Graph g("other");
    build(g, c.pads, c.value, {0, 0, 0, 0}, c.pad_is_output);
    Result<bool> changed = make_pad_conv_fusion()->run(g);
    ASSERT_TRUE(changed.ok());
    EXPECT_FALSE(*changed);
  }
}

}  // namespace
}  // namespace kiln::compiler
