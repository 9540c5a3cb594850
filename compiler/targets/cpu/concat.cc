// SPDX-License-Identifier: Apache-2.0
// Channel Concats read by BatchNormalizations (DenseNet's dense blocks) as one per-channel
// scale-shift(+Relu, +2x2 AveragePool) pass over the Concat's inputs, with no Concat copy.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "compiler/ops/all_ops.h"
#include "compiler/ops/nn_util.h"
#include "compiler/passes/rewrite.h"
#include "compiler/targets/cpu/builder.h"
#include "compiler/targets/cpu/onednn.h"

namespace kiln::compiler::cpu {

namespace {

using dnnl::memory;

bool is_static_f32(const Value* v) {
  return v != nullptr && v->type().is_tensor() && v->tensor_type().dtype == DType::kF32 &&
         v->tensor_type().is_static() && v->tensor_type().shape().rank() == 4;
}

// Concat along channels of static f32 rank-4 inputs.
bool is_channel_concat(const Node& node) {
  if (node.kind() != OpKind::kConcat || node.num_inputs() < 1 || !is_static_f32(node.output(0))) {
    return false;
  }
  int64_t axis = node.attrs<ops::Concat>().axis.value_or(0);
  if (axis < 0) axis += 4;
  if (axis != 1) return false;
  for (const Value* x : node.inputs()) {
    if (!is_static_f32(x)) return false;
  }
  return true;
}

// The per-channel scale and shift of an inference BatchNormalization with constant parameters (a
// Relu that is its only user fused: `relu` set).
struct ScaleShift {
  std::vector<float> scale;
  std::vector<float> shift;
  const Node* relu = nullptr;
  const Value* out = nullptr;
};

std::optional<ScaleShift> scale_shift_of(const Node& bn) {
  if (bn.kind() != OpKind::kBatchNormalization || bn.num_inputs() != 5 ||
      !is_static_f32(bn.input(0)) || !is_static_f32(bn.output(0))) {
    return std::nullopt;
  }
  const auto& op = bn.attrs<ops::BatchNormalization>();
  if (op.training_mode != 0) return std::nullopt;
  for (int i = 1; i < bn.num_outputs(); ++i) {
    if (!bn.output(i)->uses().empty() || is_graph_output(bn.output(i))) return std::nullopt;
  }
  const int64_t channels = bn.input(0)->tensor_type().shape()[1];
  const Tensor* p[4];
  for (int i = 0; i < 4; ++i) {
    p[i] = bn.input(i + 1)->constant_value();
    if (p[i] == nullptr || p[i]->dtype() != DType::kF32 || p[i]->numel() != channels) {
      return std::nullopt;
    }
  }
  ScaleShift s;
  for (int64_t c = 0; c < channels; ++c) {
    const double scale = p[0]->data<float>()[c] /
                         std::sqrt(static_cast<double>(p[3]->data<float>()[c]) + op.epsilon);
    s.scale.push_back(static_cast<float>(scale));
    s.shift.push_back(static_cast<float>(p[1]->data<float>()[c] - p[2]->data<float>()[c] * scale));
  }
  s.out = bn.output(0);
  const Value* y = bn.output(0);
  if (y->uses().size() == 1 && !is_graph_output(y)) {
    const Node* next = y->uses()[0].node;
    if (next->kind() == OpKind::kRelu && next->graph() == bn.graph() &&
        is_static_f32(next->output(0))) {
      s.relu = next;
      s.out = next->output(0);
    }
  }
  return s;
}

// A 2x2 stride-2 AveragePool without padding over even sizes that is the only reader of `v`
// (DenseNet's transitions, once pool_before_pointwise_conv has run it before their Conv).
const Node* sole_pool_2x2(const Value* v) {
  if (v->uses().size() != 1 || is_graph_output(v)) return nullptr;
  const Node* pool = v->uses()[0].node;
  if (pool->kind() != OpKind::kAveragePool || pool->graph() != v->producer()->graph() ||
      !is_static_f32(pool->output(0))) {
    return nullptr;
  }
  const auto& op = pool->attrs<ops::AveragePool>();
  const std::vector<int64_t> two = {2, 2};
  if ((op.auto_pad != "NOTSET" && op.auto_pad != "VALID") || op.ceil_mode != 0 ||
      op.kernel_shape != two || op.strides != two || has_dilation(op.dilations) ||
      (op.pads && *op.pads != std::vector<int64_t>(4, 0))) {
    return nullptr;
  }
  const Shape& in = v->tensor_type().shape();
  return in[2] % 2 == 0 && in[3] % 2 == 0 ? pool : nullptr;
}

// How a 4-D tensor lies in memory, as the scale-shift pass reads it. kBlocked16 is nChw16c with
// whole blocks (channels a multiple of 16): a piece's blocks are then a run of the Concat's.
enum class Order : uint8_t { kChannelsLast, kPlanar, kBlocked16, kOther };

constexpr int64_t kBlock = 16;

Order order_of(const memory::desc& layout) {
  const dnnl_memory_desc_t& md = layout.data;
  if (md.ndims == 4 && md.dims[1] % kBlock == 0 &&
      layout == memory::desc(layout.dims(), memory::data_type::f32, memory::format_tag::nChw16c)) {
    return Order::kBlocked16;
  }
  if (md.format_kind != dnnl_blocked || md.ndims != 4 || md.format_desc.blocking.inner_nblks != 0 ||
      md.offset0 != 0) {
    return Order::kOther;
  }
  const dnnl_dims_t& s = md.format_desc.blocking.strides;
  const dnnl_dims_t& d = md.dims;
  // Strides of size-1 dims do not matter.
  auto is = [&](int i, memory::dim want) { return d[i] == 1 || s[i] == want; };
  if (is(1, 1) && is(3, d[1]) && is(2, d[3] * d[1]) && is(0, d[2] * d[3] * d[1])) {
    return Order::kChannelsLast;
  }
  if (is(3, 1) && is(2, d[3]) && is(1, d[2] * d[3]) && is(0, d[1] * d[2] * d[3])) {
    return Order::kPlanar;
  }
  return Order::kOther;
}

// A Concat's inputs as its readers' scale-shift passes read them: their buffers and channels,
// all in one dim order.
struct Pieces {
  std::vector<int> buffers;
  std::vector<int64_t> channels;
  Order order = Order::kOther;
};

// The pieces of `concat` when it joins static f32 4-D tensors along channels, lying dense in one
// dim order, and only inference BatchNormalizations with constant parameters read it.
std::optional<Pieces> concat_pieces(const ProgramBuilder& b, const Node& concat) {
  if (!is_channel_concat(concat) || concat.graph() != &b.graph()) return std::nullopt;
  const Value* y = concat.output(0);
  if (is_graph_output(y) || y->uses().empty()) return std::nullopt;
  for (const Use& u : y->uses()) {
    if (u.node->graph() != &b.graph() || u.index != 0 || !scale_shift_of(*u.node)) {
      return std::nullopt;
    }
  }
  Pieces p;
  for (const Value* x : concat.inputs()) {
    if (!b.has_buffer(x)) return std::nullopt;
    const Order order = order_of(b.layout_of(x));
    if (order == Order::kOther || (p.order != Order::kOther && order != p.order)) {
      return std::nullopt;
    }
    p.order = order;
    p.buffers.push_back(b.buffer_of(x));
    p.channels.push_back(x->tensor_type().shape()[1]);
  }
  return p;
}

// BatchNormalization(Concat(x1, ..., xn)) (+Relu) as relu?(x * scale + shift) per channel,
// reading each piece where it lies and writing one dense tensor in the pieces' dim order.
class ConcatScaleShiftStep final : public Step {
 public:
  // `pooled`: 2x2 average pooling follows (nChw16c pieces only); the output is pooled.
  ConcatScaleShiftStep(ScaleShift s, Pieces pieces, memory::dims dims, bool pooled)
      : s_(std::move(s)), pieces_(std::move(pieces)), dims_(std::move(dims)), pooled_(pooled) {}

  Status run(StepContext& ctx) const override {
    float* y = static_cast<float*>(ctx.data[static_cast<size_t>(writes[0])]);
    const int64_t n = dims_[0];
    const int64_t c = dims_[1];
    const int64_t hw = dims_[2] * dims_[3];
    const size_t count = pieces_.buffers.size();
    std::vector<const float*> x(count);
    std::vector<int64_t> first(count + 1, 0);
    for (size_t i = 0; i < count; ++i) {
      x[i] = static_cast<const float*>(ctx.data[static_cast<size_t>(pieces_.buffers[i])]);
      first[i + 1] = first[i] + pieces_.channels[i];
    }
    if (pieces_.order == Order::kBlocked16) {
      // One task per output block of 16 channels: hw pixels of 16 lanes, read from its piece.
      const int64_t blocks = c / kBlock;
#pragma omp parallel for schedule(static)
      for (int64_t p = 0; p < n * blocks; ++p) {
        const int64_t k = (p % blocks) * kBlock;
        const size_t i = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), k) -
                                             first.begin() - 1);
        const float* in = x[i] + ((p / blocks) * pieces_.channels[i] + (k - first[i])) * hw;
        if (pooled_) {
          affine_pooled(in, y + p * kBlock * (hw / 4), k);
        } else {
          affine_blocked(in, y + p * kBlock * hw, hw, k);
        }
      }
    } else if (pieces_.order == Order::kChannelsLast) {
#pragma omp parallel for schedule(static)
      for (int64_t p = 0; p < n * hw; ++p) {
        for (size_t i = 0; i < count; ++i) {
          const int64_t ci = pieces_.channels[i];
          affine(x[i] + p * ci, y + p * c + first[i], ci, 1, first[i]);
        }
      }
    } else {
#pragma omp parallel for schedule(static)
      for (int64_t p = 0; p < n * c; ++p) {
        const int64_t k = p % c;
        const size_t i = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), k) -
                                             first.begin() - 1);
        const float* in = x[i] + ((p / c) * pieces_.channels[i] + (k - first[i])) * hw;
        affine(in, y + p * hw, hw, 0, k);
      }
    }
    return Status();
  }

 private:
  // out[j] = relu?(in[j] * scale[k] + shift[k]), k = channel + j * step (step 0: one channel).
  void affine(const float* in, float* out, int64_t count, int64_t step, int64_t channel) const {
    const float* scale = s_.scale.data() + channel;
    const float* shift = s_.shift.data() + channel;
    if (s_.relu != nullptr) {
#pragma omp simd
      for (int64_t j = 0; j < count; ++j) {
        out[j] = std::max(in[j] * scale[j * step] + shift[j * step], 0.0f);
      }
    } else {
#pragma omp simd
      for (int64_t j = 0; j < count; ++j) out[j] = in[j] * scale[j * step] + shift[j * step];
    }
  }

  // The scale and shift of 16 channels, and the floor (0 with a Relu, else -inf).
  struct Lanes {
    float scale[kBlock];
    float shift[kBlock];
    float floor;
    float at(float x, int64_t j) const { return std::max(x * scale[j] + shift[j], floor); }
  };
  Lanes lanes(int64_t channel) const {
    Lanes l;
    std::copy_n(s_.scale.data() + channel, kBlock, l.scale);
    std::copy_n(s_.shift.data() + channel, kBlock, l.shift);
    l.floor = s_.relu != nullptr ? 0.0f : -std::numeric_limits<float>::infinity();
    return l;
  }

  // The nChw16c form of affine: `pixels` runs of the 16 channels from `channel` on.
  void affine_blocked(const float* in, float* out, int64_t pixels, int64_t channel) const {
    const Lanes l = lanes(channel);
    for (int64_t q = 0; q < pixels; ++q) {
#pragma omp simd
      for (int64_t j = 0; j < kBlock; ++j) out[q * kBlock + j] = l.at(in[q * kBlock + j], j);
    }
  }

  // affine_blocked over one block of dims_' H x W pixels, then the mean of each 2x2 window.
  void affine_pooled(const float* in, float* out, int64_t channel) const {
    const Lanes l = lanes(channel);
    const int64_t w = dims_[3];
    for (int64_t oh = 0; oh < dims_[2] / 2; ++oh) {
      for (int64_t ow = 0; ow < w / 2; ++ow) {
        const float* a = in + ((2 * oh) * w + 2 * ow) * kBlock;
        const float* c = a + w * kBlock;
        float* o = out + (oh * (w / 2) + ow) * kBlock;
#pragma omp simd
        for (int64_t j = 0; j < kBlock; ++j) {
          o[j] = 0.25f *
                 (l.at(a[j], j) + l.at(a[kBlock + j], j) + l.at(c[j], j) + l.at(c[kBlock + j], j));
        }
      }
    }
  }

  ScaleShift s_;
  Pieces pieces_;
  memory::dims dims_;
  bool pooled_;
};

}  // namespace

namespace {

// Copies each input of a blocked channel Concat into its run of the output, on the OpenMP team.
class BlockedConcatStep final : public Step {
 public:
  // Pieces of at most 64 KiB, planned once and shared out over the threads at each run.
  BlockedConcatStep(std::vector<int> inputs, const std::vector<size_t>& bytes, int out)
      : inputs_(std::move(inputs)), out_(out) {
    constexpr size_t kPart = 64 * 1024;
    size_t start = 0;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      for (size_t at = 0; at < bytes[i]; at += kPart) {
        parts_.push_back({i, at, start + at, std::min(kPart, bytes[i] - at)});
      }
      start += bytes[i];
    }
  }

  Status run(StepContext& ctx) const override {
    auto* out = static_cast<uint8_t*>(ctx.data[static_cast<size_t>(out_)]);
    const auto n = static_cast<int64_t>(parts_.size());
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < n; ++p) {
      const Part& part = parts_[static_cast<size_t>(p)];
      const auto* from =
          static_cast<const uint8_t*>(ctx.data[static_cast<size_t>(inputs_[part.input])]);
      std::memcpy(out + part.to, from + part.from, part.bytes);
    }
    return Status();
  }

 private:
  struct Part {
    size_t input;  // index into inputs_
    size_t from;   // byte offset in that input
    size_t to;     // byte offset in the output
    size_t bytes;
  };
  std::vector<int> inputs_;
  int out_;
  std::vector<Part> parts_;
};

}  // namespace

bool lower_blocked_concat(ProgramBuilder& b, const Node& concat) {
  if (!is_channel_concat(concat)) return false;
  const Shape& y = concat.output(0)->tensor_type().shape();
  if (y[0] != 1) return false;
  std::vector<int> inputs;
  std::vector<size_t> bytes;
  for (const Value* x : concat.inputs()) {
    const Shape& s = x->tensor_type().shape();
    if (s[1] % kBlock != 0 || !b.has_buffer(x) ||
        b.layout_of(x) !=
            memory::desc(to_dims(s), memory::data_type::f32, memory::format_tag::nChw16c)) {
      return false;
    }
    inputs.push_back(b.buffer_of(x));
    bytes.push_back(static_cast<size_t>(s.numel()) * sizeof(float));
  }
  const int out = b.define(concat.output(0), memory::desc(to_dims(y), memory::data_type::f32,
                                                          memory::format_tag::nChw16c));
  auto step = std::make_unique<BlockedConcatStep>(inputs, bytes, out);
  step->node = &concat;
  step->kind = "Concat";
  step->reads = inputs;
  step->writes.push_back(out);
  b.add_step(std::move(step));
  return true;
}

bool lower_deferred_concat(ProgramBuilder& b, const Node& concat) {
  std::optional<Pieces> pieces = concat_pieces(b, concat);
  if (!pieces) return false;
  // The readers come later and read the pieces' own buffers.
  for (int id : pieces->buffers) b.keep(id);
  return true;
}

bool lower_concat_batch_norm(ProgramBuilder& b, const Node& node) {
  const Node* concat = node.has_input(0) ? node.input(0)->producer() : nullptr;
  if (concat == nullptr || concat->kind() != OpKind::kConcat || b.has_buffer(node.input(0))) {
    return false;
  }
  std::optional<Pieces> pieces = concat_pieces(b, *concat);
  std::optional<ScaleShift> s = scale_shift_of(node);
  if (!pieces || !s) return false;
  const memory::dims dims = to_dims(node.input(0)->tensor_type().shape());
  memory::desc layout = plain_desc(dims);
  if (pieces->order == Order::kChannelsLast) {
    layout = memory::desc(dims, memory::data_type::f32, memory::format_tag::nhwc);
  } else if (pieces->order == Order::kBlocked16) {
    layout = memory::desc(dims, memory::data_type::f32, memory::format_tag::nChw16c);
  }
  const Node* relu = s->relu;
  const Node* pool = pieces->order == Order::kBlocked16 ? sole_pool_2x2(s->out) : nullptr;
  int out = -1;
  if (pool != nullptr) {
    memory::dims pooled = dims;
    pooled[2] /= 2;
    pooled[3] /= 2;
    out = b.define(pool->output(0),
                   memory::desc(pooled, memory::data_type::f32, memory::format_tag::nChw16c));
  } else {
    out = b.define(s->out, layout);
  }
  std::vector<int> reads = pieces->buffers;
  auto step = std::make_unique<ConcatScaleShiftStep>(std::move(*s), std::move(*pieces), dims,
                                                     pool != nullptr);
  step->node = &node;
  step->kind = relu != nullptr ? "Concat+BatchNormalization+Relu" : "Concat+BatchNormalization";
  if (pool != nullptr) step->kind += "+AveragePool";
  step->reads = std::move(reads);
  step->writes = {out};
  b.add_step(std::move(step));
  if (relu != nullptr) b.mark_fused(relu);
  if (pool != nullptr) b.mark_fused(pool);
  return true;
}

}  // namespace kiln::compiler::cpu
