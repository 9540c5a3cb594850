// SPDX-License-Identifier: Apache-2.0
// Differential patterns of recurrent layers: LSTMs as voice-activity and wake-word models have them
// (one step of a cell of 64 or 128, the state carried in and out), and longer, wider, reversed and
// bidirectional ones; some with what kiln's LSTM kernel leaves to the ref kernel (peepholes, a
// clip, the batch-first layout).
#include <cmath>

#include "tests/differential/builders.h"
#include "tests/differential/case.h"

namespace kiln::differential {

namespace {

void gen_lstm(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t steps = r.chance(0.5) ? 1 : r.range(2, 6);
  const int64_t batch = r.chance(0.7) ? 1 : r.range(2, 3);
  const int64_t input = r.pick<int64_t>({1, 5, 16, 33, 64, 128});
  const int64_t hidden = r.pick<int64_t>({1, 7, 16, 33, 64, 128});
  const std::string direction =
      r.pick<std::string>({"forward", "forward", "reverse", "bidirectional"});
  const int64_t d = direction == "bidirectional" ? 2 : 1;
  // What the kernel leaves to ref, now and then.
  const int other = r.chance(0.8) ? 0 : static_cast<int>(r.range(1, 3));
  const bool batch_first = other == 1;
  const std::string x =
      g.input(batch_first ? Dims{batch, steps, input} : Dims{steps, batch, input});
  const float bound = 1.0f / std::sqrt(static_cast<float>(hidden));
  std::vector<std::string> inputs = {x, g.weight({d, 4 * hidden, input}, bound),
                                     g.weight({d, 4 * hidden, hidden}, bound)};
  inputs.push_back(r.chance(0.8) ? g.weight({d, 8 * hidden}, bound) : "");
  inputs.push_back("");  // sequence_lens
  const Dims state = batch_first ? Dims{batch, d, hidden} : Dims{d, batch, hidden};
  // The state carried in (Silero VAD's h and c inputs), a constant, or none (zeros).
  for (int i = 0; i < 2; ++i) {
    switch (r.range(0, 2)) {
      case 0: inputs.push_back(g.input(state, 0.5f)); break;
      case 1: inputs.push_back(g.weight(state, 0.5f)); break;
      default: inputs.push_back("");
    }
  }
  std::vector<Attr> attrs = {ai("hidden_size", hidden), as("direction", direction)};
  if (other == 2) {
    inputs.push_back(g.weight({d, 3 * hidden}, 0.5f));  // peepholes
  } else if (other == 3) {
    attrs.push_back(af("clip", 0.5f));
  }
  if (batch_first) attrs.push_back(ai("layout", 1));
  while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
  const int outputs = static_cast<int>(r.range(1, 3));
  const std::vector<std::string> out = g.node_n("LSTM", inputs, outputs, attrs);
  for (int i = 0; i < outputs; ++i) {
    if (i == outputs - 1 || r.chance(0.5)) g.output(out[static_cast<size_t>(i)]);
  }
}

constexpr Pattern kPatterns[] = {
    {"lstm",
     "LSTM of 1-6 steps, forward, reverse or bidirectional, state in and out, its outputs some of "
     "Y, Y_h, Y_c; now and then peepholes, a clip or the batch-first layout (left to ref)",
     gen_lstm},
};

}  // namespace

std::span<const Pattern> rnn_patterns() {
  return kPatterns;
}

}  // namespace kiln::differential
