// SPDX-License-Identifier: Apache-2.0
// Squeeze-and-excitation gates folded into the weights of the 1x1 convolution that follows them.
#include "compiler/targets/cpu/squeeze_excite.h"

#include <cstdint>
#include <vector>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/rewrite.h"
#include "compiler/targets/cpu/onednn.h"

namespace kiln::compiler::cpu {

namespace {

using dnnl::memory;

// Where channel c of a [1, C, 1, 1] tensor in `layout` lives, for c < `channels` (in elements);
// nullopt for a layout with more than one block level.
std::optional<std::vector<int32_t>> channel_offsets(const memory::desc& layout, int64_t channels) {
  std::vector<int32_t> offsets(static_cast<size_t>(channels));
  if (is_row_major(layout)) {
    for (int64_t c = 0; c < channels; ++c)
      offsets[static_cast<size_t>(c)] = static_cast<int32_t>(c);
    return offsets;
  }
  const dnnl_memory_desc_t& md = layout.data;
  if (md.format_kind != dnnl_blocked || md.ndims != 4) return std::nullopt;
  const dnnl_blocking_desc_t& blocking = md.format_desc.blocking;
  int64_t block = 1;
  if (blocking.inner_nblks > 1 || (blocking.inner_nblks == 1 && blocking.inner_idxs[0] != 1)) {
    return std::nullopt;
  }
  if (blocking.inner_nblks == 1) block = blocking.inner_blks[0];
  for (int64_t c = 0; c < channels; ++c) {
    offsets[static_cast<size_t>(c)] =
        static_cast<int32_t>(md.offset0 + c / block * blocking.strides[1] + c % block);
  }
  return offsets;
}

// For each element of weights packed in `packed`: the gate offset of its input channel, or -1 for
// padding. Found by packing the input channel numbers themselves.
std::vector<int32_t> gate_index(const dnnl::engine& engine, const memory::desc& plain,
                                const memory::desc& packed, const std::vector<int32_t>& offsets) {
  const memory::dims dims = plain.dims();  // [O, I, 1, 1]
  std::vector<float> ramp(static_cast<size_t>(dims[0] * dims[1]));
  for (size_t k = 0; k < ramp.size(); ++k) {
    ramp[k] = static_cast<float>(k % static_cast<size_t>(dims[1]) + 1);
  }
  const memory::desc plain_f32 = plain_desc(dims);
  memory src(plain_f32, engine, ramp.data());
  memory dst(packed, engine);
  dnnl::stream stream(engine);
  dnnl::reorder(src, dst).execute(stream, src, dst);
  stream.wait();
  const auto* channels = static_cast<const float*>(dst.get_data_handle());
  std::vector<int32_t> index(packed.get_size() / sizeof(float));
  for (size_t k = 0; k < index.size(); ++k) {
    const auto c = static_cast<int32_t>(channels[k]) - 1;
    index[k] = c < 0 ? -1 : offsets[static_cast<size_t>(c)];
  }
  return index;
}

// Scales the packed weights by the gate, then runs the convolution.
class GatedWeightsStep final : public Step {
 public:
  GatedWeightsStep(std::unique_ptr<Step> conv, memory weights, std::vector<int32_t> index, int gate,
                   int scaled)
      : conv_(std::move(conv)),
        weights_(std::move(weights)),
        index_(std::move(index)),
        gate_(gate),
        scaled_(scaled) {
    node = conv_->node;
    kind = "Mul+" + conv_->kind;
    reads = conv_->reads;
    reads.push_back(gate_);
    writes = conv_->writes;
  }

  Status run(StepContext& ctx) const override {
    const auto* w = static_cast<const float*>(weights_.get_data_handle());
    const auto* g = static_cast<const float*>(ctx.data[static_cast<size_t>(gate_)]);
    auto* out = static_cast<float*>(ctx.data[static_cast<size_t>(scaled_)]);
    const size_t n = index_.size();
    for (size_t k = 0; k < n; ++k) out[k] = index_[k] < 0 ? 0.0f : w[k] * g[index_[k]];
    return conv_->run(ctx);
  }

 private:
  std::unique_ptr<Step> conv_;
  memory weights_;
  std::vector<int32_t> index_;
  int gate_;
  int scaled_;
};

}  // namespace

std::unique_ptr<Step> gate_weights(ProgramBuilder& b, const ConvGate& gate,
                                   const memory::desc& user_weights, const void* weights,
                                   const memory::desc& packed, int scaled,
                                   std::unique_ptr<Step> conv) {
  const int64_t channels = gate.x->tensor_type().shape()[1];
  int gate_buffer = b.buffer_of(gate.gate);
  std::optional<std::vector<int32_t>> offsets = channel_offsets(b.layout_of(gate.gate), channels);
  if (!offsets) {
    gate_buffer = b.plain(gate.gate);
    offsets = channel_offsets(memory::desc(), channels);
  }
  return std::make_unique<GatedWeightsStep>(
      std::move(conv), pack(b.engine(), user_weights, weights, packed),
      gate_index(b.engine(), user_weights, packed, *offsets), gate_buffer, scaled);
}

}  // namespace kiln::compiler::cpu
