// SPDX-License-Identifier: Apache-2.0
// ref kernels for the image family's detection ops: RoiAlign and NonMaxSuppression.
#include <algorithm>
#include <cmath>

#include "compiler/ops/image.h"
#include "compiler/ops/infer_util.h"
#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

namespace {

// One bilinear sample of an RoiAlign bin, as ONNX Runtime's RoiAlign computes it: samples more
// than one pixel outside the image are zero; others clamp to the image.
struct RoiSample {
  int64_t pos[4] = {0, 0, 0, 0};
  double weight[4] = {0, 0, 0, 0};
};

RoiSample roi_sample(double y, double x, int64_t height, int64_t width) {
  RoiSample s;
  const auto h = static_cast<double>(height);
  const auto w = static_cast<double>(width);
  if (!(y >= -1.0 && y <= h && x >= -1.0 && x <= w)) return s;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  auto y_low = static_cast<int64_t>(y);
  auto x_low = static_cast<int64_t>(x);
  int64_t y_high = y_low + 1;
  int64_t x_high = x_low + 1;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<double>(y_low);
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<double>(x_low);
  }
  const double ly = y - static_cast<double>(y_low);
  const double lx = x - static_cast<double>(x_low);
  const double hy = 1 - ly;
  const double hx = 1 - lx;
  s.pos[0] = y_low * width + x_low;
  s.pos[1] = y_low * width + x_high;
  s.pos[2] = y_high * width + x_low;
  s.pos[3] = y_high * width + x_high;
  s.weight[0] = hy * hx;
  s.weight[1] = hy * lx;
  s.weight[2] = ly * hx;
  s.weight[3] = ly * lx;
  return s;
}

template <class T>
double as_double(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

// A box as its corners, whichever way the input lists them.
struct Box {
  float y1, x1, y2, x2;
};

Box read_box(const float* p, bool center_point) {
  if (center_point) {
    return {p[1] - p[3] / 2, p[0] - p[2] / 2, p[1] + p[3] / 2, p[0] + p[2] / 2};
  }
  return {std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]), std::max(p[1], p[3])};
}

bool overlaps_more_than(const Box& a, const Box& b, float threshold) {
  const float ix1 = std::max(a.x1, b.x1);
  const float ix2 = std::min(a.x2, b.x2);
  const float iy1 = std::max(a.y1, b.y1);
  const float iy2 = std::min(a.y2, b.y2);
  if (ix2 <= ix1 || iy2 <= iy1) return false;
  const float inter = (ix2 - ix1) * (iy2 - iy1);
  const float area_a = (a.x2 - a.x1) * (a.y2 - a.y1);
  const float area_b = (b.x2 - b.x1) * (b.y2 - b.y1);
  const float uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

}  // namespace

template <>
Status run_op(const ops::RoiAlign& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::vector<double> rois = tensor_to_doubles(ctx.input(1));
  const std::vector<int64_t> batch_indices = tensor_to_ints(ctx.input(2));
  Tensor& y = ctx.output(0);
  const int64_t batch = x.shape()[0], channels = x.shape()[1];
  const int64_t height = x.shape()[2], width = x.shape()[3];
  const int64_t out_h = op.output_height, out_w = op.output_width;
  const bool half_pixel = op.coordinate_transformation_mode == "half_pixel";
  const bool max_mode = op.mode == "max";
  const double offset = half_pixel ? 0.5 : 0.0;
  Status status;
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
                  std::is_same_v<T, BFloat16>) {
      const T* px = x.data<T>();
      T* py = y.data<T>();
      for (size_t r = 0; r < batch_indices.size(); ++r) {
        const int64_t b = batch_indices[r];
        if (b < 0 || b >= batch) {
          status = ctx.errorf("batch_indices[{}] = {} is out of range for {} images", r, b, batch);
          return;
        }
        const double* roi = &rois[r * 4];
        const double start_w = roi[0] * op.spatial_scale - offset;
        const double start_h = roi[1] * op.spatial_scale - offset;
        double roi_w = roi[2] * op.spatial_scale - offset - start_w;
        double roi_h = roi[3] * op.spatial_scale - offset - start_h;
        if (!half_pixel) {
          roi_w = std::max(roi_w, 1.0);
          roi_h = std::max(roi_h, 1.0);
        }
        const double bin_h = roi_h / static_cast<double>(out_h);
        const double bin_w = roi_w / static_cast<double>(out_w);
        const double grid_hd = op.sampling_ratio > 0
                                   ? static_cast<double>(op.sampling_ratio)
                                   : std::ceil(roi_h / static_cast<double>(out_h));
        const double grid_wd = op.sampling_ratio > 0
                                   ? static_cast<double>(op.sampling_ratio)
                                   : std::ceil(roi_w / static_cast<double>(out_w));
        if (!(grid_hd * grid_wd < 1e9)) {
          status = ctx.errorf("roi {} needs too many samples per bin", r);
          return;
        }
        const auto grid_h = static_cast<int64_t>(std::max(grid_hd, 0.0));
        const auto grid_w = static_cast<int64_t>(std::max(grid_wd, 0.0));
        const auto count = static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
        std::vector<RoiSample> samples;
        for (int64_t ph = 0; ph < out_h; ++ph) {
          for (int64_t pw = 0; pw < out_w; ++pw) {
            for (int64_t iy = 0; iy < grid_h; ++iy) {
              const double yy =
                  start_h + static_cast<double>(ph) * bin_h +
                  (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(grid_h);
              for (int64_t ix = 0; ix < grid_w; ++ix) {
                const double xx =
                    start_w + static_cast<double>(pw) * bin_w +
                    (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(grid_w);
                samples.push_back(roi_sample(yy, xx, height, width));
              }
            }
          }
        }
        const size_t per_bin = static_cast<size_t>(grid_h * grid_w);
        for (int64_t c = 0; c < channels; ++c) {
          const T* plane = px + (b * channels + c) * height * width;
          T* out = py + (static_cast<int64_t>(r) * channels + c) * out_h * out_w;
          for (int64_t bin = 0; bin < out_h * out_w; ++bin) {
            double acc = 0.0;
            for (size_t k = 0; k < per_bin; ++k) {
              const RoiSample& s = samples[static_cast<size_t>(bin) * per_bin + k];
              double v[4];
              for (int t = 0; t < 4; ++t) v[t] = s.weight[t] * as_double(plane[s.pos[t]]);
              if (max_mode) {
                const double m = std::max(std::max(v[0], v[1]), std::max(v[2], v[3]));
                acc = k == 0 ? m : std::max(acc, m);
              } else {
                acc += v[0] + v[1] + v[2] + v[3];
              }
            }
            const double v = max_mode ? acc : acc / count;
            if constexpr (std::is_floating_point_v<T>) {
              out[bin] = static_cast<T>(v);
            } else {
              out[bin] = T(static_cast<float>(v));
            }
          }
        }
      }
    } else {
      status = ctx.errorf("unsupported element type {}", dtype_name(x.dtype()));
    }
  });
  return status;
}

template <>
Status run_op(const ops::NonMaxSuppression& op, KernelContext& ctx) {
  const Tensor& boxes = ctx.input(0);
  const Tensor& scores = ctx.input(1);
  const int64_t batch = boxes.shape()[0], num_boxes = boxes.shape()[1];
  const int64_t classes = scores.shape()[1];
  const int64_t max_per_class = ctx.has_input(2) ? tensor_to_ints(ctx.input(2)).at(0) : 0;
  const float iou_threshold = ctx.has_input(3) ? ctx.input(3).data<float>()[0] : 0.0f;
  const bool has_score_threshold = ctx.has_input(4);
  const float score_threshold = has_score_threshold ? ctx.input(4).data<float>()[0] : 0.0f;
  const float* pb = boxes.data<float>();
  const float* ps = scores.data<float>();
  std::vector<int64_t> selected;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < classes; ++c) {
      const float* s = ps + (b * classes + c) * num_boxes;
      std::vector<int64_t> candidates;
      for (int64_t i = 0; i < num_boxes; ++i) {
        if (std::isnan(s[i])) continue;
        if (!has_score_threshold || s[i] > score_threshold) candidates.push_back(i);
      }
      // Highest score first; equal scores keep the lower box index first.
      std::stable_sort(candidates.begin(), candidates.end(),
                       [&](int64_t l, int64_t r) { return s[l] > s[r]; });
      std::vector<Box> kept;
      for (int64_t i : candidates) {
        if (static_cast<int64_t>(kept.size()) >= max_per_class) break;
        const Box box = read_box(pb + (b * num_boxes + i) * 4, op.center_point_box != 0);
        const bool suppressed = std::any_of(kept.begin(), kept.end(), [&](const Box& k) {
          return overlaps_more_than(box, k, iou_threshold);
        });
        if (suppressed) continue;
        kept.push_back(box);
        selected.insert(selected.end(), {b, c, i});
      }
    }
  }
  const auto count = static_cast<int64_t>(selected.size() / 3);
  KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DType::kI64, Shape{count, 3}));
  std::copy(selected.begin(), selected.end(), out->data<int64_t>());
  return Status();
}

}  // namespace kiln::compiler::ref
