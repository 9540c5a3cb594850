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
  EXPECT_NE(src->find("if (threadIdx.x == 0) out[row] = (epilogue(rnd(r), ld(e1[row])));"),
            std::string::npos)
      << *src;
}

// Rows of a multiple of 8 columns whose inputs and outputs run along the rows get a second kernel
// reading and writing 16-byte chunks of 8 elements; others only the scalar one.
TEST(FusedRowSource, VectorizesRowsOfEightElementChunks) {
  RowKernelSpec s = spec_of(RowOp::kLayerNorm, Elem::kF16, 10, 768);
  s.write_prologue = true;
  ASSERT_TRUE(row_kernel_vectorizes(s));
  auto src = fused_row_source(s, "k");
  ASSERT_TRUE(src.ok()) << src.status().message();
  const size_t v8 = src->find("void __launch_bounds__(128) k_v8(const T* __restrict__ in0");
  ASSERT_NE(v8, std::string::npos) << *src;
  const std::string vec = src->substr(v8);
  EXPECT_NE(vec.find("float v[24]"), std::string::npos) << "3 chunks of 8 a lane";
  EXPECT_NE(vec.find("const int ch = threadIdx.x + c * 32;"), std::string::npos) << vec;
  EXPECT_NE(vec.find("const P8 p0 = *reinterpret_cast<const P8*>(in0 + i0);"), std::string::npos);
  // The residual [cols] broadcast over the rows is read at the chunk's column.
  EXPECT_NE(vec.find("const P8 p1 = *reinterpret_cast<const P8*>(in1 + ((i0 % 768LL) * 1LL));"),
            std::string::npos)
      << vec;
  EXPECT_NE(vec.find("*reinterpret_cast<P8*>(mid + i0) = m;"), std::string::npos);
  EXPECT_NE(vec.find("const F8 sc = *reinterpret_cast<const F8*>(scale + ch * 8);"),
            std::string::npos);
  EXPECT_NE(vec.find("*reinterpret_cast<P8*>(out + i0) = o;"), std::string::npos);
  EXPECT_EQ(vec.find("out[i]"), std::string::npos) << "no scalar stores";
  EXPECT_NE(src->find("struct __align__(16) P8 { T v[8]; };"), std::string::npos);

  // 100 columns, or a transposed input: the scalar kernel only.
  s = spec_of(RowOp::kLayerNorm, Elem::kF16, 10, 100);
  EXPECT_FALSE(row_kernel_vectorizes(s));
  src = fused_row_source(s, "k");
  ASSERT_TRUE(src.ok());
  EXPECT_EQ(src->find("k_v8"), std::string::npos);
  EXPECT_EQ(src->find("P8"), std::string::npos);
  s = spec_of(RowOp::kSoftmax, Elem::kF32, 16, 16);
  s.prologue.access[1] = TensorAccess{{16, 16}, {1, 16}};
  EXPECT_FALSE(row_kernel_vectorizes(s));
  s = spec_of(RowOp::kSoftmax, Elem::kF32, 16, 16);
  s.epilogue.access = {TensorAccess{}, TensorAccess{{16, 16}, {1, 16}}};
  EXPECT_FALSE(row_kernel_vectorizes(s));
  // A reduction's epilogue reads one value a row: it does not stop the chunked reads.
  s.op = RowOp::kReduceMax;
  EXPECT_TRUE(row_kernel_vectorizes(s));

  EXPECT_TRUE(row_access_vectorizes(TensorAccess{}, 8));
  EXPECT_TRUE(row_access_vectorizes(TensorAccess{{4, 12, 64}, {0, 64, 1}}, 768));
  EXPECT_TRUE(row_access_vectorizes(TensorAccess{{3, 4, 16}, {128, 16, 1}}, 16));
  EXPECT_FALSE(row_access_vectorizes(TensorAccess{{3, 4, 16}, {68, 17, 1}}, 16)) << "row stride";
  EXPECT_FALSE(row_access_vectorizes(TensorAccess{{3, 4, 16}, {100, 16, 1}}, 16)) << "not % 8";
  EXPECT_FALSE(row_access_vectorizes(TensorAccess{{4, 16}, {1, 4}}, 16)) << "transposed";
  EXPECT_FALSE(row_access_vectorizes(TensorAccess{{4, 16}, {16, 0}}, 16)) << "one value a row";
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

// ViT's rows (768 columns) take the 16-byte-chunk kernel: LayerNorm in every element type, with
// and without the prologue written out, and the other ops in f16 compile with it.
TEST(FusedRowNvrtc, VectorizedKernelsCompileForSm90) {
  SKIP_WITHOUT_NVRTC();
  CubinOptions options;
  options.use_cache = false;
  for (RowOp op : kAllOps) {
    for (Elem e : {Elem::kF32, Elem::kF16, Elem::kBF16}) {
      for (bool mid : {false, true}) {
        if (op != RowOp::kLayerNorm && (e != Elem::kF16 || mid)) continue;
        SCOPED_TRACE(std::string(row_op_name(op)) + " elem " + std::to_string(static_cast<int>(e)) +
                     (mid ? " mid" : ""));
        RowKernelSpec s = spec_of(op, e, 197 * 4, 768);
        s.write_prologue = mid;
        auto src = fused_row_source(s, "kiln_fused_row");
        ASSERT_TRUE(src.ok()) << src.status().message();
        ASSERT_NE(src->find("kiln_fused_row_v8("), std::string::npos);
        auto cubin = compile_cubin(*src, options);
        ASSERT_TRUE(cubin.ok()) << cubin.status().message() << "\n" << *src;
      }
    }
  }
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
// Without `write_prologue` the prologue is not written out; `misaligned` reads x one element past
// an aligned address (the scalar kernel's fallback).
void check_row_launch(RowOp op, Elem e, int64_t rows, int64_t cols, bool write_prologue = true,
                      bool misaligned = false) {
  SCOPED_TRACE(std::string(row_op_name(op)) + " elem " + std::to_string(static_cast<int>(e)) +
               " cols " + std::to_string(cols) + (write_prologue ? " mid" : "") +
               (misaligned ? " misaligned" : ""));
  RowKernelSpec spec = spec_of(op, e, rows, cols);
  spec.write_prologue = write_prologue;
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
  std::vector<uint8_t> xs(misaligned ? es : 0);
  xs.insert(xs.end(), xb.begin(), xb.end());
  auto dx = on_device(xs.data(), xs.size()), dr = on_device(rb.data(), rb.size());
  const void* x_at = static_cast<const char*>(dx.get()) + (misaligned ? es : 0);
  auto dz = on_device(zb.data(), zb.size());
  auto ds = on_device(scale.data(), scale.size() * 4), db = on_device(bias.data(), bias.size() * 4);
  auto dout = gpu_alloc(static_cast<size_t>(outs) * es);
  auto dmid = gpu_alloc(x.size() * es);
  ASSERT_TRUE(dout.ok() && dmid.ok());
  std::vector<const void*> pointers = {x_at, dr.get()};
  if (op == RowOp::kLayerNorm) pointers.insert(pointers.end(), {ds.get(), db.get()});
  pointers.push_back(dout->get());
  if (write_prologue) pointers.push_back(dmid->get());
  pointers.push_back(dz.get());
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
      if (write_prologue) {
        ASSERT_NEAR(mid[i], p[j], tol * (1 + std::fabs(p[j]))) << "prologue at " << i;
      }
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

// ViT's Add+LayerNormalization rows (768 f16 columns) through the 16-byte-chunk kernel, with and
// without the sum written out, rows spanning several blocks, and the scalar fallback on a
// misaligned input; the other ops' chunked kernels too.
TEST(FusedRowLaunch, VectorizedRowsMatchTheHostReference) {
  if (list_gpus().empty()) GTEST_SKIP() << "no GPU on this machine";
  for (bool mid : {false, true}) {
    check_row_launch(RowOp::kLayerNorm, Elem::kF16, 197 * 2, 768, mid);
    check_row_launch(RowOp::kLayerNorm, Elem::kF16, 9, 768, mid, /*misaligned=*/true);
  }
  for (RowOp op : kAllOps) {
    for (Elem e : {Elem::kF32, Elem::kF16}) check_row_launch(op, e, 13, 1024, false);
  }
}

}  // namespace
}  // namespace kiln::compiler::cuda
