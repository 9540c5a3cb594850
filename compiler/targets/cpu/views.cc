// SPDX-License-Identifier: Apache-2.0
// Strided views: Transpose, Split, Slice and Reshape of such views read their input's bytes through
// strides, so the copy happens only where a consumer needs plain data (a MatMul reads them as
// they are: attention's Q, Kᵀ and V).
#include <algorithm>
#include <optional>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/rewrite.h"
#include "compiler/targets/cpu/builder.h"
#include "compiler/targets/cpu/onednn.h"

namespace kiln::compiler::cpu {

namespace {

using dnnl::memory;

// The dims and strides of a layout without inner blocks (plain or strided), over `shape`.
std::optional<memory::dims> strides_of(const memory::desc& layout, const Shape& shape) {
  if (layout.is_zero()) {
    memory::dims strides(static_cast<size_t>(shape.rank()));
    memory::dim stride = 1;
    for (int i = shape.rank(); i-- > 0;) {
      strides[static_cast<size_t>(i)] = stride;
      stride *= shape[i];
    }
    return strides;
  }
  const dnnl_memory_desc_t& md = layout.data;
  if (md.format_kind != dnnl_blocked || md.format_desc.blocking.inner_nblks != 0 ||
      md.offset0 != 0 || md.ndims != std::max(shape.rank(), 1)) {
    return std::nullopt;
  }
  for (int i = 0; i < md.ndims; ++i) {
    if (md.padded_dims[i] != md.dims[i]) return std::nullopt;
  }
  return memory::dims(md.format_desc.blocking.strides, md.format_desc.blocking.strides + md.ndims);
}

// The strides that read `from` (dims and strides) as `to`, when no copy is needed: each run of
// dims merged or split must be contiguous in memory (NumPy's no-copy reshape rule).
std::optional<memory::dims> reshaped_strides(const Shape& from, const memory::dims& strides,
                                             const Shape& to) {
  memory::dims out(static_cast<size_t>(to.rank()), 1);
  int i = 0;
  int j = 0;
  while (i < from.rank() || j < to.rank()) {
    // Skip size-1 dims: any stride reads them.
    if (i < from.rank() && from[i] == 1) {
      ++i;
      continue;
    }
    if (j < to.rank() && to[j] == 1) {
      ++j;
      continue;
    }
    if (i >= from.rank() || j >= to.rank()) return std::nullopt;
    // Grow the groups [i0, i) and [j0, j) until their element counts agree.
    const int i0 = i;
    const int j0 = j;
    int64_t a = from[i++];
    int64_t c = to[j++];
    while (a != c) {
      if (a < c) {
        if (i >= from.rank()) return std::nullopt;
        a *= from[i++];
      } else {
        if (j >= to.rank()) return std::nullopt;
        c *= to[j++];
      }
    }
    // The group's non-1 dims must be contiguous; its innermost one gives the stride to split.
    int last = -1;
    for (int k = i0; k < i; ++k) {
      if (from[k] == 1) continue;
      if (last >= 0 &&
          strides[static_cast<size_t>(last)] != strides[static_cast<size_t>(k)] * from[k]) {
        return std::nullopt;
      }
      last = k;
    }
    memory::dim stride = strides[static_cast<size_t>(last)];
    for (int k = j; k-- > j0;) {
      out[static_cast<size_t>(k)] = stride;
      stride *= to[k];
    }
  }
  // Size-1 dims of `to`: the stride of the dims after them (any value works).
  for (int k = to.rank(); k-- > 0;) {
    if (to[k] == 1) {
      out[static_cast<size_t>(k)] =
          k + 1 < to.rank() ? out[static_cast<size_t>(k + 1)] * to[k + 1] : 1;
    }
  }
  return out;
}

// The f32 layout of `dims` read through `strides`, when oneDNN can describe it: it refuses strides
// under which elements could overlap by its rule (a dim's stride at least the next inner dim's
// extent), which a Slice with a step leaves where the step does not divide the dim (every other
// of 5 columns: stride 2, 3 of them, under rows 5 apart). nullopt then: no view, a copy.
std::optional<memory::desc> strided_layout(const memory::dims& dims, const memory::dims& strides) {
  try {
    return memory::desc(dims, memory::data_type::f32, strides);
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

bool is_static_f32(const Value* v) {
  return v != nullptr && v->type().is_tensor() && v->tensor_type().dtype == DType::kF32 &&
         v->tensor_type().is_static() && v->tensor_type().shape().numel() > 0;
}

// Whether every reader of `v` takes a strided layout as it is (a MatMul, or another view):
// elementwise steps would keep a gapped layout in their outputs, and some oneDNN kernels run
// gapped layouts on their slow reference code.
bool reads_strided(const Value* v) {
  if (is_graph_output(v)) return false;
  for (const Use& u : v->uses()) {
    switch (u.node->kind()) {
      case OpKind::kMatMul:
      case OpKind::kTranspose:
      case OpKind::kReshape: break;
      default: return false;
    }
  }
  return true;
}

// A view of `v` in `layout` is fine when the layout has no gaps or `v`'s readers take gaps.
bool viewable(const Value* v, const memory::desc& layout) {
  return layout.get_size() ==
             static_cast<size_t>(v->tensor_type().shape().numel()) * sizeof(float) ||
         reads_strided(v);
}

// The values of an optional integer constant input (i64 or i32); nullopt when it is present but
// not a constant, an empty vector when it is absent.
std::optional<std::vector<int64_t>> int_input(const Node& node, int i) {
  if (!node.has_input(i)) return std::vector<int64_t>{};
  const Tensor* t = node.input(i)->constant_value();
  if (t == nullptr || t->rank() > 1) return std::nullopt;
  std::vector<int64_t> out;
  if (t->dtype() == DType::kI64) {
    for (int64_t v : t->span<int64_t>()) out.push_back(v);
  } else if (t->dtype() == DType::kI32) {
    for (int32_t v : t->span<int32_t>()) out.push_back(v);
  } else {
    return std::nullopt;
  }
  return out;
}

// The byte offset and strides that read Slice `node`'s output (constant starts, axes and
// positive steps) from an input of shape `xs` and `strides`.
std::optional<std::pair<size_t, memory::dims>> slice_view(const Node& node, const Shape& xs,
                                                          const memory::dims& strides) {
  std::optional<std::vector<int64_t>> starts = int_input(node, 1);
  std::optional<std::vector<int64_t>> axes = int_input(node, 3);
  std::optional<std::vector<int64_t>> steps = int_input(node, 4);
  if (!starts || !axes || !steps || starts->empty() ||
      (!axes->empty() && axes->size() != starts->size()) ||
      (!steps->empty() && steps->size() != starts->size())) {
    return std::nullopt;
  }
  memory::dims out = strides;
  int64_t offset = 0;
  for (size_t k = 0; k < starts->size(); ++k) {
    int64_t axis = axes->empty() ? static_cast<int64_t>(k) : (*axes)[k];
    if (axis < 0) axis += xs.rank();
    const int64_t step = steps->empty() ? 1 : (*steps)[k];
    if (axis < 0 || axis >= xs.rank() || step <= 0) return std::nullopt;
    const int64_t dim = xs[static_cast<int>(axis)];
    int64_t start = (*starts)[k];
    if (start < 0) start += dim;
    start = std::clamp<int64_t>(start, 0, dim);
    offset += start * strides[static_cast<size_t>(axis)];
    out[static_cast<size_t>(axis)] *= step;
  }
  return std::make_pair(static_cast<size_t>(offset) * sizeof(float), out);
}

}  // namespace

bool ProgramBuilder::add_strided_view(const Node& node) {
  if (node.kind() != OpKind::kTranspose && node.kind() != OpKind::kSplit &&
      node.kind() != OpKind::kReshape && node.kind() != OpKind::kSlice) {
    return false;
  }
  const Value* x = node.input(0);
  if (!is_static_f32(x) || !has_buffer(x)) return false;
  for (const Value* y : node.outputs()) {
    if (!is_static_f32(y)) return false;
  }
  const Shape& xs = x->tensor_type().shape();
  const int id = buffer_of(x);
  std::optional<memory::dims> strides = strides_of(buffer(id).layout, xs);
  if (!strides || xs.rank() == 0) return false;

  if (node.kind() == OpKind::kReshape) {
    // Only strided inputs: add_view reads plain ones as they are.
    if (is_row_major(buffer(id).layout)) return false;
    const Shape& ys = node.output(0)->tensor_type().shape();
    std::optional<memory::dims> out = reshaped_strides(xs, *strides, ys);
    if (!out || ys.rank() == 0) return false;
    const std::optional<memory::desc> layout = strided_layout(to_dims(ys), *out);
    if (!layout || !viewable(node.output(0), *layout)) return false;
    add_view_buffer(node.output(0), id, 0, *layout);
    return true;
  }

  if (node.kind() == OpKind::kTranspose) {
    std::vector<int64_t> perm = node.attrs<ops::Transpose>().perm.value_or(std::vector<int64_t>{});
    if (perm.empty()) {
      for (int i = xs.rank(); i-- > 0;) perm.push_back(i);
    }
    if (static_cast<int>(perm.size()) != xs.rank()) return false;
    memory::dims dims;
    memory::dims out;
    for (int64_t p : perm) {
      if (p < 0 || p >= xs.rank()) return false;
      dims.push_back(xs[static_cast<int>(p)]);
      out.push_back((*strides)[static_cast<size_t>(p)]);
    }
    const std::optional<memory::desc> layout = strided_layout(dims, out);
    if (!layout || !viewable(node.output(0), *layout)) return false;
    add_view_buffer(node.output(0), id, 0, *layout);
    return true;
  }

  if (node.kind() == OpKind::kSlice) {
    const Shape& ys = node.output(0)->tensor_type().shape();
    std::optional<std::pair<size_t, memory::dims>> view = slice_view(node, xs, *strides);
    if (!view || ys.rank() != xs.rank()) return false;
    const std::optional<memory::desc> layout = strided_layout(to_dims(ys), view->second);
    if (!layout || !viewable(node.output(0), *layout)) return false;
    add_view_buffer(node.output(0), id, view->first, *layout);
    return true;
  }

  // Split: each output is the input's slice along the axis, at its byte offset.
  int64_t axis = node.attrs<ops::Split>().axis;
  if (axis < 0) axis += xs.rank();
  if (axis < 0 || axis >= xs.rank()) return false;
  int64_t start = 0;
  for (const Value* y : node.outputs()) {
    const Shape& ys = y->tensor_type().shape();
    if (ys.rank() != xs.rank()) return false;
    const std::optional<memory::desc> layout = strided_layout(to_dims(ys), *strides);
    if (!layout || !viewable(y, *layout)) return false;
    start += ys[static_cast<int>(axis)];
  }
  if (start != xs[static_cast<int>(axis)]) return false;
  start = 0;
  for (const Value* y : node.outputs()) {
    const Shape& ys = y->tensor_type().shape();
    const size_t offset =
        static_cast<size_t>(start * (*strides)[static_cast<size_t>(axis)]) * sizeof(float);
    add_view_buffer(y, id, offset, *strided_layout(to_dims(ys), *strides));
    start += ys[static_cast<int>(axis)];
  }
  return true;
}

}  // namespace kiln::compiler::cpu
