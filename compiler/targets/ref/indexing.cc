// SPDX-License-Identifier: Apache-2.0
// ref kernels for the indexing op family: plain loops, the executable specification.
#include "compiler/ops/indexing.h"

#include <algorithm>
#include <numeric>

#include "compiler/ops/infer_util.h"
#include "compiler/targets/ref/kernel.h"
#include "compiler/targets/ref/shape_util.h"

namespace kiln::compiler::ref {

namespace {

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Result<Reduction> parse_reduction(KernelContext& ctx, std::string_view name, DType dtype) {
  Reduction r = Reduction::kNone;
  if (name == "add") {
    r = Reduction::kAdd;
  } else if (name == "mul") {
    r = Reduction::kMul;
  } else if (name == "max") {
    r = Reduction::kMax;
  } else if (name == "min") {
    r = Reduction::kMin;
  } else if (name != "none") {
    return ctx.errorf("expected reduction none, add, mul, max or min, got \"{}\"", name);
  }
  if (r != Reduction::kNone && dtype == DType::kString) {
    return ctx.errorf("reduction \"{}\" does not apply to string tensors", name);
  }
  return r;
}

template <class T>
void reduce_into(T& dst, const T& v, Reduction r) {
  if constexpr (std::is_same_v<T, std::string>) {
    dst = v;
  } else if constexpr (std::is_same_v<T, bool>) {
    const bool any = r == Reduction::kAdd || r == Reduction::kMax;
    const bool all = r == Reduction::kMul || r == Reduction::kMin;
    dst = any ? (dst || v) : all ? (dst && v) : v;
  } else {
    switch (r) {
      case Reduction::kNone: dst = v; break;
      case Reduction::kAdd: dst = static_cast<T>(dst + v); break;
      case Reduction::kMul: dst = static_cast<T>(dst * v); break;
      case Reduction::kMax: dst = v > dst ? v : dst; break;
      case Reduction::kMin: dst = v < dst ? v : dst; break;
    }
  }
}

// Maps a possibly negative index into [0, n), or fails naming it.
Result<int64_t> wrap_index(KernelContext& ctx, int64_t i, int64_t n, int axis) {
  const int64_t w = i < 0 ? i + n : i;
  if (w < 0 || w >= n)
    return ctx.errorf("index {} is out of range for axis {} of size {}", i, axis, n);
  return w;
}

int normalized_axis(int64_t axis, int rank) {
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// Fails unless every dim of `indices` but `axis` fits in `data`'s (GatherElements, Scatter).
Status require_within(KernelContext& ctx, const Shape& indices, const Shape& data, int axis) {
  for (int d = 0; d < data.rank(); ++d) {
    if (d != axis && indices[d] > data[d]) {
      return ctx.errorf("indices {} exceed data {} on axis {}", indices.to_string(),
                        data.to_string(), d);
    }
  }
  return Status();
}

// ScatterElements and Scatter: out = data; out[idx with axis := indices[idx]] (op)= updates[idx].
Status scatter_elements(KernelContext& ctx, int64_t axis_attr, std::string_view reduction) {
  const Tensor& data = ctx.input(0);
  const Tensor& updates = ctx.input(2);
  const Shape& ishape = ctx.input(1).shape();
  Tensor& out = ctx.output(0);
  const int axis = normalized_axis(axis_attr, data.rank());
  KILN_RETURN_IF_ERROR(require_within(ctx, ishape, data.shape(), axis));
  KILN_ASSIGN_OR_RETURN(Reduction red, parse_reduction(ctx, reduction, data.dtype()));
  const std::vector<int64_t> indices = tensor_to_ints(ctx.input(1));
  const std::vector<int64_t> strides = data.shape().strides();
  copy_elements(data, 0, out, 0, data.numel());
  Status status;
  visit_dtype(data.dtype(), [&]<class T>() {
    const T* src = updates.data<T>();
    T* dst = out.data<T>();
    int64_t i = 0;
    for_each_index(ishape, [&](const std::vector<int64_t>& idx) {
      if (!status.ok()) return;
      Result<int64_t> j =
          wrap_index(ctx, indices[static_cast<size_t>(i)], data.shape()[axis], axis);
      if (!j.ok()) {
        status = j.status();
        return;
      }
      int64_t at = 0;
      for (int d = 0; d < data.rank(); ++d) {
        at += (d == axis ? *j : idx[static_cast<size_t>(d)]) * strides[static_cast<size_t>(d)];
      }
      reduce_into(dst[at], src[i], red);
      ++i;
    });
  });
  return status;
}

}  // namespace

template <>
Status run_op(const ops::Gather& op, KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  Tensor& out = ctx.output(0);
  const int axis = normalized_axis(op.axis, data.rank());
  const std::vector<int64_t> indices = tensor_to_ints(ctx.input(1));
  const int64_t outer = data.shape().numel(0, axis), n = data.shape()[axis];
  const int64_t inner = data.shape().numel(axis + 1, data.rank());
  const auto count = static_cast<int64_t>(indices.size());
  std::vector<int64_t> wrapped;
  for (int64_t i : indices) {
    KILN_ASSIGN_OR_RETURN(int64_t w, wrap_index(ctx, i, n, axis));
    wrapped.push_back(w);
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < count; ++i) {
      copy_elements(data, (o * n + wrapped[static_cast<size_t>(i)]) * inner, out,
                    (o * count + i) * inner, inner);
    }
  }
  return Status();
}

template <>
Status run_op(const ops::GatherElements& op, KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Shape& ishape = ctx.input(1).shape();
  Tensor& out = ctx.output(0);
  const int axis = normalized_axis(op.axis, data.rank());
  KILN_RETURN_IF_ERROR(require_within(ctx, ishape, data.shape(), axis));
  const std::vector<int64_t> indices = tensor_to_ints(ctx.input(1));
  const std::vector<int64_t> strides = data.shape().strides();
  Status status;
  visit_dtype(data.dtype(), [&]<class T>() {
    const T* src = data.data<T>();
    T* dst = out.data<T>();
    int64_t i = 0;
    for_each_index(ishape, [&](const std::vector<int64_t>& idx) {
      if (!status.ok()) return;
      Result<int64_t> j =
          wrap_index(ctx, indices[static_cast<size_t>(i)], data.shape()[axis], axis);
      if (!j.ok()) {
        status = j.status();
        return;
      }
      int64_t at = 0;
      for (int d = 0; d < data.rank(); ++d) {
        at += (d == axis ? *j : idx[static_cast<size_t>(d)]) * strides[static_cast<size_t>(d)];
      }
      dst[i++] = src[at];
    });
  });
  return status;
}

template <>
Status run_op(const ops::GatherND& op, KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& itensor = ctx.input(1);
  Tensor& out = ctx.output(0);
  const std::vector<int64_t> indices = tensor_to_ints(itensor);
  const int b = static_cast<int>(op.batch_dims);
  const int q = itensor.rank();
  const int64_t k = itensor.shape()[q - 1];
  const int64_t batches = data.shape().numel(0, b);
  const int64_t per_batch = itensor.shape().numel(b, q - 1);  // index tuples per batch
  const int64_t batch_size = data.shape().numel(b, data.rank());
  const int64_t slice = data.shape().numel(b + static_cast<int>(k), data.rank());
  const std::vector<int64_t> strides = data.shape().strides();
  for (int64_t bi = 0; bi < batches; ++bi) {
    for (int64_t j = 0; j < per_batch; ++j) {
      const int64_t t = bi * per_batch + j;
      int64_t at = bi * batch_size;
      for (int64_t c = 0; c < k; ++c) {
        const int axis = b + static_cast<int>(c);
        KILN_ASSIGN_OR_RETURN(int64_t w, wrap_index(ctx, indices[static_cast<size_t>(t * k + c)],
                                                    data.shape()[axis], axis));
        at += w * strides[static_cast<size_t>(axis)];
      }
      copy_elements(data, at, out, t * slice, slice);
    }
  }
  return Status();
}

template <>
Status run_op(const ops::Scatter& op, KernelContext& ctx) {
  return scatter_elements(ctx, op.axis, "none");
}

template <>
Status run_op(const ops::ScatterElements& op, KernelContext& ctx) {
  return scatter_elements(ctx, op.axis, op.reduction);
}

template <>
Status run_op(const ops::ScatterND& op, KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& itensor = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  Tensor& out = ctx.output(0);
  KILN_ASSIGN_OR_RETURN(Reduction red, parse_reduction(ctx, op.reduction, data.dtype()));
  const std::vector<int64_t> indices = tensor_to_ints(itensor);
  const int64_t k = itensor.shape()[itensor.rank() - 1];
  const int64_t tuples = itensor.shape().numel(0, itensor.rank() - 1);
  const int64_t slice = data.shape().numel(static_cast<int>(k), data.rank());
  if (updates.numel() != tuples * slice) {
    return ctx.errorf("expected {} update elements, got {}", tuples * slice, updates.numel());
  }
  const std::vector<int64_t> strides = data.shape().strides();
  copy_elements(data, 0, out, 0, data.numel());
  std::vector<int64_t> offsets;
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t at = 0;
    for (int c = 0; c < k; ++c) {
      KILN_ASSIGN_OR_RETURN(
          int64_t w, wrap_index(ctx, indices[static_cast<size_t>(t * k + c)], data.shape()[c], c));
      at += w * strides[static_cast<size_t>(c)];
    }
    offsets.push_back(at);
  }
  visit_dtype(data.dtype(), [&]<class T>() {
    const T* src = updates.data<T>();
    T* dst = out.data<T>();
    for (int64_t t = 0; t < tuples; ++t) {
      for (int64_t e = 0; e < slice; ++e)
        reduce_into(dst[offsets[static_cast<size_t>(t)] + e], src[t * slice + e], red);
    }
  });
  return Status();
}

template <>
Status run_op(const ops::OneHot& op, KernelContext& ctx) {
  const Tensor& itensor = ctx.input(0);
  const Tensor& values = ctx.input(2);
  Tensor& out = ctx.output(0);
  const std::vector<int64_t> indices = tensor_to_ints(itensor);
  const int r = itensor.rank() + 1;
  const int axis = normalized_axis(op.axis, r);
  const int64_t depth = out.shape()[axis];
  const int64_t outer = itensor.shape().numel(0, axis);
  const int64_t inner = itensor.shape().numel(axis, itensor.rank());
  visit_dtype(values.dtype(), [&]<class T>() {
    const T off = values.data<T>()[0], on = values.data<T>()[1];
    T* dst = out.data<T>();
    std::fill_n(dst, out.numel(), off);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        int64_t v = indices[static_cast<size_t>(o * inner + i)];
        if (v < 0) v += depth;
        if (v >= 0 && v < depth) dst[(o * depth + v) * inner + i] = on;
      }
    }
  });
  return Status();
}

template <>
Status run_op(const ops::Compress& op, KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const Tensor& cond = ctx.input(1);
  const int axis = op.axis ? normalized_axis(*op.axis, in.rank()) : 0;
  const int64_t n = op.axis ? in.shape()[axis] : in.numel();
  const int64_t outer = op.axis ? in.shape().numel(0, axis) : 1;
  const int64_t inner = op.axis ? in.shape().numel(axis + 1, in.rank()) : 1;
  std::vector<int64_t> selected;
  for (int64_t i = 0; i < std::min(n, cond.numel()); ++i) {
    if (cond.data<bool>()[i]) selected.push_back(i);
  }
  Shape shape{static_cast<int64_t>(selected.size())};
  if (op.axis) {
    shape = in.shape();
    shape[axis] = static_cast<int64_t>(selected.size());
  }
  KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, in.dtype(), shape));
  const auto m = static_cast<int64_t>(selected.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t s = 0; s < m; ++s) {
      copy_elements(in, (o * n + selected[static_cast<size_t>(s)]) * inner, *out,
                    (o * m + s) * inner, inner);
    }
  }
  return Status();
}

template <>
Status run_op(const ops::NonZero&, KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  std::vector<int64_t> hits;
  visit_dtype(in.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, std::string>) {
      for (int64_t i = 0; i < in.numel(); ++i) {
        if (static_cast<float>(in.data<T>()[i]) != 0.0f) hits.push_back(i);
      }
    }
  });
  const auto count = static_cast<int64_t>(hits.size());
  KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DType::kI64, Shape{in.rank(), count}));
  int64_t* dst = out->data<int64_t>();
  const std::vector<int64_t> strides = in.shape().strides();
  for (int64_t h = 0; h < count; ++h) {
    int64_t rest = hits[static_cast<size_t>(h)];
    for (int d = 0; d < in.rank(); ++d) {
      dst[d * count + h] = rest / strides[static_cast<size_t>(d)];
      rest %= strides[static_cast<size_t>(d)];
    }
  }
  return Status();
}

template <>
Status run_op(const ops::Unique& op, KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  // The input as n slices along the axis (n single elements without one); slice i is the
  // elements (o * n + i) * inner + j for o < outer, j < inner.
  const int axis = op.axis ? normalized_axis(*op.axis, in.rank()) : 0;
  const int64_t n = op.axis ? in.shape()[axis] : in.numel();
  const int64_t outer = op.axis ? in.shape().numel(0, axis) : 1;
  const int64_t inner = op.axis ? in.shape().numel(axis + 1, in.rank()) : 1;
  std::vector<int64_t> first;  // first occurrence of each unique slice, in output order
  std::vector<int64_t> inverse(static_cast<size_t>(n));
  std::vector<int64_t> counts;
  visit_dtype(in.dtype(), [&]<class T>() {
    const T* x = in.data<T>();
    // -1, 0 or 1 as slice a orders before, equal to or after slice b.
    auto compare = [&](int64_t a, int64_t b) {
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t j = 0; j < inner; ++j) {
          const T& u = x[(o * n + a) * inner + j];
          const T& v = x[(o * n + b) * inner + j];
          if (u < v) return -1;
          if (v < u) return 1;
        }
      }
      return 0;
    };
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return compare(a, b) < 0; });
    std::vector<int64_t> group_first, group_of(static_cast<size_t>(n)), group_count;
    for (size_t i = 0; i < order.size(); ++i) {
      if (i == 0 || compare(order[i - 1], order[i]) != 0) {
        group_first.push_back(order[i]);
        group_count.push_back(0);
      }
      group_of[static_cast<size_t>(order[i])] = static_cast<int64_t>(group_first.size()) - 1;
      ++group_count.back();
    }
    // Output position of each group: sorted order, or order of first occurrence.
    std::vector<int64_t> groups(group_first.size());
    std::iota(groups.begin(), groups.end(), 0);
    if (op.sorted == 0) {
      std::sort(groups.begin(), groups.end(), [&](int64_t a, int64_t b) {
        return group_first[static_cast<size_t>(a)] < group_first[static_cast<size_t>(b)];
      });
    }
    std::vector<int64_t> position(groups.size());
    for (size_t p = 0; p < groups.size(); ++p) {
      position[static_cast<size_t>(groups[p])] = static_cast<int64_t>(p);
      first.push_back(group_first[static_cast<size_t>(groups[p])]);
      counts.push_back(group_count[static_cast<size_t>(groups[p])]);
    }
    for (int64_t i = 0; i < n; ++i) {
      inverse[static_cast<size_t>(i)] =
          position[static_cast<size_t>(group_of[static_cast<size_t>(i)])];
    }
  });
  const auto m = static_cast<int64_t>(first.size());
  Shape yshape{m};
  if (op.axis) {
    yshape = in.shape();
    yshape[axis] = m;
  }
  KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, in.dtype(), yshape));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t s = 0; s < m; ++s) {
      copy_elements(in, (o * n + first[static_cast<size_t>(s)]) * inner, *y, (o * m + s) * inner,
                    inner);
    }
  }
  const std::vector<int64_t>* rest[] = {&first, &inverse, &counts};
  for (int i = 1; i < ctx.num_outputs(); ++i) {
    const std::vector<int64_t>& v = *rest[i - 1];
    ctx.set_output(i, Argument(Tensor::from_vector(v)));
  }
  return Status();
}

template <>
Status run_op(const ops::ReverseSequence& op, KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  const std::vector<int64_t> lens = tensor_to_ints(ctx.input(1));
  const int64_t batch = in.shape()[static_cast<int>(op.batch_axis)];
  const int64_t time = in.shape()[static_cast<int>(op.time_axis)];
  const int64_t inner = in.shape().numel(2, in.rank());
  if (static_cast<int64_t>(lens.size()) != batch) {
    return ctx.errorf("expected {} sequence_lens, got {}", batch, lens.size());
  }
  const int64_t sb = op.batch_axis == 0 ? time * inner : inner;
  const int64_t st = op.time_axis == 0 ? batch * inner : inner;
  copy_elements(in, 0, out, 0, in.numel());
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = lens[static_cast<size_t>(b)];
    if (len < 0 || len > time) {
      return ctx.errorf("sequence_lens[{}] = {} is outside [0, {}]", b, len, time);
    }
    for (int64_t t = 0; t < len; ++t) {
      copy_elements(in, b * sb + (len - 1 - t) * st, out, b * sb + t * st, inner);
    }
  }
  return Status();
}

}  // namespace kiln::compiler::ref
