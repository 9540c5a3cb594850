// SPDX-License-Identifier: Apache-2.0
// Tests for Tensor and TensorView: allocation, alignment, strings, sharing, copies and equality.
#include "core/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

// The absurd-size tests need malloc to report failure the way glibc does; by default the
// sanitizers' allocators abort the process instead.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
extern "C" const char* __tsan_default_options() {
  return "allocator_may_return_null=1";
}

namespace kiln {
namespace {

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kTensorAlignment == 0; }

TEST(Tensor, DefaultIsUndefined) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(t.dtype(), DType::kF32);
  EXPECT_EQ(t.rank(), 0);
  EXPECT_EQ(t.raw_data(), nullptr);
}

TEST(Tensor, AllocationIsAlignedForEveryDtypeAndSize) {
  const DType dtypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64,   DType::kI8,
                          DType::kU8,  DType::kI16, DType::kU16,  DType::kI32,   DType::kU32,
                          DType::kI64, DType::kU64, DType::kBool, DType::kString};
  // Keep the tensors alive together so that each allocation is a distinct block.
  std::vector<Tensor> keep;
  for (DType d : dtypes) {
    for (int64_t n : {0, 1, 3, 63, 64, 65, 1000, 4097}) {
      Result<Tensor> t = Tensor::allocate(d, Shape{n});
      ASSERT_TRUE(t.ok()) << t.status().to_string();
      EXPECT_TRUE(t->defined());
      EXPECT_NE(t->raw_data(), nullptr);
      EXPECT_TRUE(aligned(t->raw_data())) << dtype_name(d) << " n=" << n;
      EXPECT_EQ(t->numel(), n);
      EXPECT_EQ(t->nbytes(), static_cast<size_t>(n) * dtype_size(d));
      keep.push_back(std::move(t).value());
    }
  }
}

TEST(Tensor, StorageIsZeroInitialized) {
  // Dirty a block, free it, and allocate the same size again: malloc tends to hand it back.
  for (int round = 0; round < 3; ++round) {
    {
      Tensor dirty(DType::kU8, Shape{4096});
      std::memset(dirty.raw_data(), 0xab, dirty.nbytes());
    }
    Tensor t(DType::kU8, Shape{4096});
    for (uint8_t b : t.span<uint8_t>()) ASSERT_EQ(b, 0);
  }
  Tensor f(DType::kF32, Shape{3, 5});
  for (float v : f.span<float>()) EXPECT_EQ(v, 0.0f);
  Tensor h(DType::kF16, Shape{7});
  for (Half v : h.span<Half>()) EXPECT_EQ(v.bits, 0);
  Tensor b(DType::kBool, Shape{9});
  for (bool v : b.span<bool>()) EXPECT_FALSE(v);
}

TEST(Tensor, TypedAccessAndFactories) {
  Tensor s = Tensor::scalar(1.5f);
  EXPECT_EQ(s.dtype(), DType::kF32);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(*s.data<float>(), 1.5f);

  Tensor i = Tensor::scalar<int64_t>(-7);
  EXPECT_EQ(i.dtype(), DType::kI64);
  EXPECT_EQ(*i.data<int64_t>(), -7);

  Tensor v = Tensor::from_vector(std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  EXPECT_EQ(v.dtype(), DType::kI32);
  EXPECT_EQ(v.shape(), Shape{6});
  EXPECT_EQ(v.data<int32_t>()[5], 6);

  const std::vector<double> values = {1, 2, 3, 4, 5, 6};
  Tensor m = Tensor::from_vector<double>(values, Shape{2, 3});
  EXPECT_EQ(m.shape(), (Shape{2, 3}));
  EXPECT_EQ(m.span<double>()[4], 5.0);

  TensorView view = m.view();
  EXPECT_EQ(view.dtype(), DType::kF64);
  EXPECT_EQ(view.shape(), (Shape{2, 3}));
  EXPECT_EQ(view.raw_data(), m.raw_data());
  EXPECT_EQ(view.nbytes(), 48u);
  view.data<double>()[0] = 42;
  EXPECT_EQ(m.data<double>()[0], 42.0);  // a view aliases the tensor
}

TEST(Tensor, StringTensors) {
  Tensor t(DType::kString, Shape{2, 2});
  ASSERT_TRUE(aligned(t.raw_data()));
  for (const std::string& s : t.span<std::string>()) EXPECT_EQ(s, "");
  t.data<std::string>()[0] = "short";
  t.data<std::string>()[3] = std::string(1000, 'x');  // heap-allocated, must be freed
  EXPECT_EQ(t.span<std::string>()[3].size(), 1000u);

  Tensor scalar = Tensor::scalar(std::string("hello"));
  EXPECT_EQ(scalar.dtype(), DType::kString);
  EXPECT_EQ(*scalar.data<std::string>(), "hello");

  Tensor copy = t.clone();
  EXPECT_TRUE(copy.equals(t));
  copy.data<std::string>()[0] = "changed";
  EXPECT_EQ(t.data<std::string>()[0], "short");
  EXPECT_FALSE(copy.equals(t));

  Tensor empty(DType::kString, Shape{0});
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_TRUE(empty.clone().equals(empty));
}

TEST(Tensor, CopiesShareAndCloneIsIndependent) {
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4});
  Tensor shared = a;
  EXPECT_EQ(shared.raw_data(), a.raw_data());
  shared.data<float>()[0] = 10;
  EXPECT_EQ(a.data<float>()[0], 10.0f);

  Tensor deep = a.clone();
  EXPECT_NE(deep.raw_data(), a.raw_data());
  EXPECT_TRUE(aligned(deep.raw_data()));
  EXPECT_TRUE(deep.equals(a));
  deep.data<float>()[1] = -1;
  EXPECT_EQ(a.data<float>()[1], 2.0f);
  a.data<float>()[2] = 99;
  EXPECT_EQ(deep.data<float>()[2], 3.0f);
}

TEST(Tensor, UninitializedAllocationIsAlignedAndHoldsWhatIsWritten) {
  std::vector<Tensor> keep;
  for (DType d : {DType::kF32, DType::kU8, DType::kF64, DType::kString}) {
    for (int64_t n : {0, 1, 65, 4097}) {
      Result<Tensor> t = Tensor::allocate_uninitialized(d, Shape{n});
      ASSERT_TRUE(t.ok()) << t.status().to_string();
      EXPECT_TRUE(aligned(t->raw_data())) << dtype_name(d) << " n=" << n;
      EXPECT_EQ(t->nbytes(), static_cast<size_t>(n) * dtype_size(d));
      // BYTES elements are still constructed (empty strings); other dtypes are written by the
      // caller.
      if (d == DType::kString) {
        for (const std::string& s : t->span<std::string>()) EXPECT_TRUE(s.empty());
      } else if (n > 0) {
        std::memset(t->raw_data(), 0x5a, t->nbytes());
        EXPECT_EQ(static_cast<uint8_t*>(t->raw_data())[t->nbytes() - 1], 0x5a);
      }
      keep.push_back(std::move(t).value());
    }
  }
  Result<Tensor> huge = Tensor::allocate_uninitialized(DType::kF32, Shape{int64_t{1} << 62});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted);
}

TEST(Tensor, CloneOutlivesTheOriginal) {
  Tensor deep;
  {
    Tensor a = Tensor::from_vector(std::vector<int16_t>{5, 6, 7});
    deep = a.clone();
  }
  EXPECT_EQ(deep.span<int16_t>()[2], 7);
}

TEST(Tensor, ReshapedSharesStorage) {
  Tensor a = Tensor::from_vector(std::vector<int32_t>{0, 1, 2, 3, 4, 5});
  Tensor r = a.reshaped(Shape{2, 3});
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  EXPECT_EQ(a.shape(), Shape{6});
  EXPECT_EQ(r.raw_data(), a.raw_data());
  r.data<int32_t>()[4] = 40;
  EXPECT_EQ(a.data<int32_t>()[4], 40);
  Tensor back = r.reshaped(Shape{3, 1, 2});
  EXPECT_EQ(back.numel(), 6);
  Tensor survivor;
  {
    Tensor tmp = Tensor::from_vector(std::vector<int32_t>{9, 8});
    survivor = tmp.reshaped(Shape{1, 2});
  }
  EXPECT_EQ(survivor.data<int32_t>()[1], 8);  // the reshape keeps the storage alive
}

TEST(Tensor, Equals) {
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3});
  EXPECT_TRUE(a.equals(a.clone()));
  EXPECT_FALSE(a.equals(Tensor::from_vector(std::vector<float>{1, 2, 4})));
  EXPECT_FALSE(a.equals(Tensor::from_vector(std::vector<double>{1, 2, 3})));
  EXPECT_FALSE(a.equals(a.reshaped(Shape{3, 1})));
  EXPECT_FALSE(a.equals(Tensor::from_vector(std::vector<float>{1, 2})));

  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor n = Tensor::from_vector(std::vector<float>{nan});
  EXPECT_FALSE(n.equals(n));  // NaN != NaN

  Tensor z = Tensor::from_vector(std::vector<float>{0.0f});
  Tensor nz = Tensor::from_vector(std::vector<float>{-0.0f});
  EXPECT_TRUE(z.equals(nz));

  Tensor h1(DType::kF16, Shape{2});
  Tensor h2(DType::kF16, Shape{2});
  h1.data<Half>()[1] = Half(0.5f);
  EXPECT_FALSE(h1.equals(h2));
  h2.data<Half>()[1] = Half(0.5f);
  EXPECT_TRUE(h1.equals(h2));

  Tensor e1(DType::kI8, Shape{0, 3});
  Tensor e2(DType::kI8, Shape{0, 3});
  EXPECT_TRUE(e1.equals(e2));
}

TEST(Tensor, UndefinedTensorsCloneAndCompareWithoutCrashing) {
  Tensor undefined;
  Tensor copy = undefined.clone();
  EXPECT_FALSE(copy.defined());
  EXPECT_TRUE(undefined.equals(Tensor()));
  EXPECT_FALSE(undefined.equals(Tensor::scalar(0.0f)));
  EXPECT_FALSE(Tensor::scalar(0.0f).equals(undefined));
}

TEST(Tensor, WrapKeepsTheOwnerAlive) {
  auto buffer = std::make_shared<std::vector<uint16_t>>(std::vector<uint16_t>{1, 2, 3, 4});
  std::weak_ptr<std::vector<uint16_t>> watch = buffer;
  Tensor t = Tensor::wrap(DType::kU16, Shape{2, 2}, buffer->data(), buffer);
  buffer.reset();
  ASSERT_FALSE(watch.expired());
  EXPECT_EQ(t.data<uint16_t>()[3], 4);
  EXPECT_TRUE(t.defined());
  t = Tensor();
  EXPECT_TRUE(watch.expired());
}

TEST(Tensor, AllocateRejectsNegativeDims) {
  Result<Tensor> t = Tensor::allocate(DType::kF32, Shape{2, -3});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("[2,-3]"), std::string_view::npos);
}

TEST(Tensor, AllocateFailsCleanlyForAbsurdSizes) {
  // Element count overflows int64.
  Result<Tensor> overflow = Tensor::allocate(DType::kF32, Shape{1LL << 40, 1LL << 40});
  ASSERT_FALSE(overflow.ok());
  EXPECT_EQ(overflow.status().code(), StatusCode::kOutOfRange);

  // The count fits int64 but the byte size does not fit the address space arithmetic.
  Result<Tensor> bytes_overflow = Tensor::allocate(DType::kF64, Shape{1LL << 62});
  ASSERT_FALSE(bytes_overflow.ok());
  EXPECT_EQ(bytes_overflow.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(bytes_overflow.status().message().find("f64"), std::string_view::npos);

  // 256 TiB: a representable size that no x86-64 or arm64 user address space can hold.
  for (DType d : {DType::kU8, DType::kF32, DType::kString}) {
    Result<Tensor> huge = Tensor::allocate(d, Shape{1LL << 24, 1LL << 24});
    ASSERT_FALSE(huge.ok()) << dtype_name(d);
    EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted) << huge.status().to_string();
    EXPECT_NE(huge.status().message().find("[16777216,16777216]"), std::string_view::npos)
        << huge.status().message();
  }
}

TEST(TensorDeathTest, WrongElementTypeAborts) {
  Tensor t(DType::kF32, Shape{2});
  EXPECT_DEATH((void)t.data<int32_t>(), "wrong element type");
  EXPECT_DEATH((void)t.reshaped(Shape{3}), "element count differs");
}

}  // namespace
}  // namespace kiln
