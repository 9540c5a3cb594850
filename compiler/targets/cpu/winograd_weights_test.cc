// SPDX-License-Identifier: Apache-2.0
// pack_winograd() against oneDNN's own reorder: the same floats in every wino layout it handles.
#include "compiler/targets/cpu/winograd_weights.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "compiler/targets/cpu/onednn.h"

namespace kiln::compiler::cpu {
namespace {

using memory = dnnl::memory;

std::vector<float> random_weights(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> w(n);
  for (float& v : w) v = dist(rng);
  return w;
}

// `plain` (dims [oc, ic, 3, 3]) packed by oneDNN's reorder and by pack_winograd(): the same floats.
void expect_same_as_onednn(const memory::desc& plain, const memory::desc& wino, uint32_t seed) {
  ASSERT_TRUE(can_pack_winograd(plain, wino));
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  std::vector<float> src = random_weights(plain.get_size() / sizeof(float), seed);
  memory from(plain, engine, src.data());
  memory want(wino, engine);
  std::memset(want.get_data_handle(), 0x7f, wino.get_size());
  dnnl::stream stream(engine);
  dnnl::reorder(from, want).execute(stream, from, want);
  stream.wait();
  std::vector<float> got(wino.get_size() / sizeof(float), -1.0f);
  pack_winograd(plain, src.data(), wino, got.data());
  const auto* expected = static_cast<const float*>(want.get_data_handle());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], expected[i]) << "float " << i;
}

// A wino desc of F(2x2, 3x3) f32 weights (F(4x4, 3x3) for OBaaIBOIio), as a convolution would ask
// for it.
memory::desc wino_desc(dnnl_wino_memory_format_t format, int oc, int ic, int padded_oc,
                       int padded_ic, int oc2_block, int ic2_block = 1) {
  dnnl_memory_desc_t md{};
  md.ndims = 4;
  const dnnl_dim_t dims[4] = {oc, ic, 3, 3};
  for (int i = 0; i < 4; ++i) md.dims[i] = md.padded_dims[i] = dims[i];
  md.data_type = dnnl_f32;
  md.format_kind = dnnl_format_kind_wino;
  dnnl_wino_desc_t& w = md.format_desc.wino_desc;
  const int alpha = format == dnnl_wino_wei_OBaaIBOIio ? 6 : 4;
  w.wino_format = format;
  w.r = 3;
  w.alpha = alpha;
  w.oc = padded_oc;
  w.ic = padded_ic;
  w.oc_block = 16;
  w.ic_block = 16;
  w.ic2_block = ic2_block;
  w.oc2_block = oc2_block;
  w.adj_scale = 1.0f;
  w.size = static_cast<size_t>(alpha * alpha) * padded_oc * padded_ic * sizeof(float);
  return memory::desc(md);
}

TEST(WinogradWeights, EveryLayoutMatchesOneDnnsReorderPaddingIncluded) {
  uint32_t seed = 1;
  for (dnnl_wino_memory_format_t format :
       {dnnl_wino_wei_aaOIoi, dnnl_wino_wei_aaOio, dnnl_wino_wei_aaOBiOo}) {
    SCOPED_TRACE(static_cast<int>(format));
    expect_same_as_onednn(plain_desc(memory::dims{64, 64, 3, 3}),
                          wino_desc(format, 64, 64, 64, 64, 2), seed++);
    expect_same_as_onednn(plain_desc(memory::dims{40, 24, 3, 3}),
                          wino_desc(format, 40, 24, 64, 32, 2), seed++);
  }
  // F(4x4, 3x3): products by G's irrational entries, rounded as oneDNN rounds them.
  expect_same_as_onednn(plain_desc(memory::dims{64, 32, 3, 3}),
                        wino_desc(dnnl_wino_wei_OBaaIBOIio, 64, 32, 64, 32, 2, 2), seed++);
  expect_same_as_onednn(plain_desc(memory::dims{40, 24, 3, 3}),
                        wino_desc(dnnl_wino_wei_OBaaIBOIio, 40, 24, 64, 64, 2, 2), seed++);
  expect_same_as_onednn(plain_desc(memory::dims{96, 48, 3, 3}),
                        wino_desc(dnnl_wino_wei_OBaaIBOIio, 96, 48, 96, 48, 3, 1), seed++);
}

TEST(WinogradWeights, AWinogradConvolutionsWeightsMatchOneDnnsReorder) {
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  // Batch 1 runs F(2x2, 3x3), batch 16 F(4x4, 3x3) (SqueezeNet's and DenseNet's shapes).
  struct Shape {
    memory::dim batch, c, hw;
  };
  for (const auto& [batch, c, hw] :
       {Shape{1, 64, 14}, Shape{1, 128, 7}, Shape{16, 32, 27}, Shape{16, 128, 14}}) {
    const memory::desc src({batch, c, hw, hw}, memory::data_type::f32, memory::format_tag::nChw16c);
    const memory::desc dst = src;
    const memory::desc weights({c, c, 3, 3}, memory::data_type::f32, memory::format_tag::any);
    dnnl::convolution_forward::primitive_desc pd;
    try {
      pd = dnnl::convolution_forward::primitive_desc(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                          dnnl::algorithm::convolution_winograd, src, weights, dst,
                                          {1, 1}, {1, 1}, {1, 1}),
          engine);
    } catch (const dnnl::error&) {
      GTEST_SKIP() << "oneDNN has no Winograd convolution on this CPU";
    }
    SCOPED_TRACE(pd.impl_info_str());
    expect_same_as_onednn(plain_desc(memory::dims{c, c, 3, 3}), pd.weights_desc(),
                          static_cast<uint32_t>(c + batch));
  }
}

TEST(WinogradWeights, OtherLayoutsAreNotItsToPack) {
  const memory::desc plain = plain_desc(memory::dims{64, 64, 3, 3});
  const memory::desc blocked({64, 64, 3, 3}, memory::data_type::f32,
                             memory::format_tag::OIhw16i16o);
  EXPECT_FALSE(can_pack_winograd(plain, blocked));
  EXPECT_FALSE(can_pack_winograd(blocked, wino_desc(dnnl_wino_wei_aaOio, 64, 64, 64, 64, 1)));
  EXPECT_FALSE(can_pack_winograd(plain_desc(memory::dims{64, 64, 5, 5}),
                                 wino_desc(dnnl_wino_wei_aaOio, 64, 64, 64, 64, 1)));
}

}  // namespace
}  // namespace kiln::compiler::cpu
