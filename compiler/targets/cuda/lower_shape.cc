// SPDX-License-Identifier: Apache-2.0
// Lowering the ops that move data without computing: reshapes share their input's buffer; Concat,
// Transpose, Slice, Split, Gather of one index and Expand run as strided copies
// (kernels/layout.h), a Transpose after a Slice, Split or Gather folded into its copy.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/all_ops.h"
#include "compiler/targets/cuda/kernels/layout.h"
#include "compiler/targets/cuda/lower_util.h"
#include "compiler/targets/cuda/lowering.h"
#include "compiler/targets/cuda/views.h"

namespace kiln::compiler::cuda {

bool lower_alias(Builder& b, const Node& node) {
  if (node.num_outputs() != 1 || !node.has_input(0)) return false;
  if (node.input(0)->tensor_type().dtype != node.output(0)->tensor_type().dtype) return false;
  b.alias(node.output(0), node.input(0));
  return true;
}

bool lower_concat(Builder& b, const Node& node) {
  const Shape y = shape_of(node.output(0));
  int64_t axis = node.attrs<ops::Concat>().axis.value_or(0);
  if (axis < 0) axis += y.rank();
  if (axis < 0 || axis >= y.rank()) return false;
  const DType dtype = node.output(0)->tensor_type().dtype;
  const size_t es = dtype_size(dtype);
  // Channels of NHWC inputs concatenate NHWC: one row per pixel (N*H*W rows of C_i each).
  bool nhwc = false;
  if (y.rank() == 4 && axis == 1) {
    for (const Value* v : node.inputs()) nhwc = nhwc || (v != nullptr && b.is_nhwc(v));
  }
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= y[d];
  if (nhwc) outer = y[0] * y[2] * y[3];
  const size_t out_row = static_cast<size_t>(y.numel() / std::max<int64_t>(outer, 1)) * es;
  struct Part {
    int buffer;
    size_t row;     // bytes of one outer row of the input
    size_t offset;  // where its rows start in an output row
  };
  std::vector<Part> parts;
  std::vector<int> reads;
  size_t at = 0;
  for (const Value* v : node.inputs()) {
    if (v == nullptr || v->tensor_type().dtype != dtype) return false;
    const Shape s = shape_of(v);
    const size_t row = static_cast<size_t>(s.numel() / std::max<int64_t>(outer, 1)) * es;
    parts.push_back({nhwc ? b.buffer_nhwc(v) : b.buffer_of(v), row, at});
    reads.push_back(parts.back().buffer);
    at += row;
  }
  if (at != out_row || outer == 0) return false;
  const int yi = b.define(node.output(0), nhwc);
  add(b, node, "Concat", reads, {yi}, [=](Session& s) -> Status {
    auto* dst = static_cast<uint8_t*>(s.device[static_cast<size_t>(yi)]);
    for (const Part& p : parts) {
      if (p.row == 0) continue;
      KILN_RETURN_IF_ERROR(check_cuda(
          cudaMemcpy2DAsync(dst + p.offset, out_row, s.device[static_cast<size_t>(p.buffer)], p.row,
                            p.row, static_cast<size_t>(outer), cudaMemcpyDeviceToDevice, s.stream),
          "concat copy"));
    }
    return Status();
  });
  return true;
}

bool lower_transpose(Builder& b, const Node& node) {
  const Shape x = shape_of(node.input(0));
  const Shape y = shape_of(node.output(0));
  const int rank = x.rank();
  if (rank > kMaxRank || rank == 0) return false;
  const size_t es = dtype_size(node.input(0)->tensor_type().dtype);
  if (es != 1 && es != 2 && es != 4 && es != 8) return false;
  std::vector<int64_t> perm = node.attrs<ops::Transpose>().perm.value_or(std::vector<int64_t>{});
  if (perm.empty()) {
    for (int d = rank - 1; d >= 0; --d) perm.push_back(d);
  }
  if (static_cast<int>(perm.size()) != rank) return false;
  std::vector<int64_t> in_strides(static_cast<size_t>(rank));
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    in_strides[static_cast<size_t>(d)] = stride;
    stride *= x[d];
  }
  std::vector<int64_t> out_dims(static_cast<size_t>(rank));
  std::vector<int64_t> strides(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d) {
    out_dims[static_cast<size_t>(d)] = y[d];
    strides[static_cast<size_t>(d)] = in_strides[static_cast<size_t>(perm[static_cast<size_t>(d)])];
  }
  const int xi = b.buffer_of(node.input(0));
  const int yi = b.define(node.output(0));
  const int64_t n = y.numel();
  add(b, node, "Transpose", {xi}, {yi}, [=](Session& s) {
    return launch_permute(s.device[static_cast<size_t>(xi)], s.device[static_cast<size_t>(yi)], n,
                          rank, out_dims.data(), strides.data(), static_cast<int>(es), s.stream);
  });
  return true;
}

namespace {

// Row-major element strides of `s`.
std::vector<int64_t> plain_strides(const Shape& s) {
  std::vector<int64_t> strides(static_cast<size_t>(s.rank()));
  int64_t stride = 1;
  for (int d = s.rank() - 1; d >= 0; --d) {
    strides[static_cast<size_t>(d)] = stride;
    stride *= s[d];
  }
  return strides;
}

// One strided read of a source buffer: output dims, the source's stride per output dim and the
// element offset of the first element.
struct View {
  int to = -1;
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};

bool is_reshape(OpKind kind) {
  return kind == OpKind::kReshape || kind == OpKind::kFlatten || kind == OpKind::kSqueeze ||
         kind == OpKind::kUnsqueeze || kind == OpKind::kIdentity;
}

// The value view `v` of a copy step writes: `out` itself, or the output of a Transpose that reads
// `out` through reshapes, each the only reader of the one before (attention's heads: Split, Slice
// or Gather of the QKV projection, Reshape to heads, Transpose), with `v` reshaped and permuted to
// match: one strided copy instead of two. The reshapes and the Transpose are marked fused.
const Value* fold_transpose(Builder& b, const Value* out, View& v) {
  StridedView sv{v.dims, v.strides, v.offset};
  std::vector<const Node*> chain;
  const Value* at = out;
  for (const Node* n = b.only_consumer(at); n != nullptr; n = b.only_consumer(at)) {
    if (n->num_outputs() != 1 || n->input(0) != at) break;
    if (is_reshape(n->kind())) {
      std::optional<StridedView> r = reshape_view(sv, shape_of(n->output(0)).dims());
      if (!r) break;
      sv = std::move(*r);
      chain.push_back(n);
      at = n->output(0);
      continue;
    }
    if (n->kind() != OpKind::kTranspose) break;
    std::vector<int64_t> perm = n->attrs<ops::Transpose>().perm.value_or(std::vector<int64_t>{});
    if (perm.empty()) {
      for (int64_t d = static_cast<int64_t>(sv.dims.size()) - 1; d >= 0; --d) perm.push_back(d);
    }
    if (perm.size() != sv.dims.size() || perm.size() > static_cast<size_t>(kMaxRank)) break;
    sv = permute_view(sv, perm);
    chain.push_back(n);
    for (const Node* c : chain) b.mark_fused(c);
    v.dims = std::move(sv.dims);
    v.strides = std::move(sv.strides);
    v.offset = sv.offset;
    return n->output(0);
  }
  return out;
}

// A step writing each view of buffer `from` (elements of `es` bytes) into its own buffer.
bool add_views(Builder& b, const Node& node, int from, size_t es, std::vector<View> views) {
  if (es != 1 && es != 2 && es != 4 && es != 8) return false;
  std::vector<int> writes;
  for (const View& v : views) {
    if (v.dims.size() > static_cast<size_t>(kMaxRank)) return false;
    writes.push_back(v.to);
  }
  add(b, node, std::string(node.op().name()), {from}, writes, [=](Session& s) -> Status {
    for (const View& v : views) {
      int64_t n = 1;
      for (int64_t d : v.dims) n *= d;
      const auto* base =
          static_cast<const uint8_t*>(ptr(s, from)) + v.offset * static_cast<int64_t>(es);
      KILN_RETURN_IF_ERROR(launch_permute(base, ptr(s, v.to), n, static_cast<int>(v.dims.size()),
                                          v.dims.data(), v.strides.data(), static_cast<int>(es),
                                          s.stream));
    }
    return Status();
  });
  return true;
}

}  // namespace

bool lower_slice(Builder& b, const Node& node) {
  const Shape x = shape_of(node.input(0));
  const Shape y = shape_of(node.output(0));
  auto starts = constant_ints(node.input(1));
  auto ends = constant_ints(node.input(2));
  if (!starts || !ends || starts->size() != ends->size() || x.rank() != y.rank()) return false;
  std::vector<int64_t> axes;
  if (node.has_input(3)) {
    auto a = constant_ints(node.input(3));
    if (!a) return false;
    axes = *a;
  } else {
    for (size_t i = 0; i < starts->size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  std::vector<int64_t> steps(starts->size(), 1);
  if (node.has_input(4)) {
    auto st = constant_ints(node.input(4));
    if (!st || st->size() != starts->size()) return false;
    steps = *st;
  }
  if (axes.size() != starts->size()) return false;
  const std::vector<int64_t> in = plain_strides(x);
  View v;
  v.dims.assign(y.dims().begin(), y.dims().end());
  v.strides = in;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = axes[i] < 0 ? axes[i] + x.rank() : axes[i];
    if (axis < 0 || axis >= x.rank() || steps[i] == 0) return false;
    const int64_t dim = x[static_cast<int>(axis)];
    int64_t start = (*starts)[i] < 0 ? (*starts)[i] + dim : (*starts)[i];
    start =
        steps[i] > 0 ? std::clamp<int64_t>(start, 0, dim) : std::clamp<int64_t>(start, 0, dim - 1);
    v.offset += start * in[static_cast<size_t>(axis)];
    v.strides[static_cast<size_t>(axis)] = in[static_cast<size_t>(axis)] * steps[i];
  }
  const int from = b.buffer_of(node.input(0));
  v.to = b.define(fold_transpose(b, node.output(0), v));
  return add_views(b, node, from, dtype_size(node.input(0)->tensor_type().dtype), {v});
}

bool lower_split(Builder& b, const Node& node) {
  const Shape x = shape_of(node.input(0));
  int64_t axis = node.attrs<ops::Split>().axis;
  if (axis < 0) axis += x.rank();
  if (axis < 0 || axis >= x.rank()) return false;
  const std::vector<int64_t> in = plain_strides(x);
  const int from = b.buffer_of(node.input(0));
  std::vector<View> views;
  int64_t at = 0;
  for (const Value* out : node.outputs()) {
    const Shape y = shape_of(out);
    View v;
    v.dims.assign(y.dims().begin(), y.dims().end());
    v.strides = in;
    v.offset = at * in[static_cast<size_t>(axis)];
    at += y[static_cast<int>(axis)];
    views.push_back(std::move(v));
  }
  if (at != x[static_cast<int>(axis)]) return false;
  for (size_t i = 0; i < views.size(); ++i) {
    views[i].to = b.define(fold_transpose(b, node.output(static_cast<int>(i)), views[i]));
  }
  return add_views(b, node, from, dtype_size(node.input(0)->tensor_type().dtype), views);
}

bool lower_gather(Builder& b, const Node& node) {
  const Shape x = shape_of(node.input(0));
  auto index = constant_ints(node.input(1));
  // One index (a scalar): a view without the axis.
  if (!index || index->size() != 1 || node.input(1)->tensor_type().rank() != 0) return false;
  int64_t axis = node.attrs<ops::Gather>().axis;
  if (axis < 0) axis += x.rank();
  if (axis < 0 || axis >= x.rank()) return false;
  const int64_t dim = x[static_cast<int>(axis)];
  const int64_t i = (*index)[0] < 0 ? (*index)[0] + dim : (*index)[0];
  if (i < 0 || i >= dim) return false;
  const std::vector<int64_t> in = plain_strides(x);
  View v;
  for (int d = 0; d < x.rank(); ++d) {
    if (d == axis) continue;
    v.dims.push_back(x[d]);
    v.strides.push_back(in[static_cast<size_t>(d)]);
  }
  v.offset = i * in[static_cast<size_t>(axis)];
  if (v.dims.empty()) {  // a scalar result: one element
    v.dims.push_back(1);
    v.strides.push_back(1);
  }
  const int from = b.buffer_of(node.input(0));
  v.to = b.define(fold_transpose(b, node.output(0), v));
  return add_views(b, node, from, dtype_size(node.input(0)->tensor_type().dtype), {v});
}

bool lower_expand(Builder& b, const Node& node) {
  const Shape x = shape_of(node.input(0));
  const Shape y = shape_of(node.output(0));
  if (y.rank() > kMaxRank || x.rank() > y.rank()) return false;
  View v;
  v.dims.assign(y.dims().begin(), y.dims().end());
  v.strides.resize(static_cast<size_t>(y.rank()));
  broadcast_strides(x, y, v.strides.data());
  const int from = b.buffer_of(node.input(0));
  v.to = b.define(node.output(0));
  return add_views(b, node, from, dtype_size(node.input(0)->tensor_type().dtype), {v});
}

}  // namespace kiln::compiler::cuda
