// SPDX-License-Identifier: Apache-2.0
// ref kernels for the nn family's normalizations, Dropout and the softmax ops, in double precision.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "compiler/ops/infer_util.h"
#include "compiler/ops/nn.h"
#include "compiler/targets/ref/convert.h"
#include "compiler/targets/ref/kernel.h"
#include "compiler/targets/ref/nn_util.h"
#include "compiler/targets/ref/ref_util.h"

namespace kiln::compiler::ref {

namespace {

// A tensor seen as [outer, axis, inner] around `axis`.
struct AxisSplit {
  int64_t outer = 1;
  int64_t len = 1;
  int64_t inner = 1;
};

AxisSplit split_at(const Shape& shape, int64_t axis) {
  AxisSplit s;
  const int rank = shape.rank();
  if (rank == 0) return s;
  const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
  s.outer = shape.numel(0, a);
  s.len = shape[a];
  s.inner = shape.numel(a + 1, rank);
  return s;
}

// Calls f(values, count, stride) on each line of `s`: the elements along the axis.
template <class F>
void for_each_line(const AxisSplit& s, F&& f) {
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) f(o * s.len * s.inner + i, s.inner);
  }
}

// Softmax-like ops: y[line] = f(x[line]) along `axis`.
template <class F>
Status along_axis(KernelContext& ctx, int64_t axis, F&& f) {
  const Tensor& x = ctx.input(0);
  const AxisSplit s = split_at(x.shape(), axis);
  const std::vector<double> xd = tensor_to_doubles(x);
  std::vector<double> yd(xd.size());
  std::vector<double> line(static_cast<size_t>(s.len));
  for_each_line(s, [&](int64_t base, int64_t stride) {
    for (int64_t j = 0; j < s.len; ++j)
      line[static_cast<size_t>(j)] = xd[static_cast<size_t>(base + j * stride)];
    f(line);
    for (int64_t j = 0; j < s.len; ++j)
      yd[static_cast<size_t>(base + j * stride)] = line[static_cast<size_t>(j)];
  });
  store_doubles(yd, ctx.output(0), IntRounding::kNearestEven);
  return Status();
}

double line_max(const std::vector<double>& v) {
  double m = -std::numeric_limits<double>::infinity();
  for (double d : v) m = std::max(m, d);
  return m;
}

// `v` rounded to the 16-bit float type `dtype` (f16 or bf16), as a double.
double round_to_16bit(DType dtype, double v) {
  return dtype == DType::kF16 ? to_double(from_double<Half>(v))
                              : to_double(from_double<BFloat16>(v));
}

// `param` (broadcastable to `shape`) expanded to `shape`'s element count.
std::vector<double> expand_to(const Tensor& param, const Shape& shape) {
  const std::vector<double> p = tensor_to_doubles(param);
  std::vector<double> out(static_cast<size_t>(shape.numel()));
  for_each_broadcast(shape, param.shape(), param.shape(), [&](int64_t o, int64_t i, int64_t) {
    out[static_cast<size_t>(o)] = p[static_cast<size_t>(i)];
  });
  return out;
}

}  // namespace

template <>
Status run_op(const ops::BatchNormalization& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t batch = x.shape()[0];
  const int64_t channels = x.shape()[1];
  const int64_t plane = x.rank() > 2 ? x.shape().numel(2, x.rank()) : 1;
  const std::vector<double> xd = tensor_to_doubles(x);
  const std::vector<double> scale = tensor_to_doubles(ctx.input(1));
  const std::vector<double> bias = tensor_to_doubles(ctx.input(2));
  std::vector<double> mean = tensor_to_doubles(ctx.input(3));
  std::vector<double> var = tensor_to_doubles(ctx.input(4));
  std::vector<double> running_mean = mean;
  std::vector<double> running_var = var;
  if (op.training_mode != 0) {
    const auto count = static_cast<double>(batch * plane);
    const double momentum = op.momentum;
    for (int64_t c = 0; c < channels; ++c) {
      double sum = 0;
      double sq = 0;
      for (int64_t b = 0; b < batch; ++b) {
        const double* p = xd.data() + (b * channels + c) * plane;
        for (int64_t i = 0; i < plane; ++i) sum += p[i];
      }
      const double m = sum / count;
      for (int64_t b = 0; b < batch; ++b) {
        const double* p = xd.data() + (b * channels + c) * plane;
        for (int64_t i = 0; i < plane; ++i) sq += (p[i] - m) * (p[i] - m);
      }
      auto cu = static_cast<size_t>(c);
      mean[cu] = m;
      var[cu] = sq / count;
      running_mean[cu] = running_mean[cu] * momentum + m * (1 - momentum);
      running_var[cu] = running_var[cu] * momentum + var[cu] * (1 - momentum);
    }
  }
  std::vector<double> yd(xd.size());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < channels; ++c) {
      auto cu = static_cast<size_t>(c);
      const double k = scale[cu] / std::sqrt(var[cu] + static_cast<double>(op.epsilon));
      const auto base = static_cast<size_t>((b * channels + c) * plane);
      for (int64_t i = 0; i < plane; ++i) {
        yd[base + static_cast<size_t>(i)] =
            (xd[base + static_cast<size_t>(i)] - mean[cu]) * k + bias[cu];
      }
    }
  }
  store_doubles(yd, ctx.output(0), IntRounding::kNearestEven);
  if (ctx.num_outputs() > 1 && ctx.output_used(1))
    store_doubles(running_mean, ctx.output(1), IntRounding::kNearestEven);
  if (ctx.num_outputs() > 2 && ctx.output_used(2))
    store_doubles(running_var, ctx.output(2), IntRounding::kNearestEven);
  return Status();
}

template <>
Status run_op(const ops::InstanceNormalization& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t channels = x.shape()[1];
  const int64_t planes = x.shape()[0] * channels;
  const int64_t plane = x.shape().numel(2, x.rank());
  const std::vector<double> xd = tensor_to_doubles(x);
  const std::vector<double> scale = tensor_to_doubles(ctx.input(1));
  const std::vector<double> bias = tensor_to_doubles(ctx.input(2));
  std::vector<double> yd(xd.size());
  for (int64_t p = 0; p < planes; ++p) {
    const auto base = static_cast<size_t>(p * plane);
    double sum = 0;
    double sq = 0;
    for (int64_t i = 0; i < plane; ++i) sum += xd[base + static_cast<size_t>(i)];
    const double mean = sum / static_cast<double>(plane);
    for (int64_t i = 0; i < plane; ++i) {
      const double d = xd[base + static_cast<size_t>(i)] - mean;
      sq += d * d;
    }
    const auto c = static_cast<size_t>(p % channels);
    const double k = scale[c] / std::sqrt(sq / static_cast<double>(plane) + op.epsilon);
    for (int64_t i = 0; i < plane; ++i) {
      yd[base + static_cast<size_t>(i)] = (xd[base + static_cast<size_t>(i)] - mean) * k + bias[c];
    }
  }
  store_doubles(yd, ctx.output(0), IntRounding::kNearestEven);
  return Status();
}

template <>
Status run_op(const ops::LayerNormalization& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int rank = x.rank();
  const int axis = static_cast<int>(op.axis < 0 ? op.axis + rank : op.axis);
  const int64_t rows = x.shape().numel(0, axis);
  const int64_t cols = x.shape().numel(axis, rank);
  const Shape normalized(std::vector<int64_t>(x.shape().begin() + axis, x.shape().end()));
  const std::vector<double> xd = tensor_to_doubles(x);
  const std::vector<double> scale = expand_to(ctx.input(1), normalized);
  const std::vector<double> bias =
      ctx.has_input(2) ? expand_to(ctx.input(2), normalized) : std::vector<double>(scale.size());
  std::vector<double> yd(xd.size());
  std::vector<double> means(static_cast<size_t>(rows));
  std::vector<double> inv_std(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const auto base = static_cast<size_t>(r * cols);
    double sum = 0;
    double sq = 0;
    for (int64_t i = 0; i < cols; ++i) sum += xd[base + static_cast<size_t>(i)];
    const double mean = sum / static_cast<double>(cols);
    for (int64_t i = 0; i < cols; ++i) {
      const double d = xd[base + static_cast<size_t>(i)] - mean;
      sq += d * d;
    }
    const double k = 1.0 / std::sqrt(sq / static_cast<double>(cols) + op.epsilon);
    for (int64_t i = 0; i < cols; ++i) {
      auto iu = static_cast<size_t>(i);
      yd[base + iu] = (xd[base + iu] - mean) * k * scale[iu] + bias[iu];
    }
    means[static_cast<size_t>(r)] = mean;
    inv_std[static_cast<size_t>(r)] = k;
  }
  store_doubles(yd, ctx.output(0), IntRounding::kNearestEven);
  if (ctx.num_outputs() > 1 && ctx.output_used(1))
    store_doubles(means, ctx.output(1), IntRounding::kNearestEven);
  if (ctx.num_outputs() > 2 && ctx.output_used(2))
    store_doubles(inv_std, ctx.output(2), IntRounding::kNearestEven);
  return Status();
}

template <>
Status run_op(const ops::GroupNormalization& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t batch = x.shape()[0];
  const int64_t channels = x.shape()[1];
  const int64_t per_group = channels / *op.num_groups;
  const int64_t plane = x.shape().numel(2, x.rank());
  // One group's elements are contiguous: its channels, each with its plane.
  const int64_t count = per_group * plane;
  const std::vector<double> xd = tensor_to_doubles(x);
  const std::vector<double> scale = tensor_to_doubles(ctx.input(1));
  const std::vector<double> bias = tensor_to_doubles(ctx.input(2));
  std::vector<double> yd(xd.size());
  for (int64_t g = 0; g < batch * *op.num_groups; ++g) {
    const auto base = static_cast<size_t>(g * count);
    double sum = 0;
    for (int64_t i = 0; i < count; ++i) sum += xd[base + static_cast<size_t>(i)];
    const double mean = count > 0 ? sum / static_cast<double>(count) : 0.0;
    double sq = 0;
    for (int64_t i = 0; i < count; ++i) {
      const double d = xd[base + static_cast<size_t>(i)] - mean;
      sq += d * d;
    }
    const double variance = count > 0 ? sq / static_cast<double>(count) : 0.0;
    const double k = 1.0 / std::sqrt(variance + op.epsilon);
    for (int64_t i = 0; i < count; ++i) {
      const auto c = static_cast<size_t>((g % *op.num_groups) * per_group + i / plane);
      const size_t at = base + static_cast<size_t>(i);
      yd[at] = (xd[at] - mean) * k * scale[c] + bias[c];
    }
  }
  store_doubles(yd, ctx.output(0), IntRounding::kNearestEven);
  return Status();
}

template <>
Status run_op(const ops::LRN& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t batch = x.shape()[0];
  const int64_t channels = x.shape()[1];
  const int64_t plane = x.shape().numel(2, x.rank());
  const int64_t size = *op.size;
  const int64_t before = (size - 1) / 2;
  const int64_t after = size - 1 - before;
  const std::vector<double> xd = tensor_to_doubles(x);
  std::vector<double> yd(xd.size());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t lo = std::max<int64_t>(0, c - before);
      const int64_t hi = std::min(channels - 1, c + after);
      for (int64_t i = 0; i < plane; ++i) {
        double sq = 0;
        for (int64_t j = lo; j <= hi; ++j) {
          const double v = xd[static_cast<size_t>((b * channels + j) * plane + i)];
          sq += v * v;
        }
        const auto at = static_cast<size_t>((b * channels + c) * plane + i);
        yd[at] = xd[at] / std::pow(op.bias + op.alpha / static_cast<double>(size) * sq,
                                   static_cast<double>(op.beta));
      }
    }
  }
  store_doubles(yd, ctx.output(0), IntRounding::kNearestEven);
  return Status();
}

template <>
Status run_op(const ops::MeanVarianceNormalization& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int rank = x.rank();
  // Statistics live in the shape with the reduced axes set to 1.
  Shape reduced = x.shape();
  for (int64_t a : op.axes) reduced[static_cast<int>(a < 0 ? a + rank : a)] = 1;
  const std::vector<double> xd = tensor_to_doubles(x);
  std::vector<double> sum(static_cast<size_t>(reduced.numel()));
  std::vector<double> sq(sum.size());
  const double count =
      static_cast<double>(x.numel()) / static_cast<double>(std::max<int64_t>(1, reduced.numel()));
  for_each_broadcast(x.shape(), x.shape(), reduced, [&](int64_t o, int64_t, int64_t r) {
    const double v = xd[static_cast<size_t>(o)];
    sum[static_cast<size_t>(r)] += v;
    sq[static_cast<size_t>(r)] += v * v;
  });
  std::vector<double> yd(xd.size());
  for_each_broadcast(x.shape(), x.shape(), reduced, [&](int64_t o, int64_t, int64_t r) {
    const double mean = sum[static_cast<size_t>(r)] / count;
    const double var = std::max(0.0, sq[static_cast<size_t>(r)] / count - mean * mean);
    yd[static_cast<size_t>(o)] = (xd[static_cast<size_t>(o)] - mean) / (std::sqrt(var) + 1e-9);
  });
  store_doubles(yd, ctx.output(0), IntRounding::kNearestEven);
  return Status();
}

template <>
Status run_op(const ops::LpNormalization& op, KernelContext& ctx) {
  return along_axis(ctx, op.axis, [&](std::vector<double>& line) {
    double norm = 0;
    for (double v : line) norm += op.p == 1 ? std::abs(v) : v * v;
    if (op.p == 2) norm = std::sqrt(norm);
    for (double& v : line) v = norm == 0 ? 0 : v / norm;
  });
}

template <>
Status run_op(const ops::Dropout& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double ratio = ctx.has_input(1) ? tensor_to_doubles(ctx.input(1))[0] : 0.5;
  const bool training = ctx.has_input(2) && ctx.input(2).data<bool>()[0];
  const bool want_mask = ctx.num_outputs() > 1 && ctx.output_used(1);
  bool* mask = want_mask ? ctx.output(1).data<bool>() : nullptr;
  if (!training || ratio == 0) {
    ctx.set_output(0, x);
    if (mask != nullptr) std::fill(mask, mask + x.numel(), true);
    return Status();
  }
  // With a seed, the draws match numpy's legacy np.random.seed(seed); np.random.uniform(): the
  // same MT19937 stream, two 32-bit words per 53-bit double.
  std::mt19937 seeded(static_cast<uint32_t>(op.seed.value_or(0)));
  auto next_uniform = [&]() -> double {
    if (!op.seed) return std::uniform_real_distribution<double>(0, 1)(ctx.rng());
    const uint32_t a = seeded() >> 5;
    const uint32_t b = seeded() >> 6;
    return (a * 67108864.0 + b) / 9007199254740992.0;
  };
  const std::vector<double> xd = tensor_to_doubles(x);
  std::vector<double> yd(xd.size());
  const double scale = 1.0 / (1.0 - ratio);
  for (size_t i = 0; i < xd.size(); ++i) {
    const bool keep = next_uniform() >= ratio;
    yd[i] = keep ? xd[i] * scale : 0.0;
    if (mask != nullptr) mask[i] = keep;
  }
  store_doubles(yd, ctx.output(0), IntRounding::kNearestEven);
  return Status();
}

template <>
Status run_op(const ops::Softmax& op, KernelContext& ctx) {
  const DType dtype = ctx.input(0).dtype();
  if (dtype == DType::kF16 || dtype == DType::kBF16) {
    // 16-bit floats hold every step of the function body (Sub, Exp, ReduceSum, Div) in their
    // type, as the ONNX reference computes them: bf16 partial sums each rounded, f16 sums once.
    auto held = [&](double v) { return round_to_16bit(dtype, v); };
    return along_axis(ctx, op.axis, [&](std::vector<double>& line) {
      const double m = line_max(line);
      double sum = 0;
      for (double& v : line) {
        v = held(std::exp(held(v - m)));
        sum = dtype == DType::kBF16 ? held(sum + v) : sum + v;
      }
      sum = held(sum);
      for (double& v : line) v = held(v / sum);
    });
  }
  return along_axis(ctx, op.axis, [](std::vector<double>& line) {
    const double m = line_max(line);
    double sum = 0;
    for (double& v : line) sum += (v = std::exp(v - m));
    for (double& v : line) v /= sum;
  });
}

template <>
Status run_op(const ops::LogSoftmax& op, KernelContext& ctx) {
  return along_axis(ctx, op.axis, [](std::vector<double>& line) {
    const double m = line_max(line);
    double sum = 0;
    for (double v : line) sum += std::exp(v - m);
    const double log_sum = std::log(sum) + m;
    for (double& v : line) v -= log_sum;
  });
}

template <>
Status run_op(const ops::Hardmax& op, KernelContext& ctx) {
  return along_axis(ctx, op.axis, [](std::vector<double>& line) {
    size_t arg = 0;
    for (size_t i = 1; i < line.size(); ++i) {
      if (line[i] > line[arg]) arg = i;
    }
    for (size_t i = 0; i < line.size(); ++i) line[i] = i == arg ? 1.0 : 0.0;
  });
}

}  // namespace kiln::compiler::ref
