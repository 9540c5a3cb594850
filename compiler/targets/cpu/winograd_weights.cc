// SPDX-License-Identifier: Apache-2.0
// Winograd F(2x2, 3x3) weight packing into oneDNN's wino layouts (see winograd_weights.h).
//
// The layouts, as oneDNN 2.6's wino_reorder_t writes them: the transformed weights U[a][b][ic][oc]
// (a, b < alpha = 4; ic, oc padded to the desc's ic and oc) are stored per plane p = a * 4 + b:
//   aaOIoi:  p*IC*OC + (oc/ocb)*ocb*IC + (oc%ocb)*icb + (ic/icb)*ocb*icb + ic%icb
//   aaOio:   p*IC*OC + (oc/W)*IC*W + ic*W + oc%W, W = ocb
//   aaOBiOo: the same with W = oc2_block * ocb
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

constexpr int kAlpha = 4;
constexpr int kR = 3;
// Output channels transformed at once (the widest run a layout stores them in: oc2_block * 16).
constexpr size_t kMaxWidth = 128;

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

// U = G g G^T for `n` 3x3 kernels at once: g[k][l][w] is kernel w's (k, l), u[a][b][w] its (a, b).
// G's entries are 1, 0 and +-1/2, so U's rows are g0, (g0 + g1 + g2) / 2, (g0 - g1 + g2) / 2 and
// g2: the same floats as oneDNN's multiply-adds by G (scaling by 1/2 is exact, adding 0 * x is x),
// summed in its order, in a third of the arithmetic and vectorized over the kernels.
void transform(const float (*g)[kR][kMaxWidth], float (*u)[kAlpha][kMaxWidth], size_t n) {
  float t[kR][kAlpha][kMaxWidth];
  for (int k = 0; k < kR; ++k) {
    for (size_t w = 0; w < n; ++w) {
      const float g0 = g[k][0][w], g1 = g[k][1][w], g2 = g[k][2][w];
      t[k][0][w] = g0;
      t[k][1][w] = 0.5f * ((g0 + g1) + g2);
      t[k][2][w] = 0.5f * ((g0 - g1) + g2);
      t[k][3][w] = g2;
    }
  }
  for (int j = 0; j < kAlpha; ++j) {
    for (size_t w = 0; w < n; ++w) {
      const float t0 = t[0][j][w], t1 = t[1][j][w], t2 = t[2][j][w];
      u[0][j][w] = t0;
      u[1][j][w] = 0.5f * ((t0 + t1) + t2);
      u[2][j][w] = 0.5f * ((t0 - t1) + t2);
      u[3][j][w] = t2;
    }
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
  const bool format_ok = w.wino_format == dnnl_wino_wei_aaOIoi ||
                         w.wino_format == dnnl_wino_wei_aaOio ||
                         w.wino_format == dnnl_wino_wei_aaOBiOo;
  if (!format_ok || w.r != kR || w.alpha != kAlpha || w.adj_scale != 1.0f || s.dims[o + 2] != kR ||
      s.dims[o + 3] != kR || w.oc < s.dims[o] || w.ic < s.dims[o + 1] || w.oc_block <= 0 ||
      w.ic_block <= 0 || w.oc % w.oc_block != 0 || w.ic % w.ic_block != 0) {
    return false;
  }
  if (w.wino_format == dnnl_wino_wei_aaOBiOo &&
      (w.oc2_block <= 0 || (w.oc / w.oc_block) % w.oc2_block != 0)) {
    return false;
  }
  const size_t values = static_cast<size_t>(kAlpha) * kAlpha * w.oc * w.ic;
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
  const size_t width = w.wino_format == dnnl_wino_wei_aaOBiOo
                           ? static_cast<size_t>(w.oc2_block) * ocb
                           : ocb;  // aaOio; aaOIoi has its own offsets
  const bool w_format_runs = w.wino_format != dnnl_wino_wei_aaOIoi;
  auto offset = [&](size_t o, size_t i) {
    if (w.wino_format == dnnl_wino_wei_aaOIoi) {
      return (o / ocb) * ocb * ic + (o % ocb) * icb + (i / icb) * ocb * icb + i % icb;
    }
    return (o / width) * ic * width + i * width + o % width;
  };
  // The `n` output channels from `chunk`, one input channel at a time: for aaOio and aaOBiOo each
  // plane is written in runs of `width` floats.
  auto pack_chunk = [&](size_t chunk, size_t n, float(*g)[kR][kMaxWidth],
                        float(*u)[kAlpha][kMaxWidth]) {
    for (size_t i = 0; i < ic; ++i) {
      for (size_t w = 0; w < n; ++w) {
        const size_t o = chunk + w;
        const float* from = o < src_oc && i < src_ic ? src + (o * src_ic + i) * kR * kR : nullptr;
        for (int k = 0; k < kR * kR; ++k) g[k / kR][k % kR][w] = from != nullptr ? from[k] : 0.0f;
      }
      transform(g, u, n);
      const size_t at = offset(chunk, i);
      const bool contiguous = w_format_runs && (chunk % width) + n <= width;
      for (int a = 0; a < kAlpha; ++a) {
        for (int b = 0; b < kAlpha; ++b) {
          float* to = dst + (a * kAlpha + b) * plane;
          if (contiguous) {
            std::memcpy(to + at, u[a][b], n * sizeof(float));
          } else {
            for (size_t w = 0; w < n; ++w) to[offset(chunk + w, i)] = u[a][b][w];
          }
        }
      }
    }
  };
  const size_t run = std::min(width, kMaxWidth);
  const size_t chunks = (oc + run - 1) / run;
  auto pack_chunks = [&](size_t first, size_t last) {
    float g[kR][kR][kMaxWidth];
    float u[kAlpha][kAlpha][kMaxWidth];
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
