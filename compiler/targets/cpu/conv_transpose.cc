// SPDX-License-Identifier: Apache-2.0
// ConvTranspose on oneDNN's deconvolution: weights packed at compile time from ONNX's
// [in, out / group, k...] (oneDNN's iohw order), activations in the layouts it picks, the bias and
// an eltwise tail inside (PaddleOCR's detector upsamples its segmentation map with two).
#include "compiler/ops/all_ops.h"
#include "compiler/targets/cpu/builder.h"
#include "compiler/targets/cpu/lowering.h"
#include "compiler/targets/cpu/onednn.h"

namespace kiln::compiler::cpu {

namespace {

using dnnl::memory;

// ONNX's weights [in, out / group, k...] as oneDNN's dims ({out, in, k...}, or {group,
// out / group, in / group, k...}) over the same bytes.
memory::desc onnx_weights(const Shape& w, int64_t groups, memory::data_type type) {
  const int spatial = w.rank() - 2;
  int64_t kernel = 1;
  for (int i = 2; i < w.rank(); ++i) kernel *= w[i];
  const int64_t in_g = w[0] / groups;
  const int64_t out_g = w[1];
  memory::dims dims;
  memory::dims strides;
  if (groups > 1) {
    dims = {groups, out_g, in_g};
    strides = {in_g * out_g * kernel, kernel, out_g * kernel};
  } else {
    dims = {out_g, in_g};
    strides = {kernel, out_g * kernel};
  }
  int64_t stride = kernel;
  for (int i = 0; i < spatial; ++i) {
    stride /= w[2 + i];
    dims.push_back(w[2 + i]);
    strides.push_back(stride);
  }
  return memory::desc(dims, type, strides);
}

}  // namespace

bool lower_conv_transpose(ProgramBuilder& b, const Node& node) {
  if (node.num_inputs() < 2) return false;
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  if (!same_float({x, node.input(1), y})) return false;
  const Tensor* w = node.input(1)->constant_value();
  const Tensor* bias = node.has_input(2) ? node.input(2)->constant_value() : nullptr;
  if (w == nullptr || (node.has_input(2) && (bias == nullptr || !is_float(node.input(2))))) {
    return false;
  }
  const auto& op = node.attrs<ops::ConvTranspose>();
  if (op.auto_pad != "NOTSET" && op.auto_pad != "VALID") return false;
  const Shape& xs = x->tensor_type().shape();
  const Shape& ws = node.input(1)->tensor_type().shape();
  const Shape& ys = y->tensor_type().shape();
  const int rank = xs.rank();
  const int spatial = rank - 2;
  const int64_t groups = op.group;
  if (spatial < 1 || spatial > 3 || ws.rank() != rank || ys.rank() != rank || groups < 1 ||
      xs[1] != ws[0] || ws[0] % groups != 0 || ys[1] != ws[1] * groups || xs[0] != ys[0]) {
    return false;
  }
  memory::dims strides;
  memory::dims dilates;
  memory::dims pad_begin;
  memory::dims pad_end;
  for (int i = 0; i < spatial; ++i) {
    const auto at = [&](const std::optional<std::vector<int64_t>>& v, size_t j, int64_t dflt) {
      return v && j < v->size() ? (*v)[j] : dflt;
    };
    const int64_t s = at(op.strides, static_cast<size_t>(i), 1);
    const int64_t d = at(op.dilations, static_cast<size_t>(i), 1);
    const int64_t k = ws[2 + i];
    if (op.kernel_shape && at(op.kernel_shape, static_cast<size_t>(i), k) != k) return false;
    const int64_t begin = op.auto_pad == "VALID" ? 0 : at(op.pads, static_cast<size_t>(i), 0);
    // The padding at the end is what makes the static output size (output_padding and
    // output_shape included): the full size less the output and the padding at the start.
    const int64_t full = (xs[2 + i] - 1) * s + (k - 1) * d + 1;
    const int64_t end = full - ys[2 + i] - begin;
    if (s < 1 || d < 1 || begin < 0) return false;
    strides.push_back(s);
    dilates.push_back(d - 1);
    pad_begin.push_back(begin);
    pad_end.push_back(end);
  }
  const memory::data_type type = dnnl_type(dtype(y));
  const memory::desc user_weights = onnx_weights(ws, groups, type);
  const memory::desc bias_desc =
      bias != nullptr ? plain_desc(memory::dims{ys[1]}, DType::kF32) : memory::desc();
  const Tail tail = trailing_eltwise(y);
  dnnl::primitive_attr attr = scratchpad_attr();
  if (!tail.ops.empty()) {
    dnnl::post_ops post;
    append(post, tail.ops);
    attr.set_post_ops(post);
  }
  auto make = [&](const memory::desc& src) {
    return dnnl::deconvolution_forward::primitive_desc(
        dnnl::deconvolution_forward::desc(
            dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct, src,
            memory::desc(user_weights.dims(), type, memory::format_tag::any), bias_desc,
            memory::desc(to_dims(ys), type, memory::format_tag::any), strides, dilates, pad_begin,
            pad_end),
        attr, b.engine());
  };
  // The input's own layout where oneDNN has a fast kernel for it, else the one it picks.
  std::optional<dnnl::deconvolution_forward::primitive_desc> pd;
  if (!is_row_major(b.layout_of(x))) {
    try {
      pd = make(b.layout_of(x));
      if (std::string(pd->impl_info_str()).find("ref") != std::string::npos) pd.reset();
    } catch (const dnnl::error&) {
      pd.reset();
    }
  }
  if (!pd) pd = make(memory::desc(to_dims(xs), type, memory::format_tag::any));
  std::vector<PrimitiveStep::Arg> args;
  args.push_back({DNNL_ARG_SRC, b.in_layout(x, pd->src_desc()), pd->src_desc(), {}});
  args.push_back({DNNL_ARG_WEIGHTS, -1, pd->weights_desc(),
                  pack(b.engine(), user_weights, w->raw_data(), pd->weights_desc())});
  if (bias != nullptr) {
    args.push_back(
        {DNNL_ARG_BIAS, -1, pd->bias_desc(), constant_memory(b.engine(), *bias, pd->bias_desc())});
  }
  args.push_back({DNNL_ARG_DST, b.define(tail.out, pd->dst_desc()), pd->dst_desc(), {}});
  if (int sp = b.scratch(pd->scratchpad_desc().get_size()); sp >= 0) {
    args.push_back({DNNL_ARG_SCRATCHPAD, sp, pd->scratchpad_desc(), {}});
  }
  finish(b, node, "ConvTranspose", dnnl::deconvolution_forward(*pd), std::move(args), tail);
  return true;
}

}  // namespace kiln::compiler::cpu
