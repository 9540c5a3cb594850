// SPDX-License-Identifier: Apache-2.0
// Winograd weight packing into oneDNN's wino layouts (see winograd_weights.h).
//
// The layouts, as oneDNN 2.6's wino_reorder_t writes them: the transformed weights U[a][b][ic][oc]
// (a, b < alpha; ic, oc padded to the desc's ic and oc). F(2x2, 3x3) (alpha 4) stores them per
// plane p = a * 4 + b:
//   aaOIoi:  p*IC*OC + (oc/ocb)*ocb*IC + (oc%ocb)*icb + (ic/icb)*ocb*icb + ic%icb
//   aaOio:   p*IC*OC + (oc/W)*IC*W + ic*W + oc%W, W = ocb
//   aaOBiOo: the same with W = oc2_block * ocb
// F(4x4, 3x3) (alpha 6) stores them as OBaaIBOIio: output channel chunks of oc2_block * ocb
// outermost, then a, b, input chunks of ic2_block * icb, oc2_block, ic2_block, icb, ocb.
#include "compiler/targets/cpu/winograd_weights.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>

#include "compiler/runtime/threads.h"
#include "core/status.h"

namespace kiln::compiler::cpu {

namespace {

constexpr int kMaxAlpha = 6;
constexpr int kR = 3;
// Output channels transformed at once (the widest run a layout stores them in: oc2_block * 16).
constexpr size_t kMaxWidth = 128;

using Kernels = float[kR][kR][kMaxWidth];                    // g[k][l][w]: kernel w's (k, l)
using Transformed = float[kMaxAlpha][kMaxAlpha][kMaxWidth];  // u[a][b][w]: kernel w's (a, b)

bool is_dense_row_major(const dnnl_memory_desc_t& md) {
  if (md.format_kind != dnnl_blocked || md.format_desc.blocking.inner_nblks != 0) return false;
  dnnl_dim_t stride = 1;
  for (int i = md.ndims; i-- > 0;) {
    if (md.padded_dims[i] != md.dims[i] || md.format_desc.blocking.strides[i] != stride) {
      return false;
    }
    stride *= md.dims[i];
  }
  return md.offset0 == 0;
}

// F(2x2, 3x3): U = G g G^T for `n` 3x3 kernels at once. G's entries are 1, 0 and +-1/2, so U's
// rows are g0, (g0 + g1 + g2) / 2, (g0 - g1 + g2) / 2 and g2: the same floats as oneDNN's
// multiply-adds by G (scaling by 1/2 is exact, adding 0 * x is x), summed in its order, in a third
// of the arithmetic and vectorized over the kernels.
void transform_2x3(Kernels& g, Transformed& u, size_t n) {
  float t[kR][4][kMaxWidth];
  for (int k = 0; k < kR; ++k) {
    for (size_t w = 0; w < n; ++w) {
      const float g0 = g[k][0][w], g1 = g[k][1][w], g2 = g[k][2][w];
      t[k][0][w] = g0;
      t[k][1][w] = 0.5f * ((g0 + g1) + g2);
      t[k][2][w] = 0.5f * ((g0 - g1) + g2);
      t[k][3][w] = g2;
    }
  }
  for (int j = 0; j < 4; ++j) {
    for (size_t w = 0; w < n; ++w) {
      const float t0 = t[0][j][w], t1 = t[1][j][w], t2 = t[2][j][w];
      u[0][j][w] = t0;
      u[1][j][w] = 0.5f * ((t0 + t1) + t2);
      u[2][j][w] = 0.5f * ((t0 - t1) + t2);
      u[3][j][w] = t2;
    }
  }
}

// oneDNN 2.6's G for F(4x4, 3x3) (wino_reorder_t), to the float.
constexpr float kG4x3[6][kR] = {{1.13777777777778f, 0.f, 0.f},
                                {-0.688403361344538f, -0.430252100840336f, -0.26890756302521f},
                                {-0.688403361344538f, 0.430252100840336f, -0.26890756302521f},
                                {0.119514472455649f, 0.179271708683473f, 0.26890756302521f},
                                {0.119514472455649f, -0.179271708683473f, 0.26890756302521f},
                                {0.f, 0.f, 1.f}};

// Four floats in one SSE register: lane-wise arithmetic rounds as scalar floats do (the build
// targets baseline x86-64, without FMA contraction).
using Floats4 = float __attribute__((vector_size(16)));

Floats4 load4(const float* p) {
  Floats4 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

void store4(float* p, Floats4 v) {
  std::memcpy(p, &v, sizeof(v));
}

// F(4x4, 3x3): T = g G^T, then U = G T, each entry summed from 0 in oneDNN's order (one rounding
// per product and per sum), so that the floats are its reorder's; four kernels at a time (kernels
// from `n` on are zeros). 0 + x is kept: it turns a -0 into the +0 oneDNN's sums start from.
void transform_4x3(Kernels& g, Transformed& u, size_t n) {
  const size_t end = (n + 3) / 4 * 4;
  for (int k = 0; k < kR; ++k) {
    for (int l = 0; l < kR; ++l) std::fill(&g[k][l][n], &g[k][l][end], 0.0f);
  }
  const Floats4 zero = {};
  float t[kR][6][kMaxWidth];
  for (int k = 0; k < kR; ++k) {
    for (int j = 0; j < 6; ++j) {
      const float c0 = kG4x3[j][0], c1 = kG4x3[j][1], c2 = kG4x3[j][2];
      for (size_t w = 0; w < end; w += 4) {
        const Floats4 sum =
            ((zero + load4(&g[k][0][w]) * c0) + load4(&g[k][1][w]) * c1) + load4(&g[k][2][w]) * c2;
        store4(&t[k][j][w], sum);
      }
    }
  }
  for (int i = 0; i < 6; ++i) {
    const float c0 = kG4x3[i][0], c1 = kG4x3[i][1], c2 = kG4x3[i][2];
    for (int j = 0; j < 6; ++j) {
      for (size_t w = 0; w < end; w += 4) {
        const Floats4 sum =
            ((zero + c0 * load4(&t[0][j][w])) + c1 * load4(&t[1][j][w])) + c2 * load4(&t[2][j][w]);
        store4(&u[i][j][w], sum);
      }
    }
  }
}

int alpha_of(dnnl_wino_memory_format_t format) {
  switch (format) {
    case dnnl_wino_wei_aaOIoi:
    case dnnl_wino_wei_aaOio:
    case dnnl_wino_wei_aaOBiOo: return 4;
    case dnnl_wino_wei_OBaaIBOIio: return 6;
    default: return 0;
  }
}

}  // namespace

bool can_pack_winograd(const dnnl::memory::desc& src, const dnnl::memory::desc& dst) {
  const dnnl_memory_desc_t& s = src.data;
  const dnnl_memory_desc_t& d = dst.data;
  if (d.format_kind != dnnl_format_kind_wino || d.data_type != dnnl_f32 ||
      s.data_type != dnnl_f32 || !is_dense_row_major(s)) {
    return false;
  }
  if (s.ndims != 4 && !(s.ndims == 5 && s.dims[0] == 1)) return false;
  const int o = s.ndims - 4;
  const dnnl_wino_desc_t& w = d.format_desc.wino_desc;
  const int alpha = alpha_of(w.wino_format);
  if (alpha == 0 || w.r != kR || w.alpha != alpha || w.adj_scale != 1.0f || s.dims[o + 2] != kR ||
      s.dims[o + 3] != kR || w.oc < s.dims[o] || w.ic < s.dims[o + 1] || w.oc_block <= 0 ||
      w.ic_block <= 0 || w.oc % w.oc_block != 0 || w.ic % w.ic_block != 0) {
    return false;
  }
  if ((w.wino_format == dnnl_wino_wei_aaOBiOo || w.wino_format == dnnl_wino_wei_OBaaIBOIio) &&
      (w.oc2_block <= 0 || (w.oc / w.oc_block) % w.oc2_block != 0)) {
    return false;
  }
  if (w.wino_format == dnnl_wino_wei_OBaaIBOIio &&
      (w.ic2_block <= 0 || (w.ic / w.ic_block) % w.ic2_block != 0)) {
    return false;
  }
  const size_t values = static_cast<size_t>(alpha) * alpha * w.oc * w.ic;
  return w.size == values * sizeof(float) && dst.get_size() == w.size;
}

void pack_winograd(const dnnl::memory::desc& src_layout, const float* src,
                   const dnnl::memory::desc& dst_layout, float* dst) {
  KILN_CHECK(can_pack_winograd(src_layout, dst_layout), "pack_winograd: unsupported layouts");
  const dnnl_memory_desc_t& s = src_layout.data;
  const dnnl_wino_desc_t& w = dst_layout.data.format_desc.wino_desc;
  const int o0 = s.ndims - 4;
  const auto src_oc = static_cast<size_t>(s.dims[o0]);
  const auto src_ic = static_cast<size_t>(s.dims[o0 + 1]);
  const auto oc = static_cast<size_t>(w.oc);
  const auto ic = static_cast<size_t>(w.ic);
  const auto ocb = static_cast<size_t>(w.oc_block);
  const auto icb = static_cast<size_t>(w.ic_block);
  const size_t plane = oc * ic;
  const int alpha = alpha_of(w.wino_format);
  const bool obaa = w.wino_format == dnnl_wino_wei_OBaaIBOIio;
  // The widest run of output channels a layout stores contiguously.
  const size_t width = w.wino_format == dnnl_wino_wei_aaOBiOo
                           ? static_cast<size_t>(w.oc2_block) * ocb
                           : ocb;  // aaOio, OBaaIBOIio; aaOIoi has its own offsets
  const bool w_format_runs = w.wino_format != dnnl_wino_wei_aaOIoi;
  const auto oc2 = static_cast<size_t>(w.oc2_block);
  const auto ic2 = static_cast<size_t>(w.ic2_block);
  const size_t ic_chunks = obaa ? ic / (ic2 * icb) : 0;
  // Where U[a][b][i][o] lies.
  auto offset = [&](int a, int b, size_t o, size_t i) -> size_t {
    if (obaa) {
      const size_t outer =
          (((o / (oc2 * ocb)) * alpha + a) * alpha + b) * ic_chunks + i / (ic2 * icb);
      return ((((outer * oc2 + (o / ocb) % oc2) * ic2 + (i / icb) % ic2) * icb + i % icb) * ocb) +
             o % ocb;
    }
    const size_t at = static_cast<size_t>(a * alpha + b) * plane;
    if (w.wino_format == dnnl_wino_wei_aaOIoi) {
      return at + (o / ocb) * ocb * ic + (o % ocb) * icb + (i / icb) * ocb * icb + i % icb;
    }
    return at + (o / width) * ic * width + i * width + o % width;
  };
  auto transform = obaa ? transform_4x3 : transform_2x3;
  // The `n` output channels from `chunk`, one input channel at a time: except for aaOIoi, each
  // (a, b) is written in runs of `width` floats.
  auto pack_chunk = [&](size_t chunk, size_t n, Kernels& g, Transformed& u) {
    for (size_t i = 0; i < ic; ++i) {
      for (size_t w = 0; w < n; ++w) {
        const size_t o = chunk + w;
        const float* from = o < src_oc && i < src_ic ? src + (o * src_ic + i) * kR * kR : nullptr;
        for (int k = 0; k < kR * kR; ++k) g[k / kR][k % kR][w] = from != nullptr ? from[k] : 0.0f;
      }
      transform(g, u, n);
      const bool contiguous = w_format_runs && (chunk % width) + n <= width;
      for (int a = 0; a < alpha; ++a) {
        for (int b = 0; b < alpha; ++b) {
          if (contiguous) {
            std::memcpy(dst + offset(a, b, chunk, i), u[a][b], n * sizeof(float));
          } else {
            for (size_t w = 0; w < n; ++w) dst[offset(a, b, chunk + w, i)] = u[a][b][w];
          }
        }
      }
    }
  };
  const size_t run = std::min(width, kMaxWidth);
  const size_t chunks = (oc + run - 1) / run;
  auto pack_chunks = [&](size_t first, size_t last) {
    Kernels g;
    Transformed u;
    for (size_t c = first; c < last; ++c) pack_chunk(c * run, std::min(run, oc - c * run), g, u);
  };
  // Weights of a megabyte or more are split over the physical cores (chunks write disjoint floats).
  const size_t threads = dst_layout.get_size() >= (size_t{1} << 20)
                             ? std::min<size_t>(chunks, std::max(1, physical_core_count()))
                             : 1;
  std::vector<std::thread> workers;
  for (size_t t = 1; t < threads; ++t) {
    workers.emplace_back(pack_chunks, chunks * t / threads, chunks * (t + 1) / threads);
  }
  pack_chunks(0, chunks / threads);
  for (std::thread& worker : workers) worker.join();
}

}  // namespace kiln::compiler::cpu
