// SPDX-License-Identifier: Apache-2.0
// Sigmoid and SiLU of 16 floats in AVX-512 registers, for kernels that apply them in place of a
// separate pass (silu.cc, stem.cc). Empty off x86.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

namespace kiln::compiler::cpu {

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which it then reports as maybe
// used uninitialized once inlined (a known false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// x / (1 + 2^t), t = -x log2(e) capped at 126 (so that 1 + 2^t stays finite and its reciprocal is
// no 0 * inf = NaN in the Newton step): 2^t as 2^(t - k), k = round(t), by a degree-6 Taylor
// polynomial (relative error under 2e-7), scaled by 2^k with vscalefps; the reciprocal by
// vrcp14ps refined by one Newton step. 15 vector operations, no division.
__attribute__((target("avx512f"))) inline __m512 sigmoid_ps(__m512 x) {
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
  return _mm512_mul_ps(r, _mm512_fnmadd_ps(den, r, _mm512_set1_ps(2.0f)));
}

__attribute__((target("avx512f"))) inline __m512 silu_ps(__m512 x) {
  return _mm512_mul_ps(x, sigmoid_ps(x));
}

#pragma GCC diagnostic pop

}  // namespace kiln::compiler::cpu
#endif
