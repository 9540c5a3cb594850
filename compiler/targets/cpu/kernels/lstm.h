// SPDX-License-Identifier: Apache-2.0
// An LSTM layer (ONNX's gates i, o, f, c; sigmoid, tanh, tanh; no peepholes, no clip) over f32
// buffers on AVX-512, for the small recurrent models the cpu target meets (Silero VAD's cell of
// 128): each step multiplies [x_t, h_{t-1}] by the gates' weights packed once, in column blocks
// whose accumulators stay in registers, and updates the cell in the same pass.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::compiler::cpu {

// Whether lstm_f32 runs here (x86 with AVX-512).
bool has_fast_lstm();

// Floats of one direction's packed weights (lstm_pack) for `input` inputs and `hidden` units.
size_t lstm_packed_floats(int64_t input, int64_t hidden);

// Packs one direction's W [4 hidden, input] and R [4 hidden, hidden] (row-major, ONNX's gate
// order) and its biases Wb + Rb (`bias`, 8 hidden floats, or null for none) into `packed`
// (lstm_packed_floats floats, 64-byte aligned): [x, h] times the weights, block of 128 gate
// columns after block, then the summed biases.
void lstm_pack(const float* w, const float* r, const float* bias, int64_t input, int64_t hidden,
               float* packed);

// One direction of a layer over `steps` time steps.
struct LstmRun {
  int64_t steps = 0;
  int64_t batch = 0;
  int64_t input = 0;
  int64_t hidden = 0;
  bool reverse = false;           // from the last step to the first
  const float* packed = nullptr;  // lstm_pack's
  const float* x = nullptr;       // [steps, batch, input]
  const float* h0 = nullptr;      // [batch, hidden], or null for zeros
  const float* c0 = nullptr;      // [batch, hidden], or null for zeros
  float* y = nullptr;             // h of step t, batch b at y + t * y_step + b * hidden; or null
  int64_t y_step = 0;
  float* h = nullptr;     // [batch, hidden]: the state as it goes, the last h at the end
  float* c = nullptr;     // [batch, hidden]: likewise the cell
  float* work = nullptr;  // lstm_work_floats floats, 64-byte aligned
};

// Floats of LstmRun::work for a layer of `input` inputs and `hidden` units.
size_t lstm_work_floats(int64_t input, int64_t hidden);

// Runs `run` on the calling thread; needs has_fast_lstm(). h and c may not overlap x, h0, c0 or y.
void lstm_f32(const LstmRun& run);

}  // namespace kiln::compiler::cpu
