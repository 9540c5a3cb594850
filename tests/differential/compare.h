// SPDX-License-Identifier: Apache-2.0
// Comparing a target's output with ref's, with a tolerance scaled to the output's range.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace kiln::differential {

// Element i of an output passes when |got_i - ref_i| <= range_fraction * range + value_fraction *
// |ref_i|, `range` being the largest |ref_j| of the output (its finite elements).
//
// Why scaled to the range: a target computes the same f32 math in another order (blocked
// reductions, FMA, Winograd transforms, which lose a few bits, vectorized exp/tanh/erf within a
// few ulps). Each output element is a sum of terms no larger than the output's range times the
// (square root of the) number of terms, so the reordering error of any element, also one that
// cancels to near zero, is a few hundred ulps of the range at most for the small models the
// tester builds. 1e-4 of the range is about 800 ulps: above that noise, and far below the errors
// the tester hunts (a wrong window, channel, layout or fused op moves elements by a large part
// of the range, as the recognizer off by 0.59 and the detector off by its whole range did).
// Integer outputs must match exactly; NaN must meet NaN and an infinity the same infinity.
//
// Outputs of 8-bit arithmetic (a DequantizeLinear's) take `quantum_steps` more: a step is the
// smallest gap between two of ref's values (the output's quantization scale). A value near the
// middle of two steps may round either way: the cpu target quantizes as x * (1 / scale) rounded
// with the zero point added (quantized.cc says so), not round(x / scale) + zero point, and
// qdq_fusion rounds a bias to int32; an input off by a step of its own scale (up to twice the
// output's in the patterns) moves the output by up to two. The patterns take 3 steps. The
// allowance is capped at `quantum_cap` of the range, so that an output of a few far-apart values
// gets no free pass.
struct Tolerance {
  double range_fraction = 1e-4;
  double value_fraction = 1e-4;
  double quantum_steps = 0;
  double quantum_cap = 0.05;
};

struct Comparison {
  bool ok = true;
  std::string problem;  // a dtype or shape difference, when there is one
  // The element with the largest error against its tolerance, as a flat index and its ratio
  // (error / tolerance; > 1 fails).
  int64_t worst = -1;
  double worst_ratio = 0;
  double ref = 0;
  double got = 0;
  double tolerance = 0;
  double range = 0;
  int64_t bad = 0;  // how many elements fail
};

Comparison compare(const Tensor& ref, const Tensor& got, const Tolerance& tolerance);

// "[0,3,1,2]": the multi-index of flat element `index` of `shape`.
std::string index_string(const Shape& shape, int64_t index);

}  // namespace kiln::differential
