// SPDX-License-Identifier: Apache-2.0
// Tests for .npy reading and writing against files numpy writes and reads (core/testdata).
#include "core/npy.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numbers>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/mapped_file.h"

namespace kiln {
namespace {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents at the end of the test.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/kiln_npy_test.XXXXXX";
    KILN_CHECK(::mkdtemp(pattern.data()) != nullptr, "mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

// Runs core/testdata/npy_fixture.py in `mode` ("write" or "check") on `dir`; returns its exit code.
int run_fixture(std::string_view mode, const std::string& dir) {
  const char* env = env_flag_c_str(EnvFlag::kPython);
  const std::string python = env && *env ? env : "/usr/bin/python3";
  const std::string command = fmt::format(
      "'{}' '{}' {} '{}'", python, KILN_SOURCE_DIR "/core/testdata/npy_fixture.py", mode, dir);
  const int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

template <class T>
Tensor make(std::vector<T> values, Shape shape) {
  return Tensor::from_vector<T>(std::span<const T>(values), std::move(shape));
}

// Half and BFloat16 tensors from raw bits, so that expectations are exact.
template <class T>
Tensor from_bits(std::vector<uint16_t> bits, Shape shape) {
  std::vector<T> values;
  for (uint16_t b : bits) values.push_back(T::from_bits(b));
  return make<T>(std::move(values), std::move(shape));
}

Tensor make_bool(std::vector<uint8_t> values, Shape shape) {
  Tensor t(DType::kBool, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.data<bool>()[i] = values[i] != 0;
  return t;
}

struct Case {
  std::string name;
  Tensor tensor;
};

// The values core/testdata/npy_fixture.py writes (its CASES table), in C order.
std::vector<Case> expected_cases() {
  std::vector<int32_t> iota24(24);
  std::iota(iota24.begin(), iota24.end(), 0);
  return {
      {"f16", from_bits<Half>({0x3c00, 0xc100, 0x7bff, 0x0001, 0x2e66, 0x8000}, Shape{2, 3})},
      {"f32", make<float>({0.0f, 1.5f, -2.25f, std::numeric_limits<float>::max(),
                           std::numeric_limits<float>::denorm_min(),
                           std::numeric_limits<float>::infinity()},
                          Shape{3, 2})},
      {"f64",
       make<double>({0.1, -1e300, std::numeric_limits<double>::denorm_min(), std::numbers::pi},
                    Shape{4})},
      {"i8", make<int8_t>({-128, -1, 0, 1, 127}, Shape{5})},
      {"u8", make<uint8_t>({0, 36, 72, 108, 144, 180, 216, 252}, Shape{2, 2, 2})},
      {"i16", make<int16_t>({-32768, -2, 0, 300, 32767}, Shape{5})},
      {"u16", make<uint16_t>({0, 1, 255, 256, 65535}, Shape{5})},
      {"i32", make<int32_t>({std::numeric_limits<int32_t>::min(), -7, 0, 123456789,
                             std::numeric_limits<int32_t>::max()},
                            Shape{5})},
      {"u32", make<uint32_t>({0, 1, 4294967295u, 3000000000u}, Shape{4})},
      {"i64", make<int64_t>({std::numeric_limits<int64_t>::min(), -1, 0, 1234567890123456789,
                             std::numeric_limits<int64_t>::max()},
                            Shape{5})},
      {"u64", make<uint64_t>({0, 1, std::numeric_limits<uint64_t>::max(), 1ULL << 63}, Shape{4})},
      {"bool", make_bool({1, 0, 0, 1, 1}, Shape{5})},
      {"bf16", from_bits<BFloat16>({0x3f80, 0xc000, 0x4049, 0x7f80, 0x0001, 0x7fc0}, Shape{2, 3})},
      {"fortran_i32", make<int32_t>(iota24, Shape{2, 3, 4})},
      {"fortran_f64", make<double>({1, 2, 3, 4, 5, 6}, Shape{2, 3})},
      {"big_endian_f32", make<float>({0, 1.25f, 2.5f, 3.75f, 5, 6.25f}, Shape{2, 3})},
      {"big_endian_i64", make<int64_t>({1, -2, 0x0102030405060708}, Shape{3})},
      {"big_endian_f16", from_bits<Half>({0x3c00, 0xfbff}, Shape{2})},
      {"scalar_f64", Tensor::scalar(3.5)},
      {"empty_f32", Tensor(DType::kF32, Shape{3, 0, 2})},
      {"version2_u16", make<uint16_t>({7, 8, 9, 10}, Shape{2, 2})},
      {"version3_i8", make<int8_t>({-5, 5}, Shape{2})},
  };
}

// Same dtype, same shape and the same bytes (so -0.0, NaN payloads and bf16 bits all count).
::testing::AssertionResult same_tensor(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype()) {
    return ::testing::AssertionFailure()
           << "dtype " << dtype_name(got.dtype()) << ", expected " << dtype_name(want.dtype());
  }
  if (!(got.shape() == want.shape())) {
    return ::testing::AssertionFailure()
           << "shape " << got.shape().to_string() << ", expected " << want.shape().to_string();
  }
  if (want.nbytes() > 0 && std::memcmp(got.raw_data(), want.raw_data(), want.nbytes()) != 0) {
    return ::testing::AssertionFailure() << "the element bytes differ";
  }
  return ::testing::AssertionSuccess();
}

// The fixtures cover every dtype numpy has: all but string and the narrow types (which encode_npy
// refuses, NarrowTypesAreRefusedWithWhatToDo).
TEST(Npy, FixturesCoverEveryDtypeButStringAndNarrow) {
  std::set<DType> covered;
  for (const Case& c : expected_cases()) covered.insert(c.tensor.dtype());
  int narrow = 0;
  for (int d = 0; d < kNumDTypes; ++d) narrow += dtype_is_narrow(static_cast<DType>(d)) ? 1 : 0;
  EXPECT_EQ(narrow, 10);
  EXPECT_EQ(covered.size(), static_cast<size_t>(kNumDTypes - 1 - narrow));
  EXPECT_EQ(covered.count(DType::kString), 0u);
}

TEST(Npy, ReadsWhatNumpyWrites) {
  TempDir dir;
  ASSERT_EQ(run_fixture("write", dir.path()), 0) << "npy_fixture.py write failed";
  for (const Case& c : expected_cases()) {
    SCOPED_TRACE(c.name);
    Result<Tensor> t = read_npy(dir.file(c.name + ".npy"));
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    EXPECT_TRUE(same_tensor(*t, c.tensor));
  }
  // Spot checks through typed access, independent of the byte comparison above.
  Result<Tensor> fortran = read_npy(dir.file("fortran_i32.npy"));
  ASSERT_TRUE(fortran.ok());
  EXPECT_EQ(fortran->data<int32_t>()[1 * 12 + 2 * 4 + 3], 23);  // [1][2][3] in C order
  EXPECT_EQ(fortran->data<int32_t>()[0 * 12 + 1 * 4 + 0], 4);
  Result<Tensor> big = read_npy(dir.file("big_endian_i64.npy"));
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->data<int64_t>()[1], -2);
  EXPECT_EQ(big->data<int64_t>()[2], 0x0102030405060708);
  Result<Tensor> f16 = read_npy(dir.file("f16.npy"));
  ASSERT_TRUE(f16.ok());
  EXPECT_EQ(static_cast<float>(f16->data<Half>()[2]), 65504.0f);
  Result<Tensor> bf16 = read_npy(dir.file("bf16.npy"));
  ASSERT_TRUE(bf16.ok());
  EXPECT_EQ(static_cast<float>(bf16->data<BFloat16>()[1]), -2.0f);
  Result<Tensor> scalar = read_npy(dir.file("scalar_f64.npy"));
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ(scalar->rank(), 0);
  EXPECT_EQ(*scalar->data<double>(), 3.5);
}

TEST(Npy, NumpyReadsWhatKilnWrites) {
  TempDir dir;
  for (const Case& c : expected_cases()) {
    Status s = write_npy(dir.file(c.name + ".npy"), c.tensor.view());
    ASSERT_TRUE(s.ok()) << c.name << ": " << s.to_string();
  }
  EXPECT_EQ(run_fixture("check", dir.path()), 0)
      << "numpy disagrees with kiln's files (see stderr)";
}

TEST(Npy, FixtureCheckCatchesAWrongValue) {
  TempDir dir;
  for (const Case& c : expected_cases()) {
    Tensor t = c.tensor.clone();
    if (c.name == "i32") t.data<int32_t>()[2] = 1;
    ASSERT_TRUE(write_npy(dir.file(c.name + ".npy"), t.view()).ok());
  }
  EXPECT_NE(run_fixture("check", dir.path()), 0);
}

TEST(Npy, NumpyFilesSurviveAReadWriteReadCycle) {
  TempDir in, out;
  ASSERT_EQ(run_fixture("write", in.path()), 0);
  for (const Case& c : expected_cases()) {
    Result<Tensor> t = read_npy(in.file(c.name + ".npy"));
    ASSERT_TRUE(t.ok()) << c.name << ": " << t.status().to_string();
    ASSERT_TRUE(write_npy(out.file(c.name + ".npy"), t->view()).ok()) << c.name;
  }
  EXPECT_EQ(run_fixture("check", out.path()), 0);
}

// Random values of every dtype and several shapes survive encode -> parse bit for bit.
TEST(Npy, InMemoryRoundTripOfEveryDtype) {
  std::mt19937_64 rng(1234);
  const Shape shapes[] = {Shape{},     Shape{0},       Shape{1},         Shape{17},
                          Shape{3, 5}, Shape{2, 0, 4}, Shape{2, 3, 4, 5}};
  for (int d = 0; d < kNumDTypes; ++d) {
    const auto dtype = static_cast<DType>(d);
    if (dtype == DType::kString || dtype_is_narrow(dtype)) continue;
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(fmt::format("{} {}", dtype_name(dtype), shape.to_string()));
      Tensor t(dtype, shape);
      auto* bytes = static_cast<uint8_t*>(t.raw_data());
      for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(rng());
      if (dtype == DType::kBool) {
        for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] &= 1;
      }
      Result<std::string> encoded = encode_npy(t.view());
      ASSERT_TRUE(encoded.ok()) << encoded.status().to_string();
      std::span<const uint8_t> span(reinterpret_cast<const uint8_t*>(encoded->data()),
                                    encoded->size());
      Result<Tensor> back = parse_npy(span, "memory");
      ASSERT_TRUE(back.ok()) << back.status().to_string();
      EXPECT_TRUE(same_tensor(*back, t));
    }
  }
}

TEST(Npy, NarrowTypesAreRefusedWithWhatToDo) {
  Tensor f8(DType::kF8E4M3FN, Shape{2});
  Result<std::string> e = encode_npy(f8.view());
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(),
            "a f8e4m3fn tensor cannot be written as .npy: numpy has no f8e4m3fn type; Cast it to "
            "f32 first");
  Tensor i4(DType::kI4, Shape{3});
  e = encode_npy(i4.view());
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("Cast it to i8 first"), std::string::npos);
  Tensor u2(DType::kU2, Shape{});
  e = encode_npy(u2.view());
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("Cast it to u8 first"), std::string::npos);
}

TEST(Npy, EncodedHeaderLayout) {
  Tensor t = make<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  Result<std::string> encoded = encode_npy(t.view());
  ASSERT_TRUE(encoded.ok());
  const std::string& e = *encoded;
  ASSERT_GE(e.size(), 10u);
  EXPECT_EQ(e.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(e[6], 1);
  EXPECT_EQ(e[7], 0);
  const size_t header_len = static_cast<uint8_t>(e[8]) | (static_cast<uint8_t>(e[9]) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_EQ(e.size(), 10 + header_len + 24);
  const std::string header = e.substr(10, header_len);
  EXPECT_EQ(header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0), 0u)
      << header;
  EXPECT_EQ(header.back(), '\n');

  auto header_of = [](const Tensor& tensor) {
    std::string s = *encode_npy(tensor.view());
    return s.substr(10, s.find('}') - 10 + 1);
  };
  EXPECT_EQ(header_of(Tensor::scalar<uint8_t>(1)),
            "{'descr': '|u1', 'fortran_order': False, 'shape': (), }");
  EXPECT_EQ(header_of(make<int64_t>({1}, Shape{1})),
            "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }");
  EXPECT_EQ(header_of(make_bool({1}, Shape{1, 1})),
            "{'descr': '|b1', 'fortran_order': False, 'shape': (1, 1), }");
  EXPECT_EQ(header_of(from_bits<BFloat16>({0}, Shape{1})),
            "{'descr': '|V2', 'fortran_order': False, 'shape': (1,), }");
}

TEST(Npy, LargeHeaderUsesVersion2) {
  // numpy caps the rank at 32, so only kiln reads this back; the header exceeds 64 KiB.
  Tensor t(DType::kI16, Shape(std::vector<int64_t>(25000, 1)));
  t.data<int16_t>()[0] = -12345;
  Result<std::string> encoded = encode_npy(t.view());
  ASSERT_TRUE(encoded.ok());
  EXPECT_EQ((*encoded)[6], 2);
  std::span<const uint8_t> span(reinterpret_cast<const uint8_t*>(encoded->data()), encoded->size());
  const size_t header_len = span[8] | (size_t{span[9]} << 8) | (size_t{span[10]} << 16);
  EXPECT_EQ((12 + header_len) % 64, 0u);
  Result<Tensor> back = parse_npy(span, "big header");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->rank(), 25000);
  EXPECT_EQ(back->data<int16_t>()[0], -12345);
}

TEST(Npy, StringTensorsAreRejected) {
  Tensor t(DType::kString, Shape{2});
  Result<std::string> encoded = encode_npy(t.view());
  ASSERT_FALSE(encoded.ok());
  EXPECT_EQ(encoded.status().code(), StatusCode::kInvalidArgument);
  TempDir dir;
  EXPECT_EQ(write_npy(dir.file("s.npy"), t.view()).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(dir.file("s.npy")));
}

// A version-1 .npy with the given header dict (padded as numpy pads it) followed by `data`.
std::string make_npy(std::string_view dict, std::string_view data, int major = 1) {
  std::string header(dict);
  const size_t prefix = major == 1 ? 10 : 12;
  const size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  for (size_t i = 0; i < prefix - 8; ++i)
    out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  out += header;
  out += data;
  return out;
}

Result<Tensor> parse(const std::string& bytes) {
  return parse_npy(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
                   "bad.npy");
}

// Fails the test unless `r` is an invalid-argument error that names the file and says `what`.
void expect_invalid(const Result<Tensor>& r, std::string_view what) {
  ASSERT_FALSE(r.ok()) << "parsed without error; expected: " << what;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().to_string();
  EXPECT_NE(r.status().message().find("\"bad.npy\""), std::string_view::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find(what), std::string_view::npos) << r.status().message();
}

TEST(Npy, HandMadeFilesParse) {
  // Sanity check of make_npy itself, so that the malformed cases below fail for their own reason.
  Result<Tensor> ok = parse(make_npy("{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }",
                                     std::string("\x01\x00\xff\xff", 4)));
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->data<int16_t>()[0], 1);
  EXPECT_EQ(ok->data<int16_t>()[1], -1);
  // Key order, double quotes and spacing vary between writers.
  Result<Tensor> reordered = parse(make_npy(
      "{\"shape\":(1, ),\"fortran_order\":False,\"descr\":\"<u2\"}", std::string("\x02\x01", 2)));
  ASSERT_TRUE(reordered.ok()) << reordered.status().to_string();
  EXPECT_EQ(reordered->data<uint16_t>()[0], 0x0102);
  // Trailing bytes after the data are ignored.
  Result<Tensor> trailing = parse(make_npy(
      "{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }", std::string("\x07zzzz", 5)));
  ASSERT_TRUE(trailing.ok());
  EXPECT_EQ(trailing->data<uint8_t>()[0], 7);
}

TEST(Npy, BoolBytesAreNormalized) {
  Result<Tensor> t = parse(make_npy("{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }",
                                    std::string("\x00\x01\x02\xff", 4)));
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  const auto* raw = static_cast<const uint8_t*>(t->raw_data());
  EXPECT_EQ(raw[0], 0);
  EXPECT_EQ(raw[1], 1);
  EXPECT_EQ(raw[2], 1);
  EXPECT_EQ(raw[3], 1);
}

TEST(Npy, EveryTruncationIsAnError) {
  Tensor t = make<int32_t>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  const std::string full = *encode_npy(t.view());
  ASSERT_TRUE(parse(full).ok());
  for (size_t n = 0; n < full.size(); ++n) {
    Result<Tensor> r = parse(full.substr(0, n));
    ASSERT_FALSE(r.ok()) << "a prefix of " << n << " bytes parsed";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << n;
    EXPECT_NE(r.status().message().find("\"bad.npy\""), std::string_view::npos) << n;
  }
}

TEST(Npy, MalformedInputsAreErrors) {
  const std::string data(64, '\0');
  expect_invalid(parse(""), "magic");
  expect_invalid(parse("hello world, not numpy"), "magic");
  std::string bad_magic =
      make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", data);
  bad_magic[1] = 'M';
  expect_invalid(parse(bad_magic), "magic");

  std::string garbage = make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", data);
  for (size_t i = 10; i < 60; ++i) garbage[i] = static_cast<char>(0x80 + i);
  expect_invalid(parse(garbage), "header");

  std::string version = make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", data);
  version[6] = 4;
  expect_invalid(parse(version), "unsupported format version 4");

  std::string long_header =
      make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", "");
  long_header[8] = static_cast<char>(0xff);
  long_header[9] = static_cast<char>(0xff);
  expect_invalid(parse(long_header), "truncated header");

  expect_invalid(
      parse(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1000,), }", data)),
      "truncated data: shape [1000] of f32 needs 4000 bytes, the file has 64");
  expect_invalid(
      parse(make_npy("{'descr': '<f8', 'fortran_order': True, 'shape': (3, 3), }", data)),
      "truncated data");
  expect_invalid(parse(make_npy("{'descr': '<f4', 'fortran_order': False, }", data)), "lacks");
  expect_invalid(parse(make_npy("{'descr': '<f4', 'shape': (1,), }", data)), "lacks");
  expect_invalid(parse(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), "
                                "'extra': 1, }",
                                data)),
                 "unexpected key 'extra'");
  expect_invalid(parse(make_npy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", data)),
                 "expected True or False");
  expect_invalid(
      parse(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", data)),
      "expected a dimension");
  expect_invalid(parse(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1, ", data)),
                 "expected a dimension");
  expect_invalid(parse(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': [1], }", data)),
                 "expected '('");
  expect_invalid(parse(make_npy("{'descr': '<f4", data)), "unterminated string");
  expect_invalid(parse(make_npy("", data)), "expected '{'");
  expect_invalid(parse(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': "
                                "(99999999999999999999,), }",
                                data)),
                 "dimension too large");
  // The element count overflows even though each dim fits.
  expect_invalid(parse(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': "
                                "(4611686018427387904, 4611686018427387904), }",
                                data)),
                 "more than");
  expect_invalid(parse(make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': "
                                "(1152921504606846975,), }",
                                data)),
                 "truncated data");
  for (std::string_view descr : {"<c8", "|O", "<U3", "<f16", "|V4", "f4", "<x4", "<f4x"}) {
    expect_invalid(parse(make_npy(fmt::format("{{'descr': '{}', 'fortran_order': False, "
                                              "'shape': (1,), }}",
                                              descr),
                                  data)),
                   "unsupported .npy element type");
  }
  expect_invalid(
      parse(make_npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", data)),
      "expected a string");
}

TEST(Npy, ReadErrorsNameThePath) {
  TempDir dir;
  Tensor t = make<float>({1, 2, 3}, Shape{3});
  const std::string full = *encode_npy(t.view());

  const std::string truncated = dir.file("truncated.npy");
  {
    std::ofstream out(truncated, std::ios::binary);
    out << full.substr(0, full.size() - 1);
  }
  Result<Tensor> r = read_npy(truncated);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("\"" + truncated + "\""), std::string_view::npos)
      << r.status().message();

  const std::string empty = dir.file("empty.npy");
  { std::ofstream out(empty, std::ios::binary); }
  Result<Tensor> e = read_npy(empty);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find(empty), std::string_view::npos) << e.status().message();

  Result<Tensor> missing = read_npy(dir.file("missing.npy"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir.file("missing.npy")), std::string_view::npos);

  const std::string good = dir.file("good.npy");
  ASSERT_TRUE(write_npy(good, t.view()).ok());
  Result<Tensor> g = read_npy(good);
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->equals(t));
}

}  // namespace
}  // namespace kiln
