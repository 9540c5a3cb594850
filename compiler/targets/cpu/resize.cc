// SPDX-License-Identifier: Apache-2.0
// Resize on oneDNN's resampling primitive, in the layout its input has (a blocked region's
// decoder upsampling stays blocked): the forms where oneDNN's coordinates are ONNX's.
//  - linear, half_pixel (or pytorch_half_pixel with more than one output pixel): oneDNN maps
//    output y to (y + 0.5) in / out - 0.5 and clamps at the edges, as ONNX does;
//  - nearest, half_pixel with round_prefer_ceil: oneDNN rounds that coordinate half away from
//    zero, which is ceil where it is positive and 0 after clamping where it is not;
//  - nearest, half_pixel with round_prefer_floor, or asymmetric with floor (PyTorch's and
//    TensorFlow's exports), upsampling by whole factors: no coordinate falls on a tie, and
//    asymmetric's floor(y / s) is the same pixel.
// Scales must be the sizes' ratio exactly (ONNX computes coordinates with the scale given).
#include <cmath>

#include "compiler/ops/all_ops.h"
#include "compiler/targets/cpu/builder.h"
#include "compiler/targets/cpu/lowering.h"
#include "compiler/targets/cpu/onednn.h"

namespace kiln::compiler::cpu {

namespace {

using dnnl::memory;

// The resampling algorithm oneDNN computes `op` with, for input dims `in` and output dims `out`
// (spatial dims only); nullopt where its coordinates differ from ONNX's.
std::optional<dnnl::algorithm> resampling_of(const ops::Resize& op, const std::vector<int64_t>& in,
                                             const std::vector<int64_t>& out) {
  if (op.antialias != 0 || op.keep_aspect_ratio_policy != "stretch") return std::nullopt;
  const std::string& ct = op.coordinate_transformation_mode;
  bool whole_upscale = true;
  bool single_pixel = false;
  for (size_t i = 0; i < in.size(); ++i) {
    whole_upscale &= out[i] >= in[i] && out[i] % in[i] == 0;
    single_pixel |= out[i] == 1;
  }
  if (op.mode == "linear") {
    if (ct == "half_pixel" || (ct == "pytorch_half_pixel" && !single_pixel)) {
      return dnnl::algorithm::resampling_linear;
    }
    return std::nullopt;
  }
  if (op.mode == "nearest") {
    if (ct == "half_pixel" && op.nearest_mode == "round_prefer_ceil") {
      return dnnl::algorithm::resampling_nearest;
    }
    if (whole_upscale && ((ct == "half_pixel" && op.nearest_mode == "round_prefer_floor") ||
                          (ct == "asymmetric" && op.nearest_mode == "floor"))) {
      return dnnl::algorithm::resampling_nearest;
    }
  }
  return std::nullopt;
}

}  // namespace

bool lower_resize(ProgramBuilder& b, const Node& node) {
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  if (!same_float({x, y})) return false;
  const auto& op = node.attrs<ops::Resize>();
  if (op.axes) return false;
  const Shape& xs = x->tensor_type().shape();
  const Shape& ys = y->tensor_type().shape();
  const int rank = xs.rank();
  if (rank < 3 || rank > 5 || ys.rank() != rank || xs[0] != ys[0] || xs[1] != ys[1]) return false;
  std::vector<int64_t> in;
  std::vector<int64_t> out;
  for (int i = 2; i < rank; ++i) {
    if (xs[i] < 1 || ys[i] < 1) return false;
    in.push_back(xs[i]);
    out.push_back(ys[i]);
  }
  // Given scales must be exactly the sizes' ratios (and 1 on the batch and channels).
  if (node.has_input(2)) {
    const Tensor* scales = node.input(2)->constant_value();
    if (scales == nullptr) return false;
    if (scales->numel() != 0) {
      if (scales->dtype() != DType::kF32 || scales->numel() != rank) return false;
      for (int i = 0; i < rank; ++i) {
        const float s = scales->data<float>()[i];
        if (static_cast<double>(s) * static_cast<double>(xs[i]) != static_cast<double>(ys[i])) {
          return false;
        }
      }
    }
  }
  std::optional<dnnl::algorithm> algorithm = resampling_of(op, in, out);
  if (!algorithm) return false;
  const memory::data_type type = dnnl_type(dtype(y));
  auto make = [&](const memory::desc& src) {
    return dnnl::resampling_forward::primitive_desc(
        dnnl::resampling_forward::desc(dnnl::prop_kind::forward_inference, *algorithm, src,
                                       memory::desc(to_dims(ys), type, memory::format_tag::any)),
        scratchpad_attr(), b.engine());
  };
  // In the input's own layout; a plain one oneDNN runs only on its reference kernel goes
  // channels-last first.
  dnnl::resampling_forward::primitive_desc pd = make(b.layout_of(x));
  if (std::string(pd.impl_info_str()).find("ref") != std::string::npos && rank == 4) {
    pd = make(memory::desc(to_dims(xs), type, memory::format_tag::nhwc));
  }
  std::vector<PrimitiveStep::Arg> args;
  args.push_back({DNNL_ARG_SRC, b.in_layout(x, pd.src_desc()), pd.src_desc(), {}});
  args.push_back({DNNL_ARG_DST, b.define(y, pd.dst_desc()), pd.dst_desc(), {}});
  if (int sp = b.scratch(pd.scratchpad_desc().get_size()); sp >= 0) {
    args.push_back({DNNL_ARG_SCRATCHPAD, sp, pd.scratchpad_desc(), {}});
  }
  finish(b, node, "Resize", dnnl::resampling_forward(pd), std::move(args), Tail{});
  return true;
}

}  // namespace kiln::compiler::cpu
