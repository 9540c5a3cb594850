// SPDX-License-Identifier: Apache-2.0
// Tests uninitialized allocation and the buffer pool's reuse and lifetime rules.
#include "pipeline/kernels/buffer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::pipeline::kernels {
namespace {

TEST(BufferTest, UninitializedTensorsAreAlignedAndWritable) {
  auto t = allocate_uninitialized(DType::kF32, Shape{3, 5, 7});
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->raw_data()) % 64, 0u);
  for (float& v : t->span<float>()) v = 1.5f;
  EXPECT_EQ(t->data<float>()[104], 1.5f);
  auto huge = allocate_uninitialized(DType::kF32, Shape{int64_t{1} << 40, int64_t{1} << 22});
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(huge.status().message(), ::testing::HasSubstr("too large"));
}

TEST(BufferTest, PoolReusesReleasedBuffersOfTheSameSize) {
  auto pool = BufferPool::create(2);
  void* first = nullptr;
  {
    auto a = pool->allocate(DType::kU8, Shape{32, 224, 224, 3});
    ASSERT_TRUE(a.ok());
    first = a->raw_data();
    Tensor view = *a;  // a copy keeps the storage alive
    a = Result<Tensor>(Tensor());
    EXPECT_EQ(pool->cached(), 0u);
  }
  EXPECT_EQ(pool->cached(), 1u);
  auto b = pool->allocate(DType::kU8, Shape{32, 224, 224, 3});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->raw_data(), first);
  EXPECT_EQ(pool->cached(), 0u);
  auto other = pool->allocate(DType::kF32, Shape{7});
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->raw_data(), first);
  // At most two idle buffers are kept.
  {
    std::vector<Tensor> many;
    for (int i = 0; i < 4; ++i) many.push_back(*pool->allocate(DType::kU8, Shape{100}));
  }
  EXPECT_EQ(pool->cached(), 2u);
}

TEST(BufferTest, TensorsMayOutliveThePool) {
  Tensor kept;
  {
    auto pool = BufferPool::create(4);
    kept = *pool->allocate(DType::kI32, Shape{10});
    kept.data<int32_t>()[9] = 42;
  }
  EXPECT_EQ(kept.data<int32_t>()[9], 42);
}

}  // namespace
}  // namespace kiln::pipeline::kernels
