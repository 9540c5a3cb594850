// SPDX-License-Identifier: Apache-2.0
// The LSTM layer on AVX-512: per step and batch row, the gates of [x_t, h_{t-1}] in blocks of 128
// columns (eight accumulators in registers while the packed rows stream past), then the cell.
#include "compiler/targets/cpu/kernels/lstm.h"

#include <algorithm>
#include <cstring>

#include "compiler/targets/cpu/kernels/sigmoid_avx512.h"
#include "core/check.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define KILN_LSTM_X86 1
#endif

namespace kiln::compiler::cpu {

namespace {

constexpr int64_t kBlock = 128;  // gate columns per block: 8 vectors of 16
constexpr int64_t kVectors = kBlock / 16;

int64_t blocks_of(int64_t hidden) {
  return (4 * hidden + kBlock - 1) / kBlock;
}

int64_t padded16(int64_t n) {
  return (n + 15) / 16 * 16;
}

#if KILN_LSTM_X86
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

__attribute__((target("avx512f"))) inline __m512 tanh_ps(__m512 x) {
  // tanh(x) = 2 sigmoid(2x) - 1
  const __m512 s = sigmoid_ps(_mm512_add_ps(x, x));
  return _mm512_fmsub_ps(s, _mm512_set1_ps(2.0f), _mm512_set1_ps(1.0f));
}

// gates[0, blocks * 128) = bias + v[0, k) times the packed rows.
__attribute__((target("avx512f"))) void gates_of(const float* packed, const float* bias,
                                                 const float* v, int64_t k, int64_t blocks,
                                                 float* gates) {
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const float* rows = packed + blk * k * kBlock;
    __m512 acc[kVectors];
    for (int64_t j = 0; j < kVectors; ++j) acc[j] = _mm512_load_ps(bias + blk * kBlock + 16 * j);
    for (int64_t i = 0; i < k; ++i) {
      const __m512 s = _mm512_set1_ps(v[i]);
      const float* row = rows + i * kBlock;
      for (int64_t j = 0; j < kVectors; ++j) {
        acc[j] = _mm512_fmadd_ps(_mm512_load_ps(row + 16 * j), s, acc[j]);
      }
    }
    for (int64_t j = 0; j < kVectors; ++j) _mm512_store_ps(gates + blk * kBlock + 16 * j, acc[j]);
  }
}

// The cell of one batch row: c = f c + i g, h = o tanh(c), from the gates (i, o, f, g).
__attribute__((target("avx512f"))) void cell(const float* gates, int64_t hidden, float* c, float* h,
                                             float* y) {
  for (int64_t j = 0; j < hidden; j += 16) {
    const __mmask16 m =
        hidden - j >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (hidden - j)) - 1);
    const __m512 i = sigmoid_ps(_mm512_maskz_loadu_ps(m, gates + j));
    const __m512 o = sigmoid_ps(_mm512_maskz_loadu_ps(m, gates + hidden + j));
    const __m512 f = sigmoid_ps(_mm512_maskz_loadu_ps(m, gates + 2 * hidden + j));
    const __m512 g = tanh_ps(_mm512_maskz_loadu_ps(m, gates + 3 * hidden + j));
    const __m512 cn = _mm512_fmadd_ps(f, _mm512_maskz_loadu_ps(m, c + j), _mm512_mul_ps(i, g));
    const __m512 hn = _mm512_mul_ps(o, tanh_ps(cn));
    _mm512_mask_storeu_ps(c + j, m, cn);
    _mm512_mask_storeu_ps(h + j, m, hn);
    if (y != nullptr) _mm512_mask_storeu_ps(y + j, m, hn);
  }
}

#pragma GCC diagnostic pop
#endif

}  // namespace

bool has_fast_lstm() {
#if KILN_LSTM_X86
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
#else
  return false;
#endif
}

size_t lstm_packed_floats(int64_t input, int64_t hidden) {
  const int64_t k = input + hidden;
  return static_cast<size_t>(blocks_of(hidden) * kBlock * (k + 1));
}

size_t lstm_work_floats(int64_t input, int64_t hidden) {
  return static_cast<size_t>(padded16(input + hidden) + blocks_of(hidden) * kBlock);
}

void lstm_pack(const float* w, const float* r, const float* bias, int64_t input, int64_t hidden,
               float* packed) {
  const int64_t k = input + hidden;
  const int64_t blocks = blocks_of(hidden);
  const int64_t gates = 4 * hidden;
  std::memset(packed, 0, lstm_packed_floats(input, hidden) * sizeof(float));
  for (int64_t blk = 0; blk < blocks; ++blk) {
    for (int64_t i = 0; i < k; ++i) {
      float* row = packed + (blk * k + i) * kBlock;
      for (int64_t j = 0; j < kBlock && blk * kBlock + j < gates; ++j) {
        const int64_t g = blk * kBlock + j;
        row[j] = i < input ? w[g * input + i] : r[g * hidden + (i - input)];
      }
    }
  }
  float* b = packed + blocks * k * kBlock;
  if (bias != nullptr) {
    for (int64_t g = 0; g < gates; ++g) b[g] = bias[g] + bias[gates + g];
  }
}

void lstm_f32(const LstmRun& run) {
  KILN_CHECK(has_fast_lstm(), "lstm_f32 needs AVX-512 (check has_fast_lstm() first)");
#if KILN_LSTM_X86
  const int64_t k = run.input + run.hidden;
  const int64_t blocks = blocks_of(run.hidden);
  const float* bias = run.packed + blocks * k * kBlock;
  float* v = run.work;
  float* gates = run.work + padded16(k);
  const size_t state = static_cast<size_t>(run.batch * run.hidden) * sizeof(float);
  if (run.h0 != nullptr) {
    std::memcpy(run.h, run.h0, state);
  } else {
    std::memset(run.h, 0, state);
  }
  if (run.c0 != nullptr) {
    std::memcpy(run.c, run.c0, state);
  } else {
    std::memset(run.c, 0, state);
  }
  for (int64_t s = 0; s < run.steps; ++s) {
    const int64_t t = run.reverse ? run.steps - 1 - s : s;
    for (int64_t b = 0; b < run.batch; ++b) {
      float* h = run.h + b * run.hidden;
      std::memcpy(v, run.x + (t * run.batch + b) * run.input,
                  static_cast<size_t>(run.input) * sizeof(float));
      std::memcpy(v + run.input, h, static_cast<size_t>(run.hidden) * sizeof(float));
      gates_of(run.packed, bias, v, k, blocks, gates);
      float* y = run.y != nullptr ? run.y + t * run.y_step + b * run.hidden : nullptr;
      cell(gates, run.hidden, run.c + b * run.hidden, h, y);
    }
  }
#endif
}

}  // namespace kiln::compiler::cpu
