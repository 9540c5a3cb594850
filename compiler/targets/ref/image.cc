// SPDX-License-Identifier: Apache-2.0
// ref kernels for the image op family (Resize, Upsample, GridSample): plain loops in double.
#include "compiler/ops/image.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "compiler/ops/infer_util.h"
#include "compiler/targets/ref/convert.h"
#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

namespace {

template <class T>
constexpr bool kNumeric =
    std::is_arithmetic_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// ---- Resize ----

// The input taps that one output index along one axis reads: offsets (already multiplied by the
// axis stride) and weights, or `outside` when tf_crop_and_resize maps it out of the input.
struct Taps {
  bool outside = false;
  std::vector<int64_t> offsets;
  std::vector<double> weights;
};

std::vector<double> nearest_coeffs(double ratio, std::string_view mode) {
  if (ratio == 1.0 || mode == "ceil") return {0.0, 1.0};
  if (mode == "round_prefer_floor") return {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};
  if (mode == "round_prefer_ceil") return {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
  return {1.0, 0.0};  // floor
}

std::vector<double> cubic_coeffs(double r, double a) {
  const double s = 1.0 - r;
  return {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
          ((a + 2) * r - (a + 3)) * r * r + 1, ((a + 2) * s - (a + 3)) * s * s + 1,
          ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a};
}

// Follows interpolate_1d_with_x of ONNX's numpy reference (onnx/backend/test/case/node/resize.py):
// `length` is the resized length as a real number (scale * input, not floored), and the n taps are
// the n nearest input indices to the source coordinate, reading edge values beyond the input.
Taps resize_taps(const ops::Resize& op, int64_t x, int64_t in, double scale, double roi_start,
                 double roi_end, int64_t stride) {
  const std::string& ctm = op.coordinate_transformation_mode;
  const double length = scale * static_cast<double>(in);
  const auto xd = static_cast<double>(x);
  double src = 0.0;
  Taps taps;
  if (ctm == "align_corners") {
    src = length == 1.0 ? 0.0 : static_cast<double>(x * (in - 1)) / (length - 1.0);
  } else if (ctm == "asymmetric") {
    src = xd / scale;
  } else if (ctm == "tf_crop_and_resize") {
    const double span = roi_end - roi_start;
    const auto last = static_cast<double>(in - 1);
    src = length == 1.0 ? span * last / 2.0 : xd * span * last / (length - 1.0);
    src += roi_start * last;
    if (src < 0.0 || src > last) {
      taps.outside = true;
      return taps;
    }
  } else if (ctm == "pytorch_half_pixel") {
    src = length == 1.0 ? -0.5 : (xd + 0.5) / scale - 0.5;
  } else if (ctm == "tf_half_pixel_for_nn") {
    src = (xd + 0.5) / scale;
  } else {
    src = (xd + 0.5) / scale - 0.5;
  }
  // Far outside the input every tap reads an edge value; bounding src keeps the casts defined.
  src = std::clamp(src, -2.0 * static_cast<double>(in) - 8, 3.0 * static_cast<double>(in) + 8);
  const double floor_src = std::floor(src);
  // The ratio lies in (0, 1]: an integral coordinate counts as a full step past the tap below it.
  const bool integral = src == floor_src;
  const double ratio = integral ? 1.0 : src - floor_src;
  const auto base = static_cast<int64_t>(floor_src) - (integral ? 1 : 0);
  std::vector<double> coeffs;
  if (op.mode == "nearest") {
    coeffs = nearest_coeffs(ratio, op.nearest_mode);
  } else if (op.mode == "linear") {
    coeffs = {1.0 - ratio, ratio};
  } else {
    coeffs = cubic_coeffs(ratio, op.cubic_coeff_a);
  }
  const auto n = static_cast<int64_t>(coeffs.size());
  const int64_t pad = (n + 1) / 2;
  const int64_t first = std::clamp(base - n / 2 + 1, -pad, in + pad - n);
  if (op.exclude_outside != 0) {
    double sum = 0.0;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t idx = first + k;
      if (idx < 0 || idx >= in) coeffs[static_cast<size_t>(k)] = 0.0;
      sum += coeffs[static_cast<size_t>(k)];
    }
    if (sum != 0.0) {
      for (double& c : coeffs) c /= sum;
    }
  }
  for (int64_t k = 0; k < n; ++k) {
    const double c = coeffs[static_cast<size_t>(k)];
    if (c == 0.0) continue;
    taps.offsets.push_back(std::clamp<int64_t>(first + k, 0, in - 1) * stride);
    taps.weights.push_back(c);
  }
  return taps;
}

template <class T>
double resize_sample(const T* x, const std::vector<const Taps*>& taps, size_t d, int64_t offset,
                     double extrapolation) {
  const Taps& t = *taps[d];
  if (t.outside) return extrapolation;
  double sum = 0.0;
  for (size_t k = 0; k < t.offsets.size(); ++k) {
    const int64_t o = offset + t.offsets[k];
    const double v =
        d + 1 == taps.size() ? to_double(x[o]) : resize_sample(x, taps, d + 1, o, extrapolation);
    sum += t.weights[k] * v;
  }
  return sum;
}

// Resizes x into the preallocated y. `scales` holds one factor per axis, or is empty when y's
// shape came from `sizes` (each factor is then output / input). `roi` is empty or starts + ends.
Status resize(KernelContext& ctx, const ops::Resize& op, const Tensor& x,
              std::vector<double> scales, const std::vector<double>& roi, Tensor& y) {
  const Shape& in = x.shape();
  const Shape& out = y.shape();
  const int rank = in.rank();
  if (out.numel() == 0) return Status();
  if (in.numel() == 0) return ctx.errorf("cannot resize the empty input {}", in.to_string());
  if (scales.empty()) {
    for (int d = 0; d < rank; ++d) {
      scales.push_back(static_cast<double>(out[d]) / static_cast<double>(in[d]));
    }
  }
  if (op.coordinate_transformation_mode == "tf_crop_and_resize" &&
      roi.size() != static_cast<size_t>(2 * rank)) {
    return ctx.errorf("expected {} roi values, got {}", 2 * rank, roi.size());
  }
  const std::vector<int64_t> strides = in.strides();
  std::vector<std::vector<Taps>> axis_taps(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d) {
    const auto du = static_cast<size_t>(d);
    const double start = roi.empty() ? 0.0 : roi[du];
    const double end = roi.empty() ? 1.0 : roi[du + static_cast<size_t>(rank)];
    for (int64_t o = 0; o < out[d]; ++o) {
      axis_taps[du].push_back(resize_taps(op, o, in[d], scales[du], start, end, strides[du]));
    }
  }
  Status status;
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (kNumeric<T>) {
      const T* px = x.data<T>();
      T* py = y.data<T>();
      std::vector<int64_t> index(static_cast<size_t>(rank), 0);
      std::vector<const Taps*> taps(static_cast<size_t>(rank));
      for (int64_t i = 0; i < out.numel(); ++i) {
        for (size_t d = 0; d < taps.size(); ++d)
          taps[d] = &axis_taps[d][static_cast<size_t>(index[d])];
        py[i] = from_double<T>(resize_sample(px, taps, 0, 0, op.extrapolation_value),
                               IntRounding::kNearestEven);
        for (int d = rank - 1; d >= 0; --d) {
          if (++index[static_cast<size_t>(d)] < out[d]) break;
          index[static_cast<size_t>(d)] = 0;
        }
      }
    } else {
      status = ctx.errorf("cannot resize {} tensors", dtype_name(x.dtype()));
    }
  });
  return status;
}

// The values of an optional float input, or empty when it is absent or empty.
std::vector<double> optional_doubles(const KernelContext& ctx, int i) {
  return ctx.has_input(i) ? tensor_to_doubles(ctx.input(i)) : std::vector<double>();
}

// ---- GridSample (PyTorch's grid_sampler_2d) ----

double reflect(double v, double twice_low, double twice_high) {
  if (twice_low == twice_high) return 0.0;
  const double low = twice_low / 2;
  const double span = (twice_high - twice_low) / 2;
  v = std::fabs(v - low);
  const double extra = std::fmod(v, span);
  const double flips = std::floor(v / span);
  return std::fmod(flips, 2.0) == 0.0 ? extra + low : span - extra + low;
}

struct GridSampler {
  const ops::GridSample& op;
  int64_t height;
  int64_t width;

  double unnormalize(double v, int64_t size) const {
    const auto s = static_cast<double>(size);
    return op.align_corners != 0 ? (v + 1) / 2 * (s - 1) : ((v + 1) * s - 1) / 2;
  }
  // Applies the padding mode to a source coordinate.
  double pad(double v, int64_t size) const {
    const auto s = static_cast<double>(size);
    if (op.padding_mode == "border") return std::clamp(v, 0.0, s - 1);
    if (op.padding_mode == "reflection") {
      v = op.align_corners != 0 ? reflect(v, 0, 2 * (s - 1)) : reflect(v, -1, 2 * s - 1);
      return std::clamp(v, 0.0, s - 1);
    }
    return v;
  }
  // Reads plane[y][x] at integral coordinates, 0 outside (NaN included).
  template <class T>
  double at(const T* plane, double y, double x) const {
    if (!(y >= 0 && y < static_cast<double>(height) && x >= 0 && x < static_cast<double>(width))) {
      return 0.0;
    }
    return to_double(plane[static_cast<int64_t>(y) * width + static_cast<int64_t>(x)]);
  }

  template <class T>
  double sample(const T* plane, double gx, double gy) const {
    if (op.mode == "bicubic") {
      const double ix = unnormalize(gx, width);
      const double iy = unnormalize(gy, height);
      const double x0 = std::floor(ix);
      const double y0 = std::floor(iy);
      const std::vector<double> cx = cubic_coeffs(ix - x0, -0.75);
      const std::vector<double> cy = cubic_coeffs(iy - y0, -0.75);
      double sum = 0.0;
      for (int j = 0; j < 4; ++j) {
        const double yy = pad(y0 - 1 + j, height);
        double row = 0.0;
        for (int i = 0; i < 4; ++i) {
          const double xx = pad(x0 - 1 + i, width);
          row += cx[static_cast<size_t>(i)] * at(plane, std::floor(yy), std::floor(xx));
        }
        sum += cy[static_cast<size_t>(j)] * row;
      }
      return sum;
    }
    const double ix = pad(unnormalize(gx, width), width);
    const double iy = pad(unnormalize(gy, height), height);
    if (op.mode == "nearest") {
      return at(plane, std::nearbyint(iy), std::nearbyint(ix));
    }
    const double x0 = std::floor(ix);
    const double y0 = std::floor(iy);
    const double tx = ix - x0;
    const double ty = iy - y0;
    return (1 - ty) * ((1 - tx) * at(plane, y0, x0) + tx * at(plane, y0, x0 + 1)) +
           ty * ((1 - tx) * at(plane, y0 + 1, x0) + tx * at(plane, y0 + 1, x0 + 1));
  }
};

}  // namespace

template <>
Status run_op(const ops::Resize& op, KernelContext& ctx) {
  std::vector<double> scales = optional_doubles(ctx, 2);
  return resize(ctx, op, ctx.input(0), std::move(scales), optional_doubles(ctx, 1), ctx.output(0));
}

template <>
Status run_op(const ops::Upsample& op, KernelContext& ctx) {
  ops::Resize resize_op;
  resize_op.mode = op.mode;
  resize_op.coordinate_transformation_mode = "asymmetric";
  resize_op.nearest_mode = "floor";
  return resize(ctx, resize_op, ctx.input(0), tensor_to_doubles(ctx.input(1)), {}, ctx.output(0));
}

template <>
Status run_op(const ops::GridSample& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::vector<double> grid = tensor_to_doubles(ctx.input(1));
  Tensor& y = ctx.output(0);
  const Shape& xs = x.shape();
  const int64_t batch = xs[0], channels = xs[1];
  const int64_t out_h = y.shape()[2], out_w = y.shape()[3];
  const GridSampler sampler{op, xs[2], xs[3]};
  Status status;
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (kNumeric<T>) {
      const T* px = x.data<T>();
      T* py = y.data<T>();
      for (int64_t n = 0; n < batch; ++n) {
        for (int64_t p = 0; p < out_h * out_w; ++p) {
          const size_t g = static_cast<size_t>((n * out_h * out_w + p) * 2);
          for (int64_t c = 0; c < channels; ++c) {
            const T* plane = px + (n * channels + c) * xs[2] * xs[3];
            py[(n * channels + c) * out_h * out_w + p] = from_double<T>(
                sampler.sample(plane, grid[g], grid[g + 1]), IntRounding::kNearestEven);
          }
        }
      }
    } else {
      status = ctx.errorf("cannot sample {} tensors", dtype_name(x.dtype()));
    }
  });
  return status;
}

}  // namespace kiln::compiler::ref
