// SPDX-License-Identifier: Apache-2.0
// ref kernels for the rnn op family: RNN, GRU and LSTM cells stepped one batch row at a time, in
// double precision.
#include "compiler/ops/rnn.h"

#include <algorithm>
#include <string_view>

#include "compiler/ops/infer_util.h"
#include "compiler/ops/rnn_activation.h"
#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

namespace {

// A float tensor's elements as doubles; zeros of `size` when the input is absent.
std::vector<double> read_or_zeros(const KernelContext& ctx, int i, int64_t size) {
  if (!ctx.has_input(i)) return std::vector<double>(static_cast<size_t>(size), 0.0);
  return tensor_to_doubles(ctx.input(i));
}

// Swaps the first two axes of a [a, b, c] row-major buffer.
std::vector<double> swap01(const std::vector<double>& v, int64_t a, int64_t b, int64_t c) {
  std::vector<double> out(v.size());
  for (int64_t i = 0; i < a; ++i) {
    for (int64_t j = 0; j < b; ++j) {
      for (int64_t k = 0; k < c; ++k)
        out[static_cast<size_t>((j * a + i) * c + k)] = v[static_cast<size_t>((i * b + j) * c + k)];
    }
  }
  return out;
}

// The weights of one direction and the activations it uses.
struct Direction {
  const double* w;   // [gates * hidden, input]
  const double* r;   // [gates * hidden, hidden]
  const double* wb;  // [gates * hidden]
  const double* rb;  // [gates * hidden]
  const double* p;   // LSTM peepholes [3 * hidden]: input, output, forget
  const RnnActivation* act;
};

struct Sizes {
  int64_t input;
  int64_t hidden;
};

// out[g] = sum_k m[g, k] * v[k] + bias[g] for g in [row0, row0 + rows).
void matvec(const double* m, const double* v, const double* bias, int64_t row0, int64_t rows,
            int64_t cols, double* out) {
  for (int64_t g = 0; g < rows; ++g) {
    double acc = bias[row0 + g];
    const double* row = m + (row0 + g) * cols;
    for (int64_t k = 0; k < cols; ++k) acc += row[k] * v[k];
    out[g] = acc;
  }
}

// One time step of one batch row: updates h (and c for LSTM) in place.
template <class Op>
void step(const Op& op, const Direction& d, const Sizes& s, const double* x, std::vector<double>& h,
          std::vector<double>& c) {
  const int64_t hs = s.hidden;
  constexpr int kGates = Op::kGates;
  auto clip = [&](double v) {
    return op.clip ? std::clamp(v, -static_cast<double>(*op.clip), static_cast<double>(*op.clip))
                   : v;
  };
  std::vector<double> gx(static_cast<size_t>(kGates * hs));
  std::vector<double> gh(static_cast<size_t>(kGates * hs));
  matvec(d.w, x, d.wb, 0, kGates * hs, s.input, gx.data());
  matvec(d.r, h.data(), d.rb, 0, kGates * hs, hs, gh.data());
  std::vector<double> next(static_cast<size_t>(hs));
  if constexpr (std::is_same_v<Op, ops::RNN>) {
    for (int64_t j = 0; j < hs; ++j) next[j] = d.act[0](clip(gx[j] + gh[j]));
  } else if constexpr (std::is_same_v<Op, ops::GRU>) {
    // Gate order z, r, h.
    std::vector<double> z(static_cast<size_t>(hs)), rg(static_cast<size_t>(hs));
    for (int64_t j = 0; j < hs; ++j) {
      z[j] = d.act[0](clip(gx[j] + gh[j]));
      rg[j] = d.act[0](clip(gx[hs + j] + gh[hs + j]));
    }
    std::vector<double> candidate(static_cast<size_t>(hs));
    if (op.linear_before_reset != 0) {
      for (int64_t j = 0; j < hs; ++j) candidate[j] = gx[2 * hs + j] + rg[j] * gh[2 * hs + j];
    } else {
      std::vector<double> reset_h(static_cast<size_t>(hs));
      for (int64_t j = 0; j < hs; ++j) reset_h[j] = rg[j] * h[j];
      matvec(d.r, reset_h.data(), d.rb, 2 * hs, hs, hs, candidate.data());
      for (int64_t j = 0; j < hs; ++j) candidate[j] += gx[2 * hs + j];
    }
    for (int64_t j = 0; j < hs; ++j) {
      const double hh = d.act[1](clip(candidate[j]));
      next[j] = (1.0 - z[j]) * hh + z[j] * h[j];
    }
  } else {
    // Gate order i, o, f, c; peepholes i, o, f.
    for (int64_t j = 0; j < hs; ++j) {
      const double pi = d.p[j], po = d.p[hs + j], pf = d.p[2 * hs + j];
      const double i = d.act[0](clip(gx[j] + gh[j] + pi * c[j]));
      const double f = op.input_forget != 0
                           ? 1.0 - i
                           : d.act[0](clip(gx[2 * hs + j] + gh[2 * hs + j] + pf * c[j]));
      const double g = d.act[1](clip(gx[3 * hs + j] + gh[3 * hs + j]));
      const double cell = f * c[j] + i * g;
      const double o = d.act[0](clip(gx[hs + j] + gh[hs + j] + po * cell));
      c[j] = cell;
      next[j] = o * d.act[2](cell);
    }
  }
  h = std::move(next);
}

template <class Op>
Status run_recurrent(const Op& op, KernelContext& ctx) {
  constexpr int kGates = Op::kGates;
  constexpr bool kLstm = std::is_same_v<Op, ops::LSTM>;
  constexpr auto& kDefaults = Op::kDefaultActivations;
  constexpr int kActs = static_cast<int>(std::size(kDefaults));
  const Tensor& xt = ctx.input(0);
  const DType dtype = xt.dtype();
  const int64_t nd = op.direction == "bidirectional" ? 2 : 1;
  const int64_t seq = xt.shape()[op.layout == 0 ? 0 : 1];
  const int64_t batch = xt.shape()[op.layout == 0 ? 1 : 0];
  const Sizes s{xt.shape()[2], ctx.input(2).shape()[2]};
  const int64_t hs = s.hidden;
  KILN_ASSIGN_OR_RETURN(
      std::vector<RnnActivation> acts,
      resolve_rnn_activations(op.activations, op.activation_alpha, op.activation_beta, kDefaults,
                              static_cast<int>(nd)));

  std::vector<double> x = tensor_to_doubles(xt);
  if (op.layout != 0) x = swap01(x, batch, seq, s.input);  // to [seq, batch, input]
  const std::vector<double> w = tensor_to_doubles(ctx.input(1));
  const std::vector<double> r = tensor_to_doubles(ctx.input(2));
  const std::vector<double> b = read_or_zeros(ctx, 3, nd * 2 * kGates * hs);
  std::vector<int64_t> lens(static_cast<size_t>(batch), seq);
  if (ctx.has_input(4)) {
    lens = tensor_to_ints(ctx.input(4));
    for (int64_t len : lens) {
      if (len < 0 || len > seq) {
        return ctx.errorf("sequence lengths must be in [0, {}], got {}", seq, len);
      }
    }
  }
  std::vector<double> h0 = read_or_zeros(ctx, 5, nd * batch * hs);
  std::vector<double> c0 = read_or_zeros(ctx, 6, nd * batch * hs);
  const std::vector<double> p = read_or_zeros(ctx, 7, nd * 3 * hs);
  if (op.layout != 0) {  // to [nd, batch, hidden]
    h0 = swap01(h0, batch, nd, hs);
    c0 = swap01(c0, batch, nd, hs);
  }

  std::vector<double> y(static_cast<size_t>(seq * nd * batch * hs), 0.0);  // [seq, nd, batch, hs]
  std::vector<double> yh(static_cast<size_t>(nd * batch * hs), 0.0);       // [nd, batch, hs]
  std::vector<double> yc(yh.size(), 0.0);
  for (int64_t dir = 0; dir < nd; ++dir) {
    const bool reverse = op.direction == "reverse" || dir == 1;
    const int64_t gates = kGates * hs;
    const Direction d{w.data() + dir * gates * s.input, r.data() + dir * gates * hs,
                      b.data() + dir * 2 * gates,       b.data() + dir * 2 * gates + gates,
                      p.data() + dir * 3 * hs,          acts.data() + dir * kActs};
    for (int64_t n = 0; n < batch; ++n) {
      const auto state = static_cast<size_t>((dir * batch + n) * hs);
      std::vector<double> h(h0.begin() + state, h0.begin() + state + hs);
      std::vector<double> c(c0.begin() + state, c0.begin() + state + hs);
      const int64_t len = lens[static_cast<size_t>(n)];
      for (int64_t i = 0; i < len; ++i) {
        const int64_t t = reverse ? len - 1 - i : i;
        step(op, d, s, x.data() + (t * batch + n) * s.input, h, c);
        std::copy(h.begin(), h.end(), y.begin() + ((t * nd + dir) * batch + n) * hs);
      }
      std::copy(h.begin(), h.end(), yh.begin() + state);
      std::copy(c.begin(), c.end(), yc.begin() + state);
    }
  }

  if (op.layout != 0) {
    y = swap01(y, seq, nd * batch, hs);  // [nd * batch, seq, hs] = [nd, batch, seq, hs]
    y = swap01(y, nd, batch * seq, hs);  // [batch, seq, nd, hs]
    yh = swap01(yh, nd, batch, hs);
    yc = swap01(yc, nd, batch, hs);
  }
  const Shape y_shape = op.layout == 0 ? Shape{seq, nd, batch, hs} : Shape{batch, seq, nd, hs};
  const Shape state_shape = op.layout == 0 ? Shape{nd, batch, hs} : Shape{batch, nd, hs};
  const std::vector<double>* values[] = {&y, &yh, &yc};
  const Shape* shapes[] = {&y_shape, &state_shape, &state_shape};
  for (int i = 0; i < ctx.num_outputs() && i < (kLstm ? 3 : 2); ++i) {
    if (!ctx.output_used(i)) continue;
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(i, dtype, *shapes[i]));
    const std::vector<double>& v = *values[i];
    visit_dtype(dtype, [&]<class T>() {
      if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
                    std::is_same_v<T, BFloat16>) {
        T* o = out->data<T>();
        for (size_t e = 0; e < v.size(); ++e) o[e] = static_cast<T>(v[e]);
      }
    });
  }
  return Status();
}

}  // namespace

template <>
Status run_op(const ops::RNN& op, KernelContext& ctx) {
  return run_recurrent(op, ctx);
}

template <>
Status run_op(const ops::GRU& op, KernelContext& ctx) {
  return run_recurrent(op, ctx);
}

template <>
Status run_op(const ops::LSTM& op, KernelContext& ctx) {
  return run_recurrent(op, ctx);
}

}  // namespace kiln::compiler::ref
