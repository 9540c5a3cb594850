// SPDX-License-Identifier: Apache-2.0
// SiLU in place after a oneDNN step, on AVX-512, split over the OpenMP threads oneDNN runs on.
#include "compiler/targets/cpu/silu.h"

#include <algorithm>
#include <cstdint>

#include "core/check.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define KILN_SILU_X86 1
#endif

namespace kiln::compiler::cpu {

namespace {

#if KILN_SILU_X86
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which it then reports as maybe
// used uninitialized once inlined (a known false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// x / (1 + 2^t), t = -x log2(e) capped at 126 (so that 1 + 2^t stays finite and its reciprocal is
// no 0 * inf = NaN in the Newton step): 2^t as 2^(t - k), k = round(t), by a degree-6 Taylor
// polynomial (relative error under 2e-7), scaled by 2^k with vscalefps; the reciprocal by
// vrcp14ps refined by one Newton step. 15 vector operations, no division. 16 floats at `data`
// (those of mask `m`).
__attribute__((target("avx512f"))) inline void silu16(float* data, __mmask16 m) {
  const __m512 x = _mm512_maskz_loadu_ps(m, data);
  const __m512 t = _mm512_min_ps(_mm512_mul_ps(x, _mm512_set1_ps(-1.44269504088896341f)),
                                 _mm512_set1_ps(126.0f));
  const __m512 k = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, k);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.5403530e-4f), f, _mm512_set1_ps(1.3333558e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504109e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022650e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  const __m512 den = _mm512_add_ps(_mm512_scalef_ps(p, k), _mm512_set1_ps(1.0f));
  __m512 r = _mm512_rcp14_ps(den);
  r = _mm512_mul_ps(r, _mm512_fnmadd_ps(den, r, _mm512_set1_ps(2.0f)));
  _mm512_mask_storeu_ps(data, m, _mm512_mul_ps(x, r));
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
#pragma GCC diagnostic pop
#else
void silu_chunk(float*, size_t) {}
#endif

class SiluAfterStep final : public Step {
 public:
  SiluAfterStep(std::unique_ptr<Step> step, int dst, size_t elements)
      : step_(std::move(step)), dst_(dst), elements_(elements) {
    node = step_->node;
    kind = step_->kind;
    reads = step_->reads;
    writes = step_->writes;
    one_thread = step_->one_thread;
  }

  Status run(StepContext& ctx) const override {
    KILN_RETURN_IF_ERROR(step_->run(ctx));
    silu_f32(static_cast<float*>(ctx.data[static_cast<size_t>(dst_)]), elements_);
    return Status();
  }

 private:
  std::unique_ptr<Step> step_;
  int dst_;
  size_t elements_;
};

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
  // Chunks of 16 KiB; below two of them the fork costs more than a second thread saves.
  constexpr size_t kChunk = 4096;
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

std::unique_ptr<Step> silu_after(std::unique_ptr<Step> step, int dst, size_t elements) {
  return std::make_unique<SiluAfterStep>(std::move(step), dst, elements);
}

}  // namespace kiln::compiler::cpu
