// SPDX-License-Identifier: Apache-2.0
// Generated row kernels and strided chain inputs: their sources, and NVRTC compiling them to sm_90
// CUBINs for every op and element type (no GPU needed).
#include "compiler/targets/cuda/fused_rows.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/gpu.h"
#include "core/half.h"

namespace kiln::compiler::cuda {
namespace {

namespace fs = std::filesystem;

// Add(x, r) with r broadcast over the rows ([cols] against [rows, cols]) then a scaling: a
// residual or a mask.
ElementwiseChain add_prologue(Elem e, int64_t rows, int64_t cols) {
  ElementwiseChain c;
  c.elem = e;
  c.inputs = 2;
  c.ops = {ChainOp::of(Binary::kAdd, ChainOperand::input(0), ChainOperand::input(1)),
           ChainOp::of(Binary::kMul, ChainOperand::value(0), ChainOperand::constant(0.125f))};
  c.access = {TensorAccess{}, TensorAccess{{rows, cols}, {0, 1}}};
  return c;
}

// y * 2 + z, z read contiguously at the output's elements.
ElementwiseChain mul_add_epilogue(Elem e) {
  ElementwiseChain c;
  c.elem = e;
  c.inputs = 2;
  c.ops = {ChainOp::of(Binary::kMul, ChainOperand::input(0), ChainOperand::constant(2.0f)),
           ChainOp::of(Binary::kAdd, ChainOperand::value(0), ChainOperand::input(1))};
  return c;
}

RowKernelSpec spec_of(RowOp op, Elem e, int64_t rows, int64_t cols) {
  RowKernelSpec s;
  s.op = op;
  s.elem = e;
  s.rows = rows;
  s.cols = cols;
  s.has_bias = op == RowOp::kLayerNorm;
  s.prologue = add_prologue(e, rows, cols);
  s.epilogue = mul_add_epilogue(e);
  return s;
}

constexpr RowOp kAllOps[] = {RowOp::kLayerNorm, RowOp::kSoftmax,    RowOp::kLogSoftmax,
                             RowOp::kReduceSum, RowOp::kReduceMean, RowOp::kReduceMax};

TEST(TensorAccess, OffsetsOfBroadcastAndTransposedInputs) {
  EXPECT_EQ(access_offset(TensorAccess{}, "i"), "i");
  // [2, 3, 4] read from a [4, 3] tensor transposed (strides 0, 1, 3).
  EXPECT_EQ(access_offset(TensorAccess{{2, 3, 4}, {0, 1, 3}}, "i"),
            "((i % 4LL) * 3LL + (i / 4LL % 3LL) * 1LL)");
  // The leading dim needs no modulo; a fully broadcast scalar is offset 0.
  EXPECT_EQ(access_offset(TensorAccess{{5, 7}, {7, 0}}, "n"), "(n / 7LL * 7LL)");
  EXPECT_EQ(access_offset(TensorAccess{{5, 7}, {0, 0}}, "n"), "0");
}

TEST(FusedElementwiseSource, StridedInputsHaveNoVectorKernel) {
  ElementwiseChain c = add_prologue(Elem::kF16, 8, 16);
  auto src = fused_elementwise_source(c, "k");
  ASSERT_TRUE(src.ok()) << src.status().message();
  EXPECT_NE(src->find("in1[((i % 16LL) * 1LL)]"), std::string::npos) << *src;
  EXPECT_EQ(src->find("k_v8("), std::string::npos) << *src;
  c.access.clear();
  auto plain = fused_elementwise_source(c, "k");
  ASSERT_TRUE(plain.ok());
  EXPECT_NE(plain->find("k_v8("), std::string::npos);
}

TEST(FusedRowSource, BakesTheShapeAndOrdersTheParameters) {
  RowKernelSpec s = spec_of(RowOp::kLayerNorm, Elem::kF16, 10, 768);
  s.write_prologue = true;
  auto src = fused_row_source(s, "k");
  ASSERT_TRUE(src.ok()) << src.status().message();
  EXPECT_NE(src->find("k(const T* __restrict__ in0, const T* __restrict__ in1, const float* "
                      "__restrict__ scale, const float* __restrict__ bias, T* __restrict__ out, T* "
                      "__restrict__ mid, const T* __restrict__ e1)"),
            std::string::npos)
      << *src;
  EXPECT_NE(src->find("float v[24]"), std::string::npos) << "768 columns, 32 a warp";
  EXPECT_NE(src->find("mid[i] = st_f16(v[k])"), std::string::npos);
  EXPECT_NE(src->find("+ bias[j]"), std::string::npos);
  EXPECT_EQ(src->find("__shared__"), std::string::npos) << "one warp a row";
  EXPECT_EQ(src->find("#include"), std::string::npos);

  RowLaunch l = row_launch_shape(s);
  EXPECT_EQ(l.threads_x, 32);
  EXPECT_EQ(l.threads_y, 4);
  EXPECT_EQ(l.blocks, 3);

  // Wide rows: several warps a row, reduced through shared memory.
  s = spec_of(RowOp::kSoftmax, Elem::kF32, 10, 5000);
  l = row_launch_shape(s);
  EXPECT_EQ(l.threads_x, 320);
  EXPECT_EQ(l.threads_y, 1);
  EXPECT_EQ(l.blocks, 10);
  src = fused_row_source(s, "k");
  ASSERT_TRUE(src.ok()) << src.status().message();
  EXPECT_NE(src->find("__shared__ float part[10]"), std::string::npos) << *src;

  // A reduction writes one value a row, with the epilogue read at the row.
  s = spec_of(RowOp::kReduceMean, Elem::kF32, 10, 64);
  src = fused_row_source(s, "k");
  ASSERT_TRUE(src.ok());
  EXPECT_NE(src->find("if (threadIdx.x == 0) out[row] = (epilogue(r, ld(e1[row])));"),
            std::string::npos)
      << *src;
}

TEST(FusedRowSource, RejectsRowsItCannotHold) {
  auto wide = fused_row_source(spec_of(RowOp::kSoftmax, Elem::kF32, 2, kMaxGeneratedRow + 1), "k");
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.status().message().find("columns 1 to 32768"), std::string::npos)
      << wide.status().message();
  EXPECT_FALSE(fused_row_source(spec_of(RowOp::kSoftmax, Elem::kF32, 0, 8), "k").ok());
  RowKernelSpec mixed = spec_of(RowOp::kSoftmax, Elem::kF16, 2, 8);
  mixed.epilogue.elem = Elem::kF32;
  EXPECT_FALSE(fused_row_source(mixed, "k").ok());
}

#define SKIP_WITHOUT_NVRTC()                                                  \
  do {                                                                        \
    auto v = nvrtc_version();                                                 \
    if (!v.ok()) GTEST_SKIP() << "NVRTC not found: " << v.status().message(); \
  } while (0)

// Every op in every element type (f16 with rows of several warps, f32 and bf16 one warp a row),
// with a prologue (also written out) and an epilogue: each compiles to its own sm_90 CUBIN.
TEST(FusedRowNvrtc, EveryOpAndElementTypeCompilesForSm90) {
  SKIP_WITHOUT_NVRTC();
  CubinOptions options;
  options.use_cache = false;
  std::set<std::vector<char>> images;
  for (RowOp op : kAllOps) {
    for (Elem e : {Elem::kF32, Elem::kF16, Elem::kBF16}) {
      const int64_t cols = e == Elem::kF16 ? 3000 : 100;
      SCOPED_TRACE(std::string(row_op_name(op)) + " elem " + std::to_string(static_cast<int>(e)));
      RowKernelSpec s = spec_of(op, e, 7, cols);
      s.write_prologue = op == RowOp::kLayerNorm || op == RowOp::kReduceSum;
      auto src = fused_row_source(s, "kiln_fused_row");
      ASSERT_TRUE(src.ok()) << src.status().message();
      auto cubin = compile_cubin(*src, options);
      ASSERT_TRUE(cubin.ok()) << cubin.status().message() << "\n" << *src;
      EXPECT_EQ(std::string(cubin->image.data(), 4),
                "\x7f"
                "ELF");
      images.insert(cubin->image);
    }
  }
  EXPECT_EQ(images.size(), std::size(kAllOps) * 3);
}

// The cache key follows the chain: another prologue, epilogue or shape is another CUBIN file.
TEST(FusedRowNvrtc, CacheKeysDifferPerChain) {
  SKIP_WITHOUT_NVRTC();
  const fs::path dir = fs::temp_directory_path() / ("kiln_rows_cache_" + std::to_string(getpid()));
  fs::remove_all(dir);
  CubinOptions options;
  options.cache_dir = dir.string();
  RowKernelSpec base = spec_of(RowOp::kLayerNorm, Elem::kF16, 16, 768);
  RowKernelSpec other_prologue = base;
  other_prologue.prologue.ops[1].b = ChainOperand::constant(0.25f);
  RowKernelSpec no_epilogue = base;
  no_epilogue.epilogue = ElementwiseChain{Elem::kF16, 1, {}, {}};
  RowKernelSpec other_rows = base;
  other_rows.rows = 32;
  RowKernelSpec with_mid = base;
  with_mid.write_prologue = true;
  std::set<std::string> paths;
  for (const RowKernelSpec& s : {base, other_prologue, no_epilogue, other_rows, with_mid}) {
    auto src = fused_row_source(s, "kiln_fused_row");
    ASSERT_TRUE(src.ok()) << src.status().message();
    auto cubin = compile_cubin(*src, options);
    ASSERT_TRUE(cubin.ok()) << cubin.status().message();
    EXPECT_TRUE(cubin->compiled);
    paths.insert(cubin->cache_path);
  }
  EXPECT_EQ(paths.size(), 5u);
  auto again = compile_cubin(*fused_row_source(base, "kiln_fused_row"), options);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->compiled);
  fs::remove_all(dir);
}

// ---- Launches (GPU) -----------------------------------------------------------------------------

// `v` as stored in element type `e` (f32 or f16): its bytes, and the value rounded.
std::vector<uint8_t> stored(Elem e, std::vector<float>& v) {
  std::vector<uint8_t> bytes(v.size() * (e == Elem::kF32 ? 4 : 2));
  for (size_t i = 0; i < v.size(); ++i) {
    if (e == Elem::kF32) {
      std::memcpy(bytes.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t h = Half(v[i]).bits;
      std::memcpy(bytes.data() + 2 * i, &h, 2);
      v[i] = Half::from_bits(h);
    }
  }
  return bytes;
}

std::vector<float> loaded(Elem e, const std::vector<uint8_t>& bytes) {
  std::vector<float> v(bytes.size() / (e == Elem::kF32 ? 4 : 2));
  for (size_t i = 0; i < v.size(); ++i) {
    if (e == Elem::kF32) {
      std::memcpy(&v[i], bytes.data() + 4 * i, 4);
    } else {
      uint16_t h = 0;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      v[i] = Half::from_bits(h);
    }
  }
  return v;
}

std::shared_ptr<void> on_device(const void* host, size_t bytes) {
  auto d = gpu_alloc(bytes);
  EXPECT_TRUE(d.ok());
  if (!d.ok()) return nullptr;
  EXPECT_TRUE(gpu_upload(d->get(), host, bytes).ok());
  return *d;
}

// spec_of's kernel (prologue (x + r) * 0.125 also written out, epilogue y * 2 + z) on random rows,
// against the same arithmetic on the host.
void check_row_launch(RowOp op, Elem e, int64_t rows, int64_t cols) {
  SCOPED_TRACE(std::string(row_op_name(op)) + " elem " + std::to_string(static_cast<int>(e)) +
               " cols " + std::to_string(cols));
  RowKernelSpec spec = spec_of(op, e, rows, cols);
  spec.write_prologue = true;
  const std::string dir =
      (fs::temp_directory_path() / ("kiln_rows_launch_" + std::to_string(getpid()))).string();
  auto kernel = FusedRowKernel::create(spec, dir);
  ASSERT_TRUE(kernel.ok()) << kernel.status().message();
  const bool reduces = row_op_reduces(op);
  const int64_t outs = reduces ? rows : rows * cols;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  auto random = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = dist(rng);
    return v;
  };
  std::vector<float> x = random(rows * cols), r = random(cols), z = random(outs);
  std::vector<float> scale = random(cols), bias = random(cols);
  const std::vector<uint8_t> xb = stored(e, x), rb = stored(e, r), zb = stored(e, z);
  const size_t es = e == Elem::kF32 ? 4 : 2;
  auto dx = on_device(xb.data(), xb.size()), dr = on_device(rb.data(), rb.size());
  auto dz = on_device(zb.data(), zb.size());
  auto ds = on_device(scale.data(), scale.size() * 4), db = on_device(bias.data(), bias.size() * 4);
  auto dout = gpu_alloc(static_cast<size_t>(outs) * es);
  auto dmid = gpu_alloc(x.size() * es);
  ASSERT_TRUE(dout.ok() && dmid.ok());
  std::vector<const void*> pointers = {dx.get(), dr.get()};
  if (op == RowOp::kLayerNorm) pointers.insert(pointers.end(), {ds.get(), db.get()});
  pointers.insert(pointers.end(), {dout->get(), dmid->get(), dz.get()});
  ASSERT_TRUE((*kernel)->launch(pointers, nullptr).ok());
  std::vector<uint8_t> out_bytes(static_cast<size_t>(outs) * es), mid_bytes(x.size() * es);
  ASSERT_TRUE(gpu_download(out_bytes.data(), dout->get(), out_bytes.size()).ok());
  ASSERT_TRUE(gpu_download(mid_bytes.data(), dmid->get(), mid_bytes.size()).ok());
  const std::vector<float> out = loaded(e, out_bytes), mid = loaded(e, mid_bytes);
  const float tol = e == Elem::kF32 ? 1e-4f : 1e-2f;
  for (int64_t row = 0; row < rows; ++row) {
    std::vector<double> p(static_cast<size_t>(cols));
    for (int64_t j = 0; j < cols; ++j) {
      const size_t i = static_cast<size_t>(row * cols + j);
      p[j] = static_cast<float>((x[i] + r[j]) * 0.125f);
      ASSERT_NEAR(mid[i], p[j], tol * (1 + std::fabs(p[j]))) << "prologue at " << i;
    }
    double sum = 0, max = -INFINITY;
    for (double v : p) {
      sum += v;
      max = std::max(max, v);
    }
    const double mean = sum / static_cast<double>(cols);
    double var = 0, exps = 0;
    for (double v : p) {
      var += (v - mean) * (v - mean);
      exps += std::exp(v - max);
    }
    var /= static_cast<double>(cols);
    auto check = [&](int64_t at, double y) {
      const double want = y * 2 + z[static_cast<size_t>(at)];
      ASSERT_NEAR(out[static_cast<size_t>(at)], want, tol * (1 + std::fabs(want))) << "at " << at;
    };
    if (reduces) {
      check(row, op == RowOp::kReduceSum ? sum : op == RowOp::kReduceMean ? mean : max);
      continue;
    }
    for (int64_t j = 0; j < cols; ++j) {
      const double v = p[static_cast<size_t>(j)];
      double y = 0;
      if (op == RowOp::kLayerNorm) {
        y = (v - mean) / std::sqrt(var + spec.epsilon) * scale[j] + bias[j];
      } else if (op == RowOp::kSoftmax) {
        y = std::exp(v - max) / exps;
      } else {
        y = v - max - std::log(exps);
      }
      check(row * cols + j, y);
    }
  }
  fs::remove_all(dir);
}

TEST(FusedRowLaunch, MatchesTheHostReference) {
  if (list_gpus().empty()) GTEST_SKIP() << "no GPU on this machine";
  for (RowOp op : kAllOps) {
    for (Elem e : {Elem::kF32, Elem::kF16}) {
      for (int64_t cols : {int64_t{40}, int64_t{768}, int64_t{3000}})
        check_row_launch(op, e, 7, cols);
    }
  }
}

}  // namespace
}  // namespace kiln::compiler::cuda
