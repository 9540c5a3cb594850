// SPDX-License-Identifier: Apache-2.0
// ref kernels for the linalg op family: plain loops, the executable specification.
#include "compiler/ops/linalg.h"

#include <cmath>
#include <utility>

#include "compiler/ops/linalg_einsum.h"
#include "compiler/targets/ref/accumulate.h"
#include "compiler/targets/ref/kernel.h"
#include "compiler/targets/ref/ref_util.h"

namespace kiln::compiler::ref {

namespace {

// Calls `fn.template operator()<T>()` for numeric dtypes; an error for the others.
template <class F>
Status visit_numeric(const KernelContext& ctx, DType dt, F&& fn) {
  Status status;
  visit_dtype(dt, [&]<class T>() {
    if constexpr (kIsNumeric<T>) {
      fn.template operator()<T>();
    } else {
      status = ctx.errorf("expected a numeric input, got {}", dtype_name(dt));
    }
  });
  return status;
}

}  // namespace

template <>
Status run_op(const ops::Gemm& op, KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const bool ta = op.transA != 0, tb = op.transB != 0;
  const int64_t m = a.shape()[ta ? 1 : 0];
  const int64_t k = a.shape()[ta ? 0 : 1];
  const int64_t n = b.shape()[tb ? 0 : 1];
  const Shape out_shape{m, n};
  Tensor& out = ctx.output(0);
  const Tensor* c = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  std::vector<int64_t> cs = {0, 0};
  if (c != nullptr) {
    KILN_ASSIGN_OR_RETURN(Shape cb, broadcast_shapes(c->shape(), out_shape));
    if (!(cb == out_shape)) {
      return ctx.errorf("expected C to broadcast to {}, got {}", out_shape.to_string(),
                        c->shape().to_string());
    }
    cs = broadcast_strides(c->shape(), out_shape);
  }
  // Integer Gemm stays exact (wrapping) when alpha and beta are whole numbers.
  const bool whole = std::trunc(op.alpha) == op.alpha && std::trunc(op.beta) == op.beta &&
                     std::fabs(op.alpha) < 9e15 && std::fabs(op.beta) < 9e15;
  return visit_numeric(ctx, a.dtype(), [&]<class T>() {
    using A = acc_t<T>;
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    const T* pc = c != nullptr ? c->data<T>() : nullptr;
    T* y = out.data<T>();
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        A sum(0);
        for (int64_t p = 0; p < k; ++p) {
          const A x = to_acc(pa[ta ? p * m + i : i * k + p]);
          const A w = to_acc(pb[tb ? j * k + p : p * n + j]);
          sum = acc_add(sum, acc_mul(x, w));
        }
        const A cv = pc != nullptr ? to_acc(pc[i * cs[0] + j * cs[1]]) : A(0);
        if constexpr (kIsFloat<T>) {
          y[i * n + j] =
              from_acc<T>(static_cast<double>(op.alpha) * sum + static_cast<double>(op.beta) * cv);
        } else if (whole) {
          y[i * n + j] =
              from_acc<T>(acc_add(acc_mul(static_cast<A>(static_cast<int64_t>(op.alpha)), sum),
                                  acc_mul(static_cast<A>(static_cast<int64_t>(op.beta)), cv)));
        } else {
          y[i * n + j] = from_double<T>(static_cast<double>(op.alpha) * static_cast<double>(sum) +
                                        static_cast<double>(op.beta) * static_cast<double>(cv));
        }
      }
    }
  });
}

template <>
Status run_op(const ops::MatMul&, KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  // 1-D operands are a row (a) or a column (b) whose unit dim the output drops.
  Shape as = a.shape(), bs = b.shape();
  if (as.rank() == 1) as = Shape{1, as[0]};
  if (bs.rank() == 1) bs = Shape{bs[0], 1};
  const int64_t m = as[as.rank() - 2], k = as[as.rank() - 1], n = bs[bs.rank() - 1];
  if (bs[bs.rank() - 2] != k) {
    return ctx.errorf("expected equal inner (K) dims, got {} and {}", k, bs[bs.rank() - 2]);
  }
  const Shape a_batch(std::vector<int64_t>(as.begin(), as.end() - 2));
  const Shape b_batch(std::vector<int64_t>(bs.begin(), bs.end() - 2));
  KILN_ASSIGN_OR_RETURN(Shape batch, broadcast_shapes(a_batch, b_batch));
  Tensor& out = ctx.output(0);
  KILN_CHECK(out.numel() == batch.numel() * m * n, "matmul: output size does not match inference");
  return visit_numeric(ctx, a.dtype(), [&]<class T>() {
    using A = acc_t<T>;
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* y = out.data<T>();
    for_each_broadcast(batch, a_batch, b_batch, [&](int64_t o, int64_t ia, int64_t ib) {
      const T* ma = pa + ia * m * k;
      const T* mb = pb + ib * k * n;
      T* my = y + o * m * n;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          A sum(0);
          for (int64_t p = 0; p < k; ++p)
            sum = acc_add(sum, acc_mul(to_acc(ma[i * k + p]), to_acc(mb[p * n + j])));
          my[i * n + j] = from_acc<T>(sum);
        }
      }
    });
  });
}

template <>
Status run_op(const ops::Einsum& op, KernelContext& ctx) {
  if (!op.equation) return ctx.error("expected the attribute equation, got none");
  const int num_inputs = ctx.num_inputs();
  std::vector<int> ranks;
  for (int i = 0; i < num_inputs; ++i) ranks.push_back(ctx.input(i).rank());
  Result<EinsumEquation> parsed = parse_einsum(*op.equation, ranks);
  if (!parsed.ok()) return ctx.error(parsed.status().message());
  const EinsumEquation& eq = *parsed;
  const auto num_labels = static_cast<size_t>(eq.num_labels);
  // Each label's size; ellipsis dims of size 1 broadcast.
  std::vector<int64_t> size(num_labels, -1);
  for (int i = 0; i < num_inputs; ++i) {
    const Shape& s = ctx.input(i).shape();
    for (int d = 0; d < s.rank(); ++d) {
      const auto l = static_cast<size_t>(eq.inputs[static_cast<size_t>(i)][static_cast<size_t>(d)]);
      const bool ellipsis = l >= static_cast<size_t>(EinsumEquation::kNumLetters);
      if (size[l] < 0 || (ellipsis && size[l] == 1)) {
        size[l] = s[d];
      } else if (size[l] != s[d] && !(ellipsis && s[d] == 1)) {
        return ctx.errorf("expected equal sizes for an einsum label, got {} and {}", size[l], s[d]);
      }
    }
  }
  // The labels to loop over: the output's, then the summed ones. Strides per operand and label;
  // a label repeated within one input (a diagonal) adds its dims' strides.
  std::vector<int> loop(eq.output.begin(), eq.output.end());
  std::vector<bool> in_output(num_labels, false);
  for (int l : eq.output) in_output[static_cast<size_t>(l)] = true;
  for (size_t l = 0; l < num_labels; ++l) {
    if (size[l] >= 0 && !in_output[l]) loop.push_back(static_cast<int>(l));
  }
  std::vector<std::vector<int64_t>> strides(static_cast<size_t>(num_inputs) + 1,
                                            std::vector<int64_t>(num_labels, 0));
  for (int i = 0; i < num_inputs; ++i) {
    const Shape& s = ctx.input(i).shape();
    const std::vector<int64_t> own = s.strides();
    for (int d = 0; d < s.rank(); ++d) {
      const auto l = static_cast<size_t>(eq.inputs[static_cast<size_t>(i)][static_cast<size_t>(d)]);
      if (s[d] != 1 || size[l] == 1)
        strides[static_cast<size_t>(i)][l] += own[static_cast<size_t>(d)];
    }
  }
  Tensor& out = ctx.output(0);
  {
    int64_t stride = 1;
    for (size_t d = eq.output.size(); d-- > 0;) {
      const auto l = static_cast<size_t>(eq.output[d]);
      strides[static_cast<size_t>(num_inputs)][l] = stride;
      stride *= size[l];
    }
    KILN_CHECK(stride == out.numel(), "einsum: output size does not match inference");
  }
  int64_t total = 1;
  for (int l : loop) total *= size[static_cast<size_t>(l)];
  const DType dt = ctx.input(0).dtype();
  return visit_numeric(ctx, dt, [&]<class T>() {
    using A = acc_t<T>;
    std::vector<const T*> x;
    for (int i = 0; i < num_inputs; ++i) x.push_back(ctx.input(i).data<T>());
    std::vector<A> acc(static_cast<size_t>(out.numel()), A(0));
    std::vector<int64_t> index(loop.size(), 0);
    std::vector<int64_t> offset(static_cast<size_t>(num_inputs) + 1, 0);
    for (int64_t step = 0; step < total; ++step) {
      A prod = to_acc(x[0][offset[0]]);
      for (size_t i = 1; i < x.size(); ++i) prod = acc_mul(prod, to_acc(x[i][offset[i]]));
      A& a = acc[static_cast<size_t>(offset.back())];
      a = acc_add(a, prod);
      for (size_t d = loop.size(); d-- > 0;) {
        const auto l = static_cast<size_t>(loop[d]);
        ++index[d];
        for (size_t i = 0; i < offset.size(); ++i) offset[i] += strides[i][l];
        if (index[d] < size[l]) break;
        for (size_t i = 0; i < offset.size(); ++i) offset[i] -= strides[i][l] * index[d];
        index[d] = 0;
      }
    }
    T* y = out.data<T>();
    for (size_t o = 0; o < acc.size(); ++o) y[o] = from_acc<T>(acc[o]);
  });
}

template <>
Status run_op(const ops::Det&, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int rank = x.rank();
  const int64_t n = x.shape()[rank - 1];
  Tensor& out = ctx.output(0);
  return visit_numeric(ctx, x.dtype(), [&]<class T>() {
    if constexpr (kIsFloat<T>) {
      const T* px = x.data<T>();
      T* y = out.data<T>();
      std::vector<double> lu(static_cast<size_t>(n * n));
      for (int64_t b = 0; b < out.numel(); ++b) {
        for (int64_t e = 0; e < n * n; ++e) lu[static_cast<size_t>(e)] = to_acc(px[b * n * n + e]);
        auto at = [&](int64_t r, int64_t c) -> double& {
          return lu[static_cast<size_t>(r * n + c)];
        };
        // LU decomposition with partial pivoting; det = sign * prod(diagonal).
        double det = 1.0;
        for (int64_t col = 0; col < n && det != 0.0; ++col) {
          int64_t pivot = col;
          for (int64_t r = col + 1; r < n; ++r) {
            if (std::fabs(at(r, col)) > std::fabs(at(pivot, col))) pivot = r;
          }
          if (at(pivot, col) == 0.0) {
            det = 0.0;
            break;
          }
          if (pivot != col) {
            for (int64_t c = 0; c < n; ++c) std::swap(at(pivot, c), at(col, c));
            det = -det;
          }
          det *= at(col, col);
          for (int64_t r = col + 1; r < n; ++r) {
            const double f = at(r, col) / at(col, col);
            for (int64_t c = col + 1; c < n; ++c) at(r, c) -= f * at(col, c);
          }
        }
        y[b] = from_acc<T>(det);
      }
    } else {
      KILN_CHECK(false, "det: inference admits only floating-point inputs");
    }
  });
}

}  // namespace kiln::compiler::ref
