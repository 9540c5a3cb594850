// SPDX-License-Identifier: Apache-2.0
// SiLU, sigmoid and channel means in place over f32 buffers, on AVX-512, split over the OpenMP
// threads oneDNN runs on.
#include "compiler/targets/cpu/kernels/silu.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "compiler/targets/cpu/kernels/sigmoid_avx512.h"
#include "core/check.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define KILN_SILU_X86 1
#endif

namespace kiln::compiler::cpu {

namespace {

// Chunks of 16 KiB; below two of them the fork costs more than a second thread saves.
constexpr size_t kChunk = 4096;

#if KILN_SILU_X86
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which it then reports as maybe
// used uninitialized once inlined (a known false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) inline void silu16(float* data, __mmask16 m) {
  _mm512_mask_storeu_ps(data, m, silu_ps(_mm512_maskz_loadu_ps(m, data)));
}

// Denormal inputs and results flushed to zero (MXCSR DAZ and FTZ) while it runs: each arithmetic
// instruction on a denormal takes a microcode assist of about 100 cycles, and the deep layers of
// randomly initialised networks are full of them (5x slower there). silu of a denormal is below
// 1e-38 either way. The thread's own setting comes back after.
__attribute__((target("avx512f"))) void silu_chunk(float* data, size_t n) {
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8040);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) silu16(data + i, 0xffff);
  if (i < n) silu16(data + i, static_cast<__mmask16>((1u << (n - i)) - 1));
  _mm_setcsr(csr);
}

__attribute__((target("avx512f"))) void sigmoid_chunk(float* data, size_t n) {
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8040);
  for (size_t i = 0; i < n; i += 16) {
    const auto m = static_cast<__mmask16>(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(data + i, m, sigmoid_ps(_mm512_maskz_loadu_ps(m, data + i)));
  }
  _mm_setcsr(csr);
}

// The lane sums of `vectors` vectors of 16 floats at `data` (silu applied in place first when
// `silu`), times `scale`, to out[0..16). Denormals flushed as in silu_chunk.
__attribute__((target("avx512f"))) void pool_range(float* data, size_t vectors, bool silu,
                                                   float scale, float* out) {
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8040);
  __m512 even = _mm512_setzero_ps();
  __m512 odd = _mm512_setzero_ps();
  size_t i = 0;
  if (silu) {
    for (; i + 2 <= vectors; i += 2) {
      const __m512 a = silu_ps(_mm512_loadu_ps(data + 16 * i));
      const __m512 b = silu_ps(_mm512_loadu_ps(data + 16 * i + 16));
      _mm512_storeu_ps(data + 16 * i, a);
      _mm512_storeu_ps(data + 16 * i + 16, b);
      even = _mm512_add_ps(even, a);
      odd = _mm512_add_ps(odd, b);
    }
    if (i < vectors) {
      const __m512 a = silu_ps(_mm512_loadu_ps(data + 16 * i));
      _mm512_storeu_ps(data + 16 * i, a);
      even = _mm512_add_ps(even, a);
    }
  } else {
    for (; i + 2 <= vectors; i += 2) {
      even = _mm512_add_ps(even, _mm512_loadu_ps(data + 16 * i));
      odd = _mm512_add_ps(odd, _mm512_loadu_ps(data + 16 * i + 16));
    }
    if (i < vectors) even = _mm512_add_ps(even, _mm512_loadu_ps(data + 16 * i));
  }
  _mm512_storeu_ps(out, _mm512_mul_ps(_mm512_add_ps(even, odd), _mm512_set1_ps(scale)));
  _mm_setcsr(csr);
}
#pragma GCC diagnostic pop
#else
void silu_chunk(float*, size_t) {}
void sigmoid_chunk(float*, size_t) {}
void pool_range(float*, size_t, bool, float, float*) {}
#endif

}  // namespace

bool has_fast_silu() {
#if KILN_SILU_X86
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
#else
  return false;
#endif
}

void silu_f32(float* data, size_t n) {
  KILN_CHECK(has_fast_silu(), "silu_f32 needs AVX-512 (check has_fast_silu() first)");
  const auto chunks = static_cast<int64_t>((n + kChunk - 1) / kChunk);
  if (chunks < 2) {
    silu_chunk(data, n);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const size_t first = static_cast<size_t>(c) * kChunk;
    silu_chunk(data + first, std::min(kChunk, n - first));
  }
}

void sigmoid_f32(float* data, size_t n) {
  KILN_CHECK(has_fast_silu(), "sigmoid_f32 needs AVX-512 (check has_fast_silu() first)");
  sigmoid_chunk(data, n);
}

void pool16_f32(float* data, size_t blocks, size_t pixels, bool silu, float* pooled) {
  KILN_CHECK(has_fast_silu(), "pool16_f32 needs AVX-512 (check has_fast_silu() first)");
  const float scale = 1.0f / static_cast<float>(pixels);
  const size_t block_floats = 16 * pixels;
  // Work items of at most kChunk floats, each within one block; on one thread below two of them
  // (as silu_f32).
  constexpr size_t kVectors = kChunk / 16;
  if (blocks * block_floats < 2 * kChunk) {
    for (size_t b = 0; b < blocks; ++b) {
      pool_range(data + b * block_floats, pixels, silu, scale, pooled + 16 * b);
    }
    return;
  }
  const auto nblocks = static_cast<int64_t>(blocks);
  if (pixels <= kVectors) {
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nblocks; ++b) {
      const auto u = static_cast<size_t>(b);
      pool_range(data + u * block_floats, pixels, silu, scale, pooled + 16 * u);
    }
    return;
  }
  // Large blocks (the first layers' few channel blocks of many pixels) split into parts whose
  // sums add up after.
  const size_t parts = (pixels + kVectors - 1) / kVectors;
  std::vector<float> partial(blocks * parts * 16);
  const auto items = static_cast<int64_t>(blocks * parts);
#pragma omp parallel for schedule(static)
  for (int64_t item = 0; item < items; ++item) {
    const auto u = static_cast<size_t>(item);
    const size_t b = u / parts;
    const size_t first = u % parts * kVectors;
    pool_range(data + b * block_floats + 16 * first, std::min(kVectors, pixels - first), silu,
               scale, partial.data() + 16 * u);
  }
  for (size_t b = 0; b < blocks; ++b) {
    for (size_t lane = 0; lane < 16; ++lane) {
      float sum = 0.0f;
      for (size_t p = 0; p < parts; ++p) sum += partial[(b * parts + p) * 16 + lane];
      pooled[16 * b + lane] = sum;
    }
  }
}

}  // namespace kiln::compiler::cpu
