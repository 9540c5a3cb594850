// SPDX-License-Identifier: Apache-2.0
// ref kernels for the attention family's building blocks: RMSNormalization, RotaryEmbedding,
// CausalConvWithState and TensorScatter.
#include <algorithm>
#include <cmath>

#include "compiler/ops/attention.h"
#include "compiler/ops/infer_util.h"
#include "compiler/targets/ref/attention_util.h"
#include "compiler/targets/ref/kernel.h"
#include "compiler/targets/ref/ref_util.h"

namespace kiln::compiler::ref {

template <>
Status run_op(const ops::RMSNormalization& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int rank = x.rank();
  const int axis = static_cast<int>(op.axis < 0 ? op.axis + rank : op.axis);
  const int64_t rows = x.shape().numel(0, axis);
  const int64_t cols = x.shape().numel(axis, rank);
  const Shape normalized(std::vector<int64_t>(x.shape().begin() + axis, x.shape().end()));
  const std::vector<double> xd = tensor_to_doubles(x);
  // The scale broadcast over the normalized dims.
  const std::vector<double> sd = tensor_to_doubles(ctx.input(1));
  std::vector<double> scale(static_cast<size_t>(cols));
  for_each_broadcast(normalized, normalized, ctx.input(1).shape(),
                     [&](int64_t o, int64_t, int64_t s) {
                       scale[static_cast<size_t>(o)] = sd[static_cast<size_t>(s)];
                     });
  std::vector<double> yd(xd.size());
  for (int64_t r = 0; r < rows; ++r) {
    const auto base = static_cast<size_t>(r * cols);
    double sq = 0;
    for (int64_t i = 0; i < cols; ++i)
      sq += xd[base + static_cast<size_t>(i)] * xd[base + static_cast<size_t>(i)];
    const double rms = std::sqrt(sq / static_cast<double>(std::max<int64_t>(cols, 1)) + op.epsilon);
    for (int64_t i = 0; i < cols; ++i) {
      const auto iu = static_cast<size_t>(i);
      // Stage one ends in X's element type (the normalized value), stage two scales it.
      const double normalized_value =
          round_to(x.dtype(), round_to(op.stash_type, xd[base + iu] / rms));
      yd[base + iu] = normalized_value * scale[iu];
    }
  }
  store_doubles(yd, ctx.output(0));
  return Status();
}

template <>
Status run_op(const ops::RotaryEmbedding& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Shape& shape = x.shape();
  // Seen as [batch, heads, length, head] (4-D) or [batch, length, heads, head] (3-D).
  const bool packed = x.rank() == 3;
  const int64_t batch = shape[0];
  const int64_t heads = packed ? *op.num_heads : shape[1];
  const int64_t length = packed ? shape[1] : shape[2];
  const int64_t head = packed ? shape[2] / heads : shape[3];
  const int64_t rotated = op.rotary_embedding_dim == 0 ? head : op.rotary_embedding_dim;
  const int64_t half = rotated / 2;
  const std::vector<double> xd = tensor_to_doubles(x);
  const std::vector<double> cos = tensor_to_doubles(ctx.input(1));
  const std::vector<double> sin = tensor_to_doubles(ctx.input(2));
  std::vector<int64_t> ids;
  int64_t positions = 0;
  if (ctx.has_input(3)) {
    ids = tensor_to_ints(ctx.input(3));
    positions = ctx.input(1).shape()[0];
    for (int64_t id : ids) {
      if (id < 0 || id >= positions) {
        return ctx.errorf("position id {} is outside the {} cached positions", id, positions);
      }
    }
  }
  std::vector<double> yd(xd.size());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t l = 0; l < length; ++l) {
        const int64_t at =
            packed ? ((b * length + l) * heads + h) * head : ((b * heads + h) * length + l) * head;
        // The cache row of this token: by position id, or per batch and token.
        const int64_t cache_row =
            ids.empty() ? b * length + l : ids[static_cast<size_t>(b * length + l)];
        for (int64_t i = 0; i < half; ++i) {
          const double c = cos[static_cast<size_t>(cache_row * half + i)];
          const double s = sin[static_cast<size_t>(cache_row * half + i)];
          // The pair rotated together: neighbours, or the two halves of the rotated part.
          const int64_t first = op.interleaved ? 2 * i : i;
          const int64_t second = op.interleaved ? 2 * i + 1 : i + half;
          const double x1 = xd[static_cast<size_t>(at + first)];
          const double x2 = xd[static_cast<size_t>(at + second)];
          yd[static_cast<size_t>(at + first)] = c * x1 - s * x2;
          yd[static_cast<size_t>(at + second)] = s * x1 + c * x2;
        }
        for (int64_t i = rotated; i < head; ++i) {
          yd[static_cast<size_t>(at + i)] = xd[static_cast<size_t>(at + i)];
        }
      }
    }
  }
  store_doubles(yd, ctx.output(0));
  return Status();
}

template <>
Status run_op(const ops::CausalConvWithState& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const DType dtype = x.dtype();
  const int64_t batch = x.shape()[0], channels = x.shape()[1], length = x.shape()[2];
  const int64_t k = ctx.input(1).shape()[2];
  const int64_t carry = k - 1;
  const std::vector<double> xd = tensor_to_doubles(x);
  const std::vector<double> w = tensor_to_doubles(ctx.input(1));
  const std::vector<double> bias =
      ctx.has_input(2) ? tensor_to_doubles(ctx.input(2)) : std::vector<double>();
  const std::vector<double> past =
      ctx.has_input(3) ? tensor_to_doubles(ctx.input(3)) : std::vector<double>();
  const bool silu = op.activation == "silu" || op.activation == "swish";
  std::vector<double> y(xd.size());
  std::vector<double> state(static_cast<size_t>(batch * channels * carry));
  std::vector<double> padded(static_cast<size_t>(carry + length));
  for (int64_t bc = 0; bc < batch * channels; ++bc) {
    // The carried state (or zeros) followed by this channel's input.
    for (int64_t t = 0; t < carry; ++t) {
      padded[static_cast<size_t>(t)] =
          past.empty() ? 0.0 : past[static_cast<size_t>(bc * carry + t)];
    }
    for (int64_t t = 0; t < length; ++t) {
      padded[static_cast<size_t>(carry + t)] = xd[static_cast<size_t>(bc * length + t)];
    }
    const int64_t c = bc % channels;
    for (int64_t t = 0; t < length; ++t) {
      double sum = bias.empty() ? 0.0 : bias[static_cast<size_t>(c)];
      for (int64_t i = 0; i < k; ++i) {
        sum += w[static_cast<size_t>(c * k + i)] * padded[static_cast<size_t>(t + i)];
      }
      // The convolution's result is held in the element type before the activation.
      const double conv = round_to(dtype, sum);
      y[static_cast<size_t>(bc * length + t)] = silu ? conv / (1.0 + std::exp(-conv)) : conv;
    }
    for (int64_t t = 0; t < carry; ++t) {
      state[static_cast<size_t>(bc * carry + t)] = padded[static_cast<size_t>(length + t)];
    }
  }
  store_doubles(y, ctx.output(0));
  if (ctx.num_outputs() > 1 && ctx.output_used(1)) store_doubles(state, ctx.output(1));
  return Status();
}

template <>
Status run_op(const ops::TensorScatter& op, KernelContext& ctx) {
  const Tensor& cache = ctx.input(0);
  const Tensor& update = ctx.input(1);
  Tensor& out = ctx.output(0);
  const Shape& shape = cache.shape();
  const int rank = cache.rank();
  const int axis = static_cast<int>(op.axis < 0 ? op.axis + rank : op.axis);
  // Both tensors as [outer, length, inner] around the axis; outer spans the batch first.
  const int64_t outer = shape.numel(0, axis);
  const int64_t per_batch = shape.numel(1, axis);
  const int64_t capacity = shape[axis];
  const int64_t length = update.shape()[axis];
  const int64_t inner = shape.numel(axis + 1, rank);
  const std::vector<int64_t> writes = ctx.has_input(2)
                                          ? tensor_to_ints(ctx.input(2))
                                          : std::vector<int64_t>(static_cast<size_t>(shape[0]), 0);
  // The cache slot of update position t of batch b.
  auto slot = [&](int64_t b, int64_t t) {
    const int64_t at = writes[static_cast<size_t>(b)] + t;
    return op.mode == "circular" ? ((at % capacity) + capacity) % capacity : at;
  };
  for (int64_t b = 0; b < shape[0]; ++b) {
    for (int64_t t = 0; t < length; ++t) {
      if (slot(b, t) < 0 || slot(b, t) >= capacity) {
        return ctx.errorf(
            "batch {}: the linear write at {} (write index {} + {}) is outside the "
            "{} cache slots",
            b, slot(b, t), writes[static_cast<size_t>(b)], t, capacity);
      }
    }
  }
  visit_dtype(cache.dtype(), [&]<class T>() {
    const T* from_cache = cache.data<T>();
    const T* from_update = update.data<T>();
    T* to = out.data<T>();
    std::copy(from_cache, from_cache + cache.numel(), to);
    for (int64_t o = 0; o < outer; ++o) {
      const int64_t b = o / std::max<int64_t>(per_batch, 1);
      for (int64_t t = 0; t < length; ++t) {
        const T* row = from_update + (o * length + t) * inner;
        std::copy(row, row + inner, to + (o * capacity + slot(b, t)) * inner);
      }
    }
  });
  return Status();
}

}  // namespace kiln::compiler::ref
