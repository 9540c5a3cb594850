// SPDX-License-Identifier: Apache-2.0
// ref kernels for the image op family (Resize, Upsample, GridSample): plain loops in double.
#include "compiler/ops/image.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "compiler/ops/image_util.h"
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

// Antialiased taps (opset 18): when downsampling by `scale` the linear or cubic kernel is
// stretched by 1 / scale, so it spans 2 / scale (4 / scale) input pixels; the weights, of the taps
// at distances i - ratio for i from 1 - n/2, are normalized to add up to 1.
std::vector<double> antialias_coeffs(double ratio, double scale, bool cubic, double a) {
  scale = std::min(scale, 1.0);
  const double support = cubic ? 2.0 : 1.0;
  const auto start = static_cast<int64_t>(std::floor(-support / scale) + 1);
  const int64_t n = 2 - 2 * start;
  std::vector<double> coeffs;
  double sum = 0.0;
  for (int64_t i = start; i < start + n; ++i) {
    const double x = std::fabs(scale * (static_cast<double>(i) - ratio));
    double c = 0.0;
    if (!cubic) {
      c = std::max(0.0, 1.0 - x);
    } else if (x <= 1) {
      c = ((a + 2) * x - (a + 3)) * x * x + 1;
    } else if (x < 2) {
      c = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    }
    coeffs.push_back(c);
    sum += c;
  }
  for (double& c : coeffs) c /= sum;
  return coeffs;
}

// Follows interpolate_1d_with_x of ONNX's numpy reference (onnx/backend/test/case/node/resize.py):
// `length` is the resized length as a real number (scale * input, not floored), `out` the output
// size, and the n taps are the n nearest input indices to the source coordinate, reading edge
// values beyond the input.
Taps resize_taps(const ops::Resize& op, int64_t x, int64_t in, int64_t out, double scale,
                 double roi_start, double roi_end, int64_t stride) {
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
  } else if (ctm == "half_pixel_symmetric") {
    // half_pixel, with the output's rounding shared out evenly on both sides.
    const double adjustment = static_cast<double>(out) / length;
    src = static_cast<double>(in) / 2 * (1 - adjustment) + (xd + 0.5) / scale - 0.5;
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
  } else if (op.antialias != 0) {
    coeffs = antialias_coeffs(ratio, scale, op.mode == "cubic", op.cubic_coeff_a);
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

// Resizes x into the preallocated y by the per-axis scales of `g` (its roi: empty, or starts and
// ends of every axis).
Status resize(KernelContext& ctx, const ops::Resize& op, const Tensor& x, const ResizeGeometry& g,
              Tensor& y) {
  const Shape& in = x.shape();
  const Shape& out = y.shape();
  const int rank = in.rank();
  if (out.numel() == 0) return Status();
  if (in.numel() == 0) return ctx.errorf("cannot resize the empty input {}", in.to_string());
  const std::vector<double>& scales = g.scales;
  const std::vector<double>& roi = g.roi;
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
      axis_taps[du].push_back(
          resize_taps(op, o, in[d], out[d], scales[du], start, end, strides[du]));
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

// Samples one plane of N spatial dims at grid coordinates (PyTorch's grid_sampler, every mode).
struct GridSampler {
  const ops::GridSample& op;
  std::vector<int64_t> dims;     // the plane's sizes
  std::vector<int64_t> strides;  // and strides, row-major

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

  struct Tap {
    double index;  // integral, possibly outside the plane (or NaN)
    double weight;
  };
  // The taps along one axis for the normalized coordinate g.
  std::vector<Tap> taps(double g, int64_t size) const {
    if (op.mode == "cubic" || op.mode == "bicubic") {
      const double i = unnormalize(g, size);
      const double i0 = std::floor(i);
      const std::vector<double> c = cubic_coeffs(i - i0, -0.75);
      std::vector<Tap> t;
      for (int k = 0; k < 4; ++k) t.push_back({std::floor(pad(i0 - 1 + k, size)), c[static_cast<size_t>(k)]});
      return t;
    }
    const double i = pad(unnormalize(g, size), size);
    if (op.mode == "nearest") return {{std::nearbyint(i), 1.0}};
    const double i0 = std::floor(i);
    return {{i0, 1 - (i - i0)}, {i0 + 1, i - i0}};
  }

  // The weighted sum over the taps of axes [axis, rank), at `offset` into the plane; taps outside
  // the plane read 0.
  template <class T>
  double sum(const T* plane, const std::vector<std::vector<Tap>>& axis_taps, size_t axis,
             int64_t offset) const {
    double total = 0.0;
    for (const Tap& t : axis_taps[axis]) {
      if (t.weight == 0.0) continue;
      if (!(t.index >= 0 && t.index < static_cast<double>(dims[axis]))) continue;
      const int64_t at = offset + static_cast<int64_t>(t.index) * strides[axis];
      total += t.weight * (axis + 1 == dims.size() ? to_double(plane[at])
                                                    : sum(plane, axis_taps, axis + 1, at));
    }
    return total;
  }
};

}  // namespace

template <>
Status run_op(const ops::Resize& op, KernelContext& ctx) {
  const std::vector<double> scales = optional_doubles(ctx, 2);
  const std::vector<int64_t> sizes =
      ctx.has_input(3) ? tensor_to_ints(ctx.input(3)) : std::vector<int64_t>();
  std::vector<double> roi;
  if (op.coordinate_transformation_mode == "tf_crop_and_resize") roi = optional_doubles(ctx, 1);
  const Shape& in = ctx.input(0).shape();
  const std::vector<int64_t> dims(in.begin(), in.end());
  KILN_ASSIGN_OR_RETURN(ResizeGeometry g,
                        ctx.named(scales.empty() ? resize_geometry(op, dims, nullptr, &sizes, roi)
                                                  : resize_geometry(op, dims, &scales, nullptr, roi)));
  return resize(ctx, op, ctx.input(0), g, ctx.output(0));
}

template <>
Status run_op(const ops::Upsample& op, KernelContext& ctx) {
  ops::Resize resize_op;
  resize_op.mode = op.mode;
  resize_op.coordinate_transformation_mode = "asymmetric";
  resize_op.nearest_mode = "floor";
  const std::vector<double> scales = tensor_to_doubles(ctx.input(1));
  const Shape& in = ctx.input(0).shape();
  const std::vector<int64_t> dims(in.begin(), in.end());
  KILN_ASSIGN_OR_RETURN(ResizeGeometry g,
                        ctx.named(resize_geometry(resize_op, dims, &scales, nullptr, {})));
  return resize(ctx, resize_op, ctx.input(0), g, ctx.output(0));
}

template <>
Status run_op(const ops::GridSample& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::vector<double> grid = tensor_to_doubles(ctx.input(1));
  Tensor& y = ctx.output(0);
  const Shape& xs = x.shape();
  const int64_t batch = xs[0], channels = xs[1];
  GridSampler sampler{op, std::vector<int64_t>(xs.begin() + 2, xs.end()), {}};
  const size_t rank = sampler.dims.size();
  sampler.strides.assign(rank, 1);
  for (size_t a = rank - 1; a-- > 0;) sampler.strides[a] = sampler.strides[a + 1] * sampler.dims[a + 1];
  const int64_t plane = rank == 0 ? 1 : sampler.strides[0] * sampler.dims[0];
  const int64_t points = batch == 0 || channels == 0 ? 0 : y.numel() / (batch * channels);
  std::vector<std::vector<GridSampler::Tap>> taps(rank);
  Status status;
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (kNumeric<T>) {
      const T* px = x.data<T>();
      T* py = y.data<T>();
      for (int64_t n = 0; n < batch; ++n) {
        for (int64_t p = 0; p < points; ++p) {
          // The grid lists coordinates innermost axis first: (x, y[, z]).
          const size_t g = static_cast<size_t>((n * points + p) * static_cast<int64_t>(rank));
          for (size_t a = 0; a < rank; ++a) {
            taps[a] = sampler.taps(grid[g + rank - 1 - a], sampler.dims[a]);
          }
          for (int64_t c = 0; c < channels; ++c) {
            py[(n * channels + c) * points + p] = from_double<T>(
                sampler.sum(px + (n * channels + c) * plane, taps, 0, 0), IntRounding::kNearestEven);
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
