// SPDX-License-Identifier: Apache-2.0
// RangeObserver: the value range of one activation over calibration batches, and the int8
// threshold each calibration method picks from it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/quantize/quantize.h"
#include "core/tensor.h"

namespace kiln::compiler {

// Tracks min, max and a histogram of |x| over [0, range) in `bins` equal bins. The range starts
// at the first batch's largest |x| and doubles (merging bin pairs exactly) whenever a batch goes
// beyond it, so the histogram never needs the data again.
class RangeObserver {
 public:
  explicit RangeObserver(int bins = 2048);

  // Adds the elements of a float tensor (f32, f16, bf16 or f64).
  void observe(const Tensor& values);
  void observe(const float* values, int64_t count);
  // Adds `count` elements known only by their least and greatest value: enough for max_abs() and
  // the max method, not for the histogram (percentile and entropy need observe()).
  void observe_range(double lo, double hi, int64_t count);

  int64_t count() const { return count_; }
  double min() const { return min_; }
  double max() const { return max_; }
  double max_abs() const;
  // The |x| below which `percentile` percent of the elements lie (upper edge of its bin).
  double percentile(double percentile) const;
  // The |x| threshold minimising the KL divergence between the histogram clipped at the
  // threshold and its quantization to `levels` levels (TensorRT's entropy calibration).
  double entropy_threshold(int levels) const;
  // The threshold `method` picks; `levels` is 128 for s8 and 256 for u8.
  double threshold(CalibrationMethod method, double percentile, int levels) const;

  const std::vector<double>& histogram() const { return histogram_; }
  double range() const { return range_; }

 private:
  void grow_to(double max_abs);

  std::vector<double> histogram_;
  double range_ = 0;
  int64_t count_ = 0;
  double min_ = 0;
  double max_ = 0;
};

// The ranges one calibration observed, by IR value name (quantize.h).
struct ObservedRanges {
  std::map<std::string, RangeObserver> values;
};

}  // namespace kiln::compiler
