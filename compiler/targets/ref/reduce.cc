// SPDX-License-Identifier: Apache-2.0
// ref kernels for the reduce op family: plain loops, the executable specification.
#include "compiler/ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "compiler/ops/infer_util.h"
#include "compiler/targets/ref/accumulate.h"
#include "compiler/targets/ref/kernel.h"
#include "compiler/targets/ref/ref_util.h"

namespace kiln::compiler::ref {

namespace {

// Runs a Reduce* op: resolves the axes as inference did, handles the no-op case, and calls
// `body.template operator()<T>(input, kept, output)` where `kept` is the input shape with every
// reduced dim set to 1 (the output's elements in keepdims layout). With kBool, bool inputs reach
// the body too (ReduceMax and ReduceMin since opset 20).
template <bool kBool = false, class R, class Body>
Status run_reduce(const R& op, KernelContext& ctx, Body&& body) {
  const Tensor& in = ctx.input(0);
  std::optional<std::vector<int64_t>> axes = op.axes;
  if (ctx.has_input(1)) axes = tensor_to_ints(ctx.input(1));
  Tensor& out = ctx.output(0);
  const int rank = in.rank();
  Shape kept = in.shape();
  if (!axes || axes->empty()) {
    if (op.noop_with_empty_axes != 0) {
      KILN_CHECK(out.nbytes() == in.nbytes(), "reduce: no-op output size mismatch");
      if (in.nbytes() > 0) std::memcpy(out.raw_data(), in.raw_data(), in.nbytes());
      return Status();
    }
    for (int d = 0; d < rank; ++d) kept[d] = 1;
  } else {
    for (int64_t a : *axes) {
      KILN_ASSIGN_OR_RETURN(int d, normalize_axis(a, rank));
      kept[d] = 1;
    }
  }
  KILN_CHECK(out.numel() == kept.numel(), "reduce: output size does not match the inferred shape");
  Status status;
  visit_dtype(in.dtype(), [&]<class T>() {
    if constexpr (kIsNumeric<T> || (kBool && std::is_same_v<T, bool>)) {
      body.template operator()<T>(in, kept, out);
    } else {
      status = ctx.errorf("expected a numeric input, got {}", dtype_name(in.dtype()));
    }
  });
  return status;
}

// acc[k] = step(acc[k], x) for every input element x, k its output element.
template <class T, class A, class Step>
void accumulate(const Tensor& in, const Shape& kept, std::vector<A>& acc, Step step) {
  const T* x = in.data<T>();
  for_each_broadcast(in.shape(), in.shape(), kept, [&](int64_t o, int64_t, int64_t k) {
    A& a = acc[static_cast<size_t>(k)];
    a = step(a, to_acc(x[o]), k);
  });
}

// out[k] = finish(acc[k]) with finish returning T.
template <class T, class A, class Finish>
void store(const std::vector<A>& acc, Tensor& out, Finish finish) {
  T* y = out.data<T>();
  for (size_t k = 0; k < acc.size(); ++k) y[k] = finish(acc[k]);
}

// Sum of f(x) over the reduced axes, then `finish`.
template <class T, class F, class Finish>
void reduce_sum_of(const Tensor& in, const Shape& kept, Tensor& out, F f, Finish finish) {
  using A = acc_t<T>;
  std::vector<A> acc(static_cast<size_t>(out.numel()), A(0));
  accumulate<T>(in, kept, acc, [&](A a, A x, int64_t) { return acc_add(a, f(x)); });
  store<T>(acc, out, finish);
}

// Max (or min) over the reduced axes; NaN propagates; an empty reduction gives -inf (+inf), or the
// lowest (highest) value for integers.
template <class T, bool kMax>
void reduce_extreme(const Tensor& in, const Shape& kept, Tensor& out) {
  using A = acc_t<T>;
  A init;
  if constexpr (kIsFloat<T>) {
    init =
        kMax ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  } else {
    init = kMax ? static_cast<A>(std::numeric_limits<T>::lowest())
                : static_cast<A>(std::numeric_limits<T>::max());
  }
  std::vector<A> acc(static_cast<size_t>(out.numel()), init);
  accumulate<T>(in, kept, acc, [](A a, A x, int64_t) {
    if (acc_isnan(a)) return a;
    if (acc_isnan(x)) return x;
    return kMax ? std::max(a, x) : std::min(a, x);
  });
  store<T>(acc, out, [](A a) { return from_acc<T>(a); });
}

// Max (any) or min (all) of bools over the reduced axes; an empty reduction gives false (true).
template <bool kMax>
void reduce_bools(const Tensor& in, const Shape& kept, Tensor& out) {
  bool* y = out.data<bool>();
  std::fill_n(y, out.numel(), !kMax);
  const bool* x = in.data<bool>();
  for_each_broadcast(in.shape(), in.shape(), kept, [&](int64_t o, int64_t, int64_t k) {
    if (x[o] == kMax) y[k] = kMax;
  });
}

// Elements per output element (0 for an empty input).
int64_t reduction_count(const Tensor& in, const Tensor& out) {
  return out.numel() == 0 ? 0 : in.numel() / out.numel();
}

// The (outer, axis, inner) sizes of a row-major shape split at `axis`.
struct AxisSplit {
  int64_t outer;
  int64_t n;
  int64_t inner;
};
AxisSplit split_at(const Shape& shape, int axis) {
  return {shape.numel(0, axis), shape[axis], shape.numel(axis + 1, shape.rank())};
}

template <bool kMax, class A>
Status run_arg_reduce(const A& op, KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  KILN_ASSIGN_OR_RETURN(int axis, normalize_axis(op.axis, in.rank()));
  const AxisSplit s = split_at(in.shape(), axis);
  if (s.n == 0) return ctx.errorf("expected a non-empty axis {}, got size 0", axis);
  int64_t* y = ctx.output(0).data<int64_t>();
  Status status;
  visit_dtype(in.dtype(), [&]<class T>() {
    if constexpr (kIsNumeric<T>) {
      const T* x = in.data<T>();
      for (int64_t o = 0; o < s.outer; ++o) {
        for (int64_t i = 0; i < s.inner; ++i) {
          const T* row = x + o * s.n * s.inner + i;
          int64_t best = 0;
          auto best_value = to_acc(row[0]);
          for (int64_t j = 1; j < s.n; ++j) {
            auto v = to_acc(row[j * s.inner]);
            // NaN wins (like numpy); among equal values the first, or the last when asked.
            bool better;
            if (acc_isnan(best_value)) {
              better = op.select_last_index != 0 && acc_isnan(v);
            } else if (acc_isnan(v)) {
              better = true;
            } else if (v == best_value) {
              better = op.select_last_index != 0;
            } else {
              better = kMax ? v > best_value : v < best_value;
            }
            if (better) {
              best = j;
              best_value = v;
            }
          }
          y[o * s.inner + i] = best;
        }
      }
    } else {
      status = ctx.errorf("expected a numeric input, got {}", dtype_name(in.dtype()));
    }
  });
  return status;
}

// CumSum (kProduct false) and CumProd along the axis of input 1.
template <bool kProduct, class C>
Status run_cumulative(const C& op, KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const std::vector<int64_t> axis_value = tensor_to_ints(ctx.input(1));
  if (axis_value.size() != 1) return ctx.errorf("expected one axis, got {}", axis_value.size());
  KILN_ASSIGN_OR_RETURN(int axis, normalize_axis(axis_value[0], in.rank()));
  const AxisSplit s = split_at(in.shape(), axis);
  Tensor& out = ctx.output(0);
  Status status;
  visit_dtype(in.dtype(), [&]<class T>() {
    if constexpr (kIsNumeric<T>) {
      using A = acc_t<T>;
      const T* x = in.data<T>();
      T* y = out.data<T>();
      for (int64_t o = 0; o < s.outer; ++o) {
        for (int64_t i = 0; i < s.inner; ++i) {
          const int64_t base = o * s.n * s.inner + i;
          A acc(kProduct ? 1 : 0);
          for (int64_t t = 0; t < s.n; ++t) {
            const int64_t j = op.reverse != 0 ? s.n - 1 - t : t;
            const int64_t at = base + j * s.inner;
            const A v = to_acc(x[at]);
            auto step = [&] { acc = kProduct ? acc_mul(acc, v) : acc_add(acc, v); };
            if (op.exclusive == 0) step();
            y[at] = from_acc<T>(acc);
            if (op.exclusive != 0) step();
          }
        }
      }
    } else {
      status = ctx.errorf("expected a numeric input, got {}", dtype_name(in.dtype()));
    }
  });
  return status;
}

}  // namespace

template <>
Status run_op(const ops::ReduceL1& op, KernelContext& ctx) {
  return run_reduce(op, ctx, [&]<class T>(const Tensor& in, const Shape& kept, Tensor& out) {
    reduce_sum_of<T>(
        in, kept, out, [](auto x) { return acc_abs(x); },
        [](acc_t<T> a) { return from_acc<T>(a); });
  });
}

template <>
Status run_op(const ops::ReduceL2& op, KernelContext& ctx) {
  return run_reduce(op, ctx, [&]<class T>(const Tensor& in, const Shape& kept, Tensor& out) {
    reduce_sum_of<T>(
        in, kept, out, [](auto x) { return acc_mul(x, x); },
        [](acc_t<T> a) { return from_double<T>(std::sqrt(static_cast<double>(a))); });
  });
}

template <>
Status run_op(const ops::ReduceLogSum& op, KernelContext& ctx) {
  return run_reduce(op, ctx, [&]<class T>(const Tensor& in, const Shape& kept, Tensor& out) {
    reduce_sum_of<T>(
        in, kept, out, [](auto x) { return x; },
        [](acc_t<T> a) { return from_double<T>(std::log(static_cast<double>(a))); });
  });
}

template <>
Status run_op(const ops::ReduceLogSumExp& op, KernelContext& ctx) {
  return run_reduce(op, ctx, [&]<class T>(const Tensor& in, const Shape& kept, Tensor& out) {
    // log(sum(exp(x))) = m + log(sum(exp(x - m))) with m the max, so exp cannot overflow.
    const auto n = static_cast<size_t>(out.numel());
    std::vector<double> m(n, -std::numeric_limits<double>::infinity());
    accumulate<T>(in, kept, m,
                  [](double a, auto x, int64_t) { return std::max(a, static_cast<double>(x)); });
    for (double& v : m) {
      if (!std::isfinite(v)) v = 0;
    }
    std::vector<double> sum(n, 0.0);
    accumulate<T>(in, kept, sum, [&](double a, auto x, int64_t k) {
      return a + std::exp(static_cast<double>(x) - m[static_cast<size_t>(k)]);
    });
    T* y = out.data<T>();
    for (size_t k = 0; k < n; ++k) y[k] = from_double<T>(m[k] + std::log(sum[k]));
  });
}

template <>
Status run_op(const ops::ReduceMax& op, KernelContext& ctx) {
  return run_reduce<true>(op, ctx, [&]<class T>(const Tensor& in, const Shape& kept, Tensor& out) {
    if constexpr (std::is_same_v<T, bool>) {
      reduce_bools<true>(in, kept, out);
    } else {
      reduce_extreme<T, true>(in, kept, out);
    }
  });
}

template <>
Status run_op(const ops::ReduceMean& op, KernelContext& ctx) {
  return run_reduce(op, ctx, [&]<class T>(const Tensor& in, const Shape& kept, Tensor& out) {
    using A = acc_t<T>;
    const int64_t count = reduction_count(in, out);
    reduce_sum_of<T>(
        in, kept, out, [](A x) { return x; },
        [&](A a) {
          if constexpr (kIsFloat<T>) {
            return from_acc<T>(a / static_cast<double>(count));
          } else {
            return count == 0 ? T(0) : from_acc<T>(a / static_cast<A>(count));
          }
        });
  });
}

template <>
Status run_op(const ops::ReduceMin& op, KernelContext& ctx) {
  return run_reduce<true>(op, ctx, [&]<class T>(const Tensor& in, const Shape& kept, Tensor& out) {
    if constexpr (std::is_same_v<T, bool>) {
      reduce_bools<false>(in, kept, out);
    } else {
      reduce_extreme<T, false>(in, kept, out);
    }
  });
}

template <>
Status run_op(const ops::ReduceProd& op, KernelContext& ctx) {
  return run_reduce(op, ctx, [&]<class T>(const Tensor& in, const Shape& kept, Tensor& out) {
    using A = acc_t<T>;
    std::vector<A> acc(static_cast<size_t>(out.numel()), A(1));
    accumulate<T>(in, kept, acc, [](A a, A x, int64_t) { return acc_mul(a, x); });
    store<T>(acc, out, [](A a) { return from_acc<T>(a); });
  });
}

template <>
Status run_op(const ops::ReduceSum& op, KernelContext& ctx) {
  return run_reduce(op, ctx, [&]<class T>(const Tensor& in, const Shape& kept, Tensor& out) {
    reduce_sum_of<T>(
        in, kept, out, [](auto x) { return x; }, [](acc_t<T> a) { return from_acc<T>(a); });
  });
}

template <>
Status run_op(const ops::ReduceSumSquare& op, KernelContext& ctx) {
  return run_reduce(op, ctx, [&]<class T>(const Tensor& in, const Shape& kept, Tensor& out) {
    reduce_sum_of<T>(
        in, kept, out, [](auto x) { return acc_mul(x, x); },
        [](acc_t<T> a) { return from_acc<T>(a); });
  });
}

template <>
Status run_op(const ops::ArgMax& op, KernelContext& ctx) {
  return run_arg_reduce<true>(op, ctx);
}

template <>
Status run_op(const ops::ArgMin& op, KernelContext& ctx) {
  return run_arg_reduce<false>(op, ctx);
}

template <>
Status run_op(const ops::CumSum& op, KernelContext& ctx) {
  return run_cumulative<false>(op, ctx);
}

template <>
Status run_op(const ops::CumProd& op, KernelContext& ctx) {
  return run_cumulative<true>(op, ctx);
}

template <>
Status run_op(const ops::TopK& op, KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const std::vector<int64_t> kv = tensor_to_ints(ctx.input(1));
  if (kv.size() != 1) return ctx.errorf("expected one k value, got {}", kv.size());
  KILN_ASSIGN_OR_RETURN(int axis, normalize_axis(op.axis, in.rank()));
  const AxisSplit s = split_at(in.shape(), axis);
  const int64_t k = kv[0];
  if (k < 0 || k > s.n) return ctx.errorf("expected k in [0, {}], got {}", s.n, k);
  Shape out_shape = in.shape();
  out_shape[axis] = k;
  KILN_ASSIGN_OR_RETURN(Tensor * values, ctx.allocate_output(0, in.dtype(), out_shape));
  KILN_ASSIGN_OR_RETURN(Tensor * indices, ctx.allocate_output(1, DType::kI64, out_shape));
  Status status;
  visit_dtype(in.dtype(), [&]<class T>() {
    if constexpr (kIsNumeric<T>) {
      using A = acc_t<T>;
      const T* x = in.data<T>();
      T* yv = values->data<T>();
      int64_t* yi = indices->data<int64_t>();
      std::vector<A> row(static_cast<size_t>(s.n));
      std::vector<int64_t> order(static_cast<size_t>(s.n));
      // A strict weak order with NaN above every number; stable, so ties keep the lower index
      // first.
      auto before = [&](int64_t a, int64_t b) {
        const A va = row[static_cast<size_t>(a)];
        const A vb = row[static_cast<size_t>(b)];
        const bool na = acc_isnan(va), nb = acc_isnan(vb);
        if (op.largest != 0) return (na && !nb) || (!na && !nb && va > vb);
        return (!na && nb) || (!na && !nb && va < vb);
      };
      for (int64_t o = 0; o < s.outer; ++o) {
        for (int64_t i = 0; i < s.inner; ++i) {
          const int64_t base = o * s.n * s.inner + i;
          for (int64_t j = 0; j < s.n; ++j)
            row[static_cast<size_t>(j)] = to_acc(x[base + j * s.inner]);
          std::iota(order.begin(), order.end(), int64_t{0});
          std::stable_sort(order.begin(), order.end(), before);
          const int64_t out_base = o * k * s.inner + i;
          for (int64_t j = 0; j < k; ++j) {
            const int64_t src = order[static_cast<size_t>(j)];
            yv[out_base + j * s.inner] = x[base + src * s.inner];
            yi[out_base + j * s.inner] = src;
          }
        }
      }
    } else {
      status = ctx.errorf("expected a numeric input, got {}", dtype_name(in.dtype()));
    }
  });
  return status;
}

}  // namespace kiln::compiler::ref
