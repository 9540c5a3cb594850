// SPDX-License-Identifier: Apache-2.0
// random_bbox_crop: a random crop window that keeps the boxes overlapping it enough (SSD's crop,
// DALI's random_bbox_crop), with the boxes cropped to it.
#include <fmt/format.h>

#include <cstring>

#include "pipeline/kernels/bbox.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

// Attempts before a sample with total_num_attempts = -1 gives up and keeps the whole image (only
// reachable when no window can satisfy the thresholds and allow_no_crop is false).
constexpr int64_t kUnlimitedAttempts = 100000;

Tensor vec2(double a, double b) {
  Tensor t(DType::kF32, Shape{2});
  t.data<float>()[0] = static_cast<float>(a);
  t.data<float>()[1] = static_cast<float>(b);
  return t;
}

// The rows `kept` of `labels` (first dimension: one row per box).
Tensor select_rows(const Tensor& labels, const std::vector<int64_t>& kept) {
  std::vector<int64_t> dims = labels.shape().dims();
  const int64_t n = dims[0];
  dims[0] = static_cast<int64_t>(kept.size());
  Tensor out(labels.dtype(), Shape(dims));
  const size_t row = n > 0 ? labels.nbytes() / static_cast<size_t>(n) : 0;
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  const auto* src = static_cast<const uint8_t*>(labels.raw_data());
  for (size_t i = 0; i < kept.size(); ++i) {
    std::memcpy(dst + i * row, src + static_cast<size_t>(kept[i]) * row, row);
  }
  return out;
}

class RandomBboxCrop final : public Operator {
 public:
  RandomBboxCrop(OpArgs args, kernels::BoxLayout layout)
      : Operator(std::move(args)), layout_(layout) {}

  Status run(const SampleContext& ctx, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override {
    const Tensor& boxes = inputs[0];
    const Tensor& labels = inputs[1];
    KILN_RETURN_IF_ERROR(check_boxes("random_bbox_crop", boxes));
    if (labels.rank() < 1 || labels.shape()[0] != boxes.shape()[0]) {
      return invalid_argument_error(
          fmt::format("operator random_bbox_crop: {} boxes but labels of shape {}",
                      boxes.shape()[0], labels.shape().to_string()));
    }
    const auto& thresholds = args.get_floats("thresholds");
    const auto& scaling = args.get_floats("scaling");
    const auto& aspect = args.get_floats("aspect_ratio");
    const bool allow_no_crop = args.get_bool("allow_no_crop");
    const bool all_boxes = args.get_bool("all_boxes_above_threshold");
    const bool over_box = args.get_string("threshold_type") == "overlap";
    const double prune = args.get_float("bbox_prune_threshold");
    const int64_t num_attempts = args.get_int("num_attempts");
    int64_t total = args.get_int("total_num_attempts");
    if (total < 0) total = kUnlimitedAttempts;

    std::span<const float> in = boxes.span<float>();
    const int64_t n = boxes.shape()[0];
    SampleRng rng(ctx.seed);
    const auto options = static_cast<int64_t>(thresholds.size()) + (allow_no_crop ? 1 : 0);
    for (int64_t attempts = 0; attempts < total;) {
      const int64_t choice = rng.uniform_int(0, options - 1);
      if (choice == static_cast<int64_t>(thresholds.size())) break;  // no crop
      const double threshold = thresholds[static_cast<size_t>(choice)];
      for (int64_t j = 0; j < num_attempts && attempts < total; ++j, ++attempts) {
        kernels::RelWindow w;
        w.width = rng.uniform(scaling[0], scaling[1]);
        w.height = rng.uniform(scaling[0], scaling[1]);
        const double ratio = w.width / w.height;
        if (ratio < aspect[0] || ratio > aspect[1]) continue;
        w.x = rng.uniform(0.0, 1.0 - w.width);
        w.y = rng.uniform(0.0, 1.0 - w.height);
        int64_t above = 0;
        for (int64_t b = 0; b < n; ++b) {
          above += kernels::box_window_overlap(&in[static_cast<size_t>(b) * 4], layout_, w,
                                               over_box) >= threshold;
        }
        if (n > 0 && (all_boxes ? above < n : above == 0)) continue;
        std::vector<float> cropped;
        std::vector<int64_t> kept = kernels::crop_boxes(in, layout_, w, prune, &cropped);
        if (n > 0 && kept.empty()) continue;
        const auto m = static_cast<int64_t>(kept.size());
        outputs->push_back(vec2(w.x, w.y));
        outputs->push_back(vec2(w.width, w.height));
        outputs->push_back(Tensor::from_vector<float>(cropped, Shape{m, 4}));
        outputs->push_back(select_rows(labels, kept));
        return Status();
      }
    }
    // No crop: the whole image and every box.
    outputs->push_back(vec2(0.0, 0.0));
    outputs->push_back(vec2(1.0, 1.0));
    outputs->push_back(boxes);
    outputs->push_back(labels);
    return Status();
  }

 private:
  kernels::BoxLayout layout_;
};

Status check_range(std::string_view arg, const std::vector<double>& v, double lo, double hi) {
  if (v.size() != 2 || !(v[0] > lo) || !(v[0] <= v[1]) || !(v[1] <= hi)) {
    return invalid_argument_error(fmt::format(
        "operator random_bbox_crop: {} must be [lo, hi] with {} < lo <= hi <= {}, got [{}]", arg,
        lo, hi, fmt::join(v, ",")));
  }
  return Status();
}

}  // namespace

const OperatorSchema& random_bbox_crop_schema() {
  static const OperatorSchema schema{
      "random_bbox_crop",
      "picks a random crop window (relative anchor and shape, for slice) that the boxes overlap "
      "enough, and crops the boxes to it",
      {"bboxes", "labels"},
      {"anchor", "shape", "bboxes", "labels"},
      {
          {"thresholds", ArgType::kFloatList, std::vector<double>{0.0},
           "minimum overlaps; each sample draws one (or no crop, with allow_no_crop)"},
          {"threshold_type", ArgType::kString, std::string("iou"),
           "iou (box and window) or overlap (fraction of the box inside the window)"},
          {"all_boxes_above_threshold", ArgType::kBool, true,
           "every box must reach the threshold; false: at least one"},
          {"allow_no_crop", ArgType::kBool, true,
           "keeping the whole image is one more outcome of the draw"},
          {"scaling", ArgType::kFloatList, std::vector<double>{1.0, 1.0},
           "range of the window's width and height relative to the image (drawn separately)"},
          {"aspect_ratio", ArgType::kFloatList, std::vector<double>{1.0, 1.0},
           "range of the window's relative width / height"},
          {"num_attempts", ArgType::kInt, int64_t{1}, "windows tried per drawn threshold"},
          {"total_num_attempts", ArgType::kInt, int64_t{-1},
           "windows tried in all before keeping the whole image; -1: 100000"},
          {"bbox_layout", ArgType::kString, std::string("xyXY"),
           "xyXY: [left, top, right, bottom]; xyWH: [x, y, width, height]"},
          {"bbox_prune_threshold", ArgType::kFloat, -1.0,
           "keep a box when this fraction of its area is inside; -1: when its centre is"},
      }};
  return schema;
}

Result<std::unique_ptr<Operator>> make_random_bbox_crop(OpArgs args) {
  constexpr std::string_view kOp = "operator random_bbox_crop";
  KILN_RETURN_IF_ERROR(check_range("scaling", args.get_floats("scaling"), 0.0, 1.0));
  KILN_RETURN_IF_ERROR(check_range("aspect_ratio", args.get_floats("aspect_ratio"), 0.0, 1e9));
  const auto& thresholds = args.get_floats("thresholds");
  if (thresholds.empty() && !args.get_bool("allow_no_crop")) {
    return invalid_argument_error(
        fmt::format("{}: thresholds must not be empty unless allow_no_crop", kOp));
  }
  const std::string& type = args.get_string("threshold_type");
  if (type != "iou" && type != "overlap") {
    return invalid_argument_error(
        fmt::format("{}: threshold_type \"{}\": expected iou or overlap", kOp, type));
  }
  const std::string& layout = args.get_string("bbox_layout");
  if (layout != "xyXY" && layout != "xyWH") {
    return invalid_argument_error(
        fmt::format("{}: bbox_layout \"{}\": expected xyXY or xyWH", kOp, layout));
  }
  if (args.get_int("num_attempts") < 1 || args.get_int("total_num_attempts") == 0) {
    return invalid_argument_error(
        fmt::format("{}: num_attempts must be >= 1 and total_num_attempts >= 1 or -1", kOp));
  }
  return std::unique_ptr<Operator>(new RandomBboxCrop(
      std::move(args), layout == "xyXY" ? kernels::BoxLayout::kLTRB : kernels::BoxLayout::kXYWH));
}

}  // namespace kiln::pipeline::detail
