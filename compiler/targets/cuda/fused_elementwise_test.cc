// SPDX-License-Identifier: Apache-2.0
// Fused elementwise chains: generated source, NVRTC compilation to CUBIN and its disk cache (no GPU
// needed), and launches against a host reference (skipped without a GPU).
#include "compiler/targets/cuda/fused_elementwise.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/gpu.h"
#include "core/half.h"
#include "core/logging.h"

namespace kiln::compiler::cuda {
namespace {

namespace fs = std::filesystem;

// x0 * 2 + x1, through GELU, clipped to [-1, 3]: inputs, values and a constant.
ElementwiseChain sample_chain(Elem elem) {
  ElementwiseChain c;
  c.elem = elem;
  c.inputs = 2;
  c.ops = {ChainOp::of(Binary::kMul, ChainOperand::input(0), ChainOperand::constant(2.0f)),
           ChainOp::of(Binary::kAdd, ChainOperand::value(0), ChainOperand::input(1)),
           ChainOp::of(Unary::kGelu, ChainOperand::value(1)),
           ChainOp::of(Unary::kClip, ChainOperand::value(2), -1.0f, 3.0f)};
  return c;
}

#define SKIP_WITHOUT_NVRTC()                                                  \
  do {                                                                        \
    auto v = nvrtc_version();                                                 \
    if (!v.ok()) GTEST_SKIP() << "NVRTC not found: " << v.status().message(); \
  } while (0)

// A fresh cache folder under the test's temp dir.
std::string fresh_dir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("kiln_nvrtc_test_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  return dir.string();
}

// The warnings logged while it lives.
struct CapturedWarnings {
  CapturedWarnings() {
    set_log_sink([this](LogLevel level, std::string_view m) {
      if (level == LogLevel::kWarning) text += std::string(m) + "\n";
    });
  }
  ~CapturedWarnings() { set_log_sink({}); }
  std::string text;
};

TEST(FusedElementwiseSource, NamesBothKernelsAndEveryOp) {
  auto src = fused_elementwise_source(sample_chain(Elem::kF16), "k");
  ASSERT_TRUE(src.ok()) << src.status().message();
  EXPECT_NE(src->find("extern \"C\" __global__ void k("), std::string::npos) << *src;
  EXPECT_NE(src->find("extern \"C\" __global__ void k_v8("), std::string::npos) << *src;
  EXPECT_NE(src->find(binary_formula(Binary::kMul)), std::string::npos);
  EXPECT_NE(src->find(unary_formula(Unary::kGelu)), std::string::npos);
  EXPECT_NE(src->find(unary_formula(Unary::kClip)), std::string::npos);
  EXPECT_NE(src->find("__int_as_float(0x40000000)"), std::string::npos);  // the constant 2
  EXPECT_EQ(src->find("#include"), std::string::npos);
}

TEST(FusedElementwiseSource, RejectsBadOperands) {
  ElementwiseChain c = sample_chain(Elem::kF32);
  c.ops[1].b = ChainOperand::input(5);
  auto src = fused_elementwise_source(c, "k");
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.status().message().find("op 1 reads operand 5"), std::string::npos)
      << src.status().message();
  c = sample_chain(Elem::kF32);
  c.ops[0].a = ChainOperand::value(0);  // its own value
  EXPECT_FALSE(fused_elementwise_source(c, "k").ok());
  EXPECT_FALSE(fused_elementwise_source(ElementwiseChain{}, "k").ok());
  c = sample_chain(Elem::kF32);
  c.ops[2].unary = static_cast<Unary>(99);
  auto bad_op = fused_elementwise_source(c, "k");
  ASSERT_FALSE(bad_op.ok());
  EXPECT_NE(bad_op.status().message().find("unknown unary op"), std::string::npos);
}

TEST(FusedElementwiseNvrtc, CompilesEachElementTypeForSm90AndCaches) {
  SKIP_WITHOUT_NVRTC();
  const std::string dir = fresh_dir("cache");
  for (Elem e : {Elem::kF32, Elem::kF16, Elem::kBF16}) {
    auto src = fused_elementwise_source(sample_chain(e), "kiln_fused");
    ASSERT_TRUE(src.ok()) << src.status().message();
    CubinOptions options;
    options.cache_dir = dir;
    auto first = compile_cubin(*src, options);
    ASSERT_TRUE(first.ok()) << first.status().message() << "\n" << *src;
    EXPECT_TRUE(first->compiled);
    EXPECT_GT(first->image.size(), 1000u);
    // An ELF image.
    EXPECT_EQ(std::string(first->image.data(), 4),
              "\x7f"
              "ELF");
    ASSERT_FALSE(first->cache_path.empty());
    EXPECT_TRUE(fs::exists(first->cache_path));

    auto second = compile_cubin(*src, options);
    ASSERT_TRUE(second.ok()) << second.status().message();
    EXPECT_FALSE(second->compiled);
    EXPECT_EQ(second->image, first->image);

    // Another architecture is another key.
    options.arch = "sm_80";
    auto other = compile_cubin(*src, options);
    ASSERT_TRUE(other.ok()) << other.status().message();
    EXPECT_TRUE(other->compiled);
    EXPECT_NE(other->cache_path, first->cache_path);
  }
  fs::remove_all(dir);
}

TEST(FusedElementwiseNvrtc, DamagedCacheFilesAreRecompiled) {
  SKIP_WITHOUT_NVRTC();
  const std::string dir = fresh_dir("damaged");
  auto src = fused_elementwise_source(sample_chain(Elem::kF32), "kiln_fused");
  ASSERT_TRUE(src.ok());
  CubinOptions options;
  options.cache_dir = dir;
  auto first = compile_cubin(*src, options);
  ASSERT_TRUE(first.ok()) << first.status().message();
  const std::string path = first->cache_path;
  const auto size = fs::file_size(path);

  CapturedWarnings warnings;
  // Truncated.
  fs::resize_file(path, size / 2);
  auto truncated = compile_cubin(*src, options);
  EXPECT_NE(warnings.text.find("truncated"), std::string::npos) << warnings.text;
  ASSERT_TRUE(truncated.ok()) << truncated.status().message();
  EXPECT_TRUE(truncated->compiled);
  EXPECT_EQ(truncated->image, first->image);
  EXPECT_EQ(fs::file_size(path), size);  // rewritten whole

  // A flipped byte in the CUBIN.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size - 10));
    f.put('\x5a' ^ static_cast<char>(first->image[first->image.size() - 10]));
  }
  auto corrupt = compile_cubin(*src, options);
  EXPECT_NE(warnings.text.find("checksum mismatch"), std::string::npos) << warnings.text;
  ASSERT_TRUE(corrupt.ok()) << corrupt.status().message();
  EXPECT_TRUE(corrupt->compiled);
  EXPECT_EQ(corrupt->image, first->image);

  // Shorter than the header.
  fs::resize_file(path, 3);
  auto tiny = compile_cubin(*src, options);
  ASSERT_TRUE(tiny.ok()) << tiny.status().message();
  EXPECT_TRUE(tiny->compiled);

  auto hit = compile_cubin(*src, options);
  ASSERT_TRUE(hit.ok());
  EXPECT_FALSE(hit->compiled);
  fs::remove_all(dir);
}

TEST(FusedElementwiseNvrtc, UnwritableCacheDirStillCompiles) {
  SKIP_WITHOUT_NVRTC();
  // A regular file where the cache folder should be: nothing can be created under it.
  const std::string blocker = fresh_dir("blocker");
  { std::ofstream(blocker) << "not a folder"; }
  auto src = fused_elementwise_source(sample_chain(Elem::kF32), "kiln_fused");
  ASSERT_TRUE(src.ok());
  CubinOptions options;
  options.cache_dir = (fs::path(blocker) / "nvrtc").string();
  CapturedWarnings warnings;
  for (int i = 0; i < 2; ++i) {
    auto r = compile_cubin(*src, options);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_TRUE(r->compiled);
    EXPECT_TRUE(r->cache_path.empty());
    EXPECT_FALSE(r->image.empty());
  }
  EXPECT_NE(warnings.text.find("cannot write the NVRTC cache file"), std::string::npos)
      << warnings.text;
  fs::remove(blocker);
}

TEST(FusedElementwiseNvrtc, BadProgramErrorCarriesTheLog) {
  SKIP_WITHOUT_NVRTC();
  CubinOptions options;
  options.use_cache = false;
  auto r = compile_cubin("extern \"C\" __global__ void k(float* y) { y[0] = undeclared_thing; }",
                         options);
  ASSERT_FALSE(r.ok());
  const std::string m(r.status().message());
  EXPECT_NE(m.find("NVRTC log"), std::string::npos) << m;
  EXPECT_NE(m.find("undeclared_thing"), std::string::npos) << m;

  auto src = fused_elementwise_source(sample_chain(Elem::kF32), "kiln_fused");
  ASSERT_TRUE(src.ok());
  options.arch = "sm_1";
  auto bad_arch = compile_cubin(*src, options);
  ASSERT_FALSE(bad_arch.ok());
  EXPECT_NE(bad_arch.status().message().find("NVRTC"), std::string::npos);
}

TEST(FusedElementwiseNvrtc, CacheDirFollowsTheEnvironment) {
  const bool saved = env_flag_is_set(EnvFlag::kCacheDir);
  const std::string restore = env_flag_string(EnvFlag::kCacheDir);
  setenv("KILN_CACHE_DIR", "/some/where", 1);
  EXPECT_EQ(nvrtc_cache_dir(), "/some/where/nvrtc");
  unsetenv("KILN_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(nvrtc_cache_dir(), "/xdg/kiln/nvrtc");
  unsetenv("XDG_CACHE_HOME");
  if (saved) setenv("KILN_CACHE_DIR", restore.c_str(), 1);
}

// ---- Launches (GPU) -----------------------------------------------------------------------------

// The host reference of one op, with the formulas of kernels/elementwise.cu.
float host_unary(Unary op, float x, float alpha, float beta) {
  switch (op) {
    case Unary::kRelu: return x > 0.0f ? x : 0.0f;
    case Unary::kSigmoid: return 1.0f / (1.0f + std::exp(-x));
    case Unary::kTanh: return std::tanh(x);
    case Unary::kExp: return std::exp(x);
    case Unary::kGelu: return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
    case Unary::kClip: return std::fmin(std::fmax(x, alpha), beta);
    case Unary::kLeakyRelu: return x >= 0.0f ? x : alpha * x;
    case Unary::kHardSwish: return x * std::fmax(0.0f, std::fmin(1.0f, x / 6.0f + 0.5f));
    case Unary::kAbs: return std::fabs(x);
    case Unary::kSqrt: return std::sqrt(x);
    default: ADD_FAILURE() << "no host reference for unary " << static_cast<int>(op); return 0.0f;
  }
}
float host_binary(Binary op, float a, float b) {
  switch (op) {
    case Binary::kAdd: return a + b;
    case Binary::kSub: return a - b;
    case Binary::kMul: return a * b;
    case Binary::kDiv: return a / b;
    case Binary::kPow: return std::pow(a, b);
    case Binary::kMax: return std::fmax(a, b);
    case Binary::kMin: return std::fmin(a, b);
  }
  return 0.0f;
}

float host_chain(const ElementwiseChain& c, const std::vector<std::vector<float>>& in, size_t i) {
  std::vector<float> v;
  auto get = [&](const ChainOperand& o) {
    switch (o.kind) {
      case ChainOperand::Kind::kInput: return in[o.index][i];
      case ChainOperand::Kind::kValue: return v[o.index];
      case ChainOperand::Kind::kScalar: break;
    }
    return o.scalar;
  };
  for (const ChainOp& op : c.ops) {
    v.push_back(op.is_binary ? host_binary(op.binary, get(op.a), get(op.b))
                             : host_unary(op.unary, get(op.a), op.alpha, op.beta));
  }
  return v.back();
}

// Runs `chain` on n random elements per input (the values rounded to the element type) and
// compares with the host reference.
void check_launch(ElementwiseChain chain, int64_t n, float tolerance) {
  SCOPED_TRACE("n=" + std::to_string(n) + " elem=" + std::to_string(static_cast<int>(chain.elem)));
  const std::string dir = fresh_dir("launch");
  auto kernel = FusedElementwiseKernel::create(chain, dir);
  ASSERT_TRUE(kernel.ok()) << kernel.status().message();
  const bool f16 = chain.elem == Elem::kF16;
  const size_t bytes = static_cast<size_t>(n) * (f16 ? 2 : 4);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(0.1f, 2.0f);
  std::vector<std::vector<float>> host(chain.inputs, std::vector<float>(n));
  std::vector<std::shared_ptr<void>> device;
  std::vector<const void*> pointers;
  for (auto& h : host) {
    std::vector<uint16_t> halves(n);
    for (int64_t i = 0; i < n; ++i) {
      h[i] = dist(rng);
      if (f16) {
        halves[i] = Half(h[i]).bits;
        h[i] = Half::from_bits(halves[i]);
      }
    }
    auto d = gpu_alloc(bytes);
    ASSERT_TRUE(d.ok());
    ASSERT_TRUE(
        gpu_upload(d->get(), f16 ? static_cast<const void*>(halves.data()) : h.data(), bytes).ok());
    pointers.push_back(d->get());
    device.push_back(*d);
  }
  auto out = gpu_alloc(bytes);
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE((*kernel)->launch(pointers, out->get(), n, nullptr).ok());
  std::vector<float> got(n);
  if (f16) {
    std::vector<uint16_t> halves(n);
    ASSERT_TRUE(gpu_download(halves.data(), out->get(), bytes).ok());
    for (int64_t i = 0; i < n; ++i) got[i] = Half::from_bits(halves[i]);
  } else {
    ASSERT_TRUE(gpu_download(got.data(), out->get(), bytes).ok());
  }
  for (int64_t i = 0; i < n; ++i) {
    const float want = host_chain(chain, host, static_cast<size_t>(i));
    ASSERT_NEAR(got[i], want, tolerance * (1.0f + std::fabs(want))) << "at " << i;
  }
  fs::remove_all(dir);
}

TEST(FusedElementwiseLaunch, MatchesTheHostReference) {
  if (list_gpus().empty()) GTEST_SKIP() << "no GPU on this machine";
  ElementwiseChain swish;
  swish.inputs = 1;
  swish.ops = {ChainOp::of(Unary::kSigmoid, ChainOperand::input(0)),
               ChainOp::of(Binary::kMul, ChainOperand::input(0), ChainOperand::value(0))};
  ElementwiseChain mixed;
  mixed.inputs = 3;
  mixed.ops = {ChainOp::of(Binary::kSub, ChainOperand::input(0), ChainOperand::input(1)),
               ChainOp::of(Unary::kAbs, ChainOperand::value(0)),
               ChainOp::of(Binary::kPow, ChainOperand::value(1), ChainOperand::constant(0.5f)),
               ChainOp::of(Binary::kMax, ChainOperand::value(2), ChainOperand::input(2)),
               ChainOp::of(Unary::kLeakyRelu, ChainOperand::value(3), 0.1f)};
  for (Elem e : {Elem::kF32, Elem::kF16}) {
    const float tol = e == Elem::kF32 ? 1e-5f : 2e-3f;
    for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{4096}, int64_t{100003}}) {
      for (ElementwiseChain c : {sample_chain(e), swish, mixed}) {
        c.elem = e;
        check_launch(c, n, tol);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::compiler::cuda
