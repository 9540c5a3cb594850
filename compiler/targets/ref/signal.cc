// SPDX-License-Identifier: Apache-2.0
// ref kernels for the signal op family: plain loops, the executable specification.
#include "compiler/ops/signal.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <vector>

#include "compiler/ops/infer_util.h"
#include "compiler/targets/ref/convert.h"
#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

namespace {

using Complex = std::complex<double>;

// The DFT of x (length n) at frequencies [0, out_n), in double: X[k] = sum_j x[j] w^(jk) with
// w = exp(-2 pi i / n), conjugated and scaled by 1/n for the inverse.
void dft_line(const std::vector<Complex>& x, int64_t out_n, bool inverse, Complex* out) {
  const auto n = static_cast<int64_t>(x.size());
  const double sign = inverse ? 1.0 : -1.0;
  std::vector<Complex> twiddle(static_cast<size_t>(n));
  for (int64_t m = 0; m < n; ++m) {
    double angle = sign * 2.0 * std::numbers::pi * static_cast<double>(m) / static_cast<double>(n);
    twiddle[static_cast<size_t>(m)] = Complex(std::cos(angle), std::sin(angle));
  }
  for (int64_t k = 0; k < out_n; ++k) {
    Complex sum = 0;
    int64_t m = 0;  // (j * k) mod n
    for (int64_t j = 0; j < n; ++j) {
      sum += x[static_cast<size_t>(j)] * twiddle[static_cast<size_t>(m)];
      m += k % n;
      if (m >= n) m -= n;
    }
    out[k] = inverse ? sum / static_cast<double>(n) : sum;
  }
}

int64_t scalar_input(KernelContext& ctx, int i) {
  return tensor_to_ints(ctx.input(i)).front();
}

// Interleaves complex values into (real, imaginary) pairs and stores them into `out`.
void store_complex(Tensor& out, const std::vector<Complex>& values) {
  std::vector<double> flat(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    flat[2 * i] = values[i].real();
    flat[2 * i + 1] = values[i].imag();
  }
  store_doubles(flat, out);
}

// The window a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or size - 1.
Status run_window(KernelContext& ctx, DType dtype, bool periodic, double a0, double a1, double a2) {
  const int64_t size = scalar_input(ctx, 0);
  KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, dtype, Shape{size}));
  const double denom = static_cast<double>(periodic ? size : size - 1);
  std::vector<double> w(static_cast<size_t>(size));
  for (int64_t n = 0; n < size; ++n) {
    if (denom == 0) {
      w[static_cast<size_t>(n)] = 1.0;
      continue;
    }
    double x = 2.0 * std::numbers::pi * static_cast<double>(n) / denom;
    w[static_cast<size_t>(n)] = a0 - a1 * std::cos(x) + a2 * std::cos(2.0 * x);
  }
  store_doubles(w, *out);
  return Status();
}

}  // namespace

template <>
Status run_op(const ops::DFT& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Shape& shape = x.shape();
  const int rank = shape.rank();
  const int64_t given_axis = ctx.has_input(2) ? scalar_input(ctx, 2) : op.axis;
  const int axis = static_cast<int>(given_axis < 0 ? given_axis + rank : given_axis);
  if (axis < 1 || axis > rank - 2) {
    return ctx.errorf("axis must name a signal dim in [1, {}], got {}", rank - 2, given_axis);
  }
  const int64_t comps = shape[rank - 1];
  const int64_t in_len = shape[axis];
  // IRFFT: the input holds bins [0, n/2] of a real signal's spectrum; the rest is their conjugates.
  const bool irfft = op.inverse != 0 && op.onesided != 0;
  const int64_t n = ctx.has_input(1) ? scalar_input(ctx, 1) : irfft ? 2 * (in_len - 1) : in_len;
  if (n < 1) return ctx.errorf("expected a DFT length >= 1, got {}", n);
  const int64_t out_n = op.onesided && !irfft ? n / 2 + 1 : n;
  const int64_t outer = shape.numel(0, axis);
  const int64_t inner = shape.numel(axis + 1, rank - 1);
  Shape out_shape = shape;
  out_shape[axis] = out_n;
  out_shape[rank - 1] = irfft ? 1 : 2;
  KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), out_shape));

  const std::vector<double> in = tensor_to_doubles(x);
  std::vector<Complex> result(static_cast<size_t>(outer * out_n * inner));
  std::vector<Complex> line(static_cast<size_t>(n));
  std::vector<Complex> spectrum(static_cast<size_t>(out_n));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto read = [&](int64_t j) {
        if (j >= in_len) return Complex(0);
        auto base = static_cast<size_t>(((o * in_len + j) * inner + i) * comps);
        return Complex(in[base], comps == 2 ? in[base + 1] : 0.0);
      };
      for (int64_t j = 0; j < n; ++j) {
        line[static_cast<size_t>(j)] = !irfft || j <= n / 2 ? read(j) : std::conj(read(n - j));
      }
      dft_line(line, out_n, op.inverse != 0, spectrum.data());
      for (int64_t k = 0; k < out_n; ++k) {
        result[static_cast<size_t>((o * out_n + k) * inner + i)] = spectrum[static_cast<size_t>(k)];
      }
    }
  }
  if (irfft) {
    std::vector<double> real(result.size());
    for (size_t k = 0; k < result.size(); ++k) real[k] = result[k].real();
    store_doubles(real, *out);
    return Status();
  }
  store_complex(*out, result);
  return Status();
}

template <>
Status run_op(const ops::STFT& op, KernelContext& ctx) {
  const Tensor& signal = ctx.input(0);
  const int64_t batch = signal.shape()[0];
  const int64_t length = signal.shape()[1];
  const int64_t comps = signal.shape()[2];
  const int64_t step = scalar_input(ctx, 1);
  std::vector<double> window;
  if (ctx.has_input(2)) window = tensor_to_doubles(ctx.input(2));
  const int64_t frame_length =
      ctx.has_input(3) ? scalar_input(ctx, 3) : static_cast<int64_t>(window.size());
  if (window.empty()) window.assign(static_cast<size_t>(frame_length), 1.0);
  const int64_t frames = (length - frame_length) / step + 1;
  const int64_t bins = op.onesided ? frame_length / 2 + 1 : frame_length;
  KILN_ASSIGN_OR_RETURN(Tensor * out,
                        ctx.allocate_output(0, signal.dtype(), Shape{batch, frames, bins, 2}));

  const std::vector<double> in = tensor_to_doubles(signal);
  std::vector<Complex> result(static_cast<size_t>(batch * frames * bins));
  std::vector<Complex> frame(static_cast<size_t>(frame_length));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t j = 0; j < frame_length; ++j) {
        auto base = static_cast<size_t>((b * length + f * step + j) * comps);
        Complex v(in[base], comps == 2 ? in[base + 1] : 0.0);
        frame[static_cast<size_t>(j)] = v * window[static_cast<size_t>(j)];
      }
      dft_line(frame, bins, /*inverse=*/false,
               &result[static_cast<size_t>((b * frames + f) * bins)]);
    }
  }
  store_complex(*out, result);
  return Status();
}

template <>
Status run_op(const ops::BlackmanWindow& op, KernelContext& ctx) {
  return run_window(ctx, op.output_datatype, op.periodic != 0, 0.42, 0.5, 0.08);
}

template <>
Status run_op(const ops::HammingWindow& op, KernelContext& ctx) {
  return run_window(ctx, op.output_datatype, op.periodic != 0, 25.0 / 46.0, 21.0 / 46.0, 0.0);
}

template <>
Status run_op(const ops::HannWindow& op, KernelContext& ctx) {
  return run_window(ctx, op.output_datatype, op.periodic != 0, 0.5, 0.5, 0.0);
}

template <>
Status run_op(const ops::MelWeightMatrix& op, KernelContext& ctx) {
  const int64_t num_mel_bins = scalar_input(ctx, 0);
  const int64_t dft_length = scalar_input(ctx, 1);
  const int64_t sample_rate = scalar_input(ctx, 2);
  const double lower_hz = tensor_to_doubles(ctx.input(3)).front();
  const double upper_hz = tensor_to_doubles(ctx.input(4)).front();
  const int64_t rows = dft_length / 2 + 1;
  KILN_ASSIGN_OR_RETURN(Tensor * out,
                        ctx.allocate_output(0, op.output_datatype, Shape{rows, num_mel_bins}));

  // Triangle corners: num_mel_bins + 2 points evenly spaced on the mel scale, as DFT bins.
  const double low_mel = 2595.0 * std::log10(1.0 + lower_hz / 700.0);
  const double high_mel = 2595.0 * std::log10(1.0 + upper_hz / 700.0);
  const double mel_step = (high_mel - low_mel) / static_cast<double>(num_mel_bins + 2);
  std::vector<int64_t> corner(static_cast<size_t>(num_mel_bins + 2));
  for (int64_t i = 0; i < num_mel_bins + 2; ++i) {
    double mel = static_cast<double>(i) * mel_step + low_mel;
    double hz = 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
    double bin =
        std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate));
    if (!(std::abs(bin) < 0x1.0p52)) {
      return ctx.errorf("the edges {} Hz and {} Hz give a mel bin edge at DFT bin {}", lower_hz,
                        upper_hz, bin);
    }
    corner[static_cast<size_t>(i)] = static_cast<int64_t>(bin);
  }
  std::vector<double> w(static_cast<size_t>(rows * num_mel_bins), 0.0);
  // Calls f(j) for each j in [begin, end] that is a row of the matrix.
  auto for_rows = [&](int64_t begin, int64_t end, auto&& f) {
    for (int64_t j = std::max<int64_t>(begin, 0); j <= std::min(end, rows - 1); ++j) f(j);
  };
  for (int64_t i = 0; i < num_mel_bins; ++i) {
    const int64_t left = corner[static_cast<size_t>(i)];
    const int64_t center = corner[static_cast<size_t>(i + 1)];
    const int64_t right = corner[static_cast<size_t>(i + 2)];
    auto at = [&](int64_t j) -> double& { return w[static_cast<size_t>(j * num_mel_bins + i)]; };
    if (center == left) {
      for_rows(center, center, [&](int64_t j) { at(j) = 1.0; });
    } else {
      for_rows(left, center, [&](int64_t j) {
        at(j) = static_cast<double>(j - left) / static_cast<double>(center - left);
      });
    }
    for_rows(center, right - 1, [&](int64_t j) {
      at(j) = static_cast<double>(right - j) / static_cast<double>(right - center);
    });
  }
  store_doubles(w, *out);
  return Status();
}

}  // namespace kiln::compiler::ref
