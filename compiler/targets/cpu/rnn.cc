// SPDX-License-Identifier: Apache-2.0
// LSTM on kiln's own AVX-512 kernel (kernels/lstm.h): the gates' weights packed once at compile
// time, each direction one pass over the steps, the state written straight into Y_h and Y_c.
// LSTMs with peepholes, a clip, coupled gates, other activations, the batch-first layout or
// sequence lengths other than the whole sequence run on the ref kernel.
#include <fmt/format.h>

#include "compiler/ops/all_ops.h"
#include "compiler/targets/cpu/builder.h"
#include "compiler/targets/cpu/kernels/lstm.h"
#include "compiler/targets/cpu/lowering.h"
#include "compiler/targets/cpu/onednn.h"

namespace kiln::compiler::cpu {

namespace {

struct LstmShape {
  int64_t steps = 0;
  int64_t batch = 0;
  int64_t input = 0;
  int64_t hidden = 0;
  int64_t directions = 1;
  bool reverse = false;  // a single direction, backwards
};

class LstmStep final : public Step {
 public:
  LstmStep(LstmShape shape, std::vector<dnnl::memory> packed, int x, int h0, int c0, int y, int yh,
           int yc, int work)
      : shape_(shape),
        packed_(std::move(packed)),
        x_(x),
        h0_(h0),
        c0_(c0),
        y_(y),
        yh_(yh),
        yc_(yc),
        work_(work) {}

  Status run(StepContext& ctx) const override {
    auto at = [&](int buffer) {
      return buffer >= 0 ? static_cast<float*>(ctx.data[static_cast<size_t>(buffer)]) : nullptr;
    };
    const int64_t state = shape_.batch * shape_.hidden;
    for (int64_t d = 0; d < shape_.directions; ++d) {
      LstmRun run;
      run.steps = shape_.steps;
      run.batch = shape_.batch;
      run.input = shape_.input;
      run.hidden = shape_.hidden;
      run.reverse = shape_.reverse || d == 1;
      run.packed = static_cast<const float*>(packed_[static_cast<size_t>(d)].get_data_handle());
      run.x = at(x_);
      run.h0 = h0_ >= 0 ? at(h0_) + d * state : nullptr;
      run.c0 = c0_ >= 0 ? at(c0_) + d * state : nullptr;
      run.y = y_ >= 0 ? at(y_) + d * state : nullptr;
      run.y_step = shape_.directions * state;
      run.h = at(yh_) + d * state;
      run.c = at(yc_) + d * state;
      run.work = at(work_);
      lstm_f32(run);
    }
    return Status();
  }

 private:
  LstmShape shape_;
  std::vector<dnnl::memory> packed_;  // one per direction
  int x_, h0_, c0_, y_, yh_, yc_, work_;
};

// Whether `v` is a static f32 tensor of `dims`.
bool f32_of(const Value* v, const std::vector<int64_t>& dims) {
  return v != nullptr && v->type().is_tensor() && v->tensor_type().is_static() &&
         v->tensor_type().dtype == DType::kF32 && v->tensor_type().shape().dims() == dims;
}

const Tensor* f32_constant(const Value* v, const std::vector<int64_t>& dims) {
  return f32_of(v, dims) ? v->constant_value() : nullptr;
}

}  // namespace

bool lower_lstm(ProgramBuilder& b, const Node& node) {
  if (!has_fast_lstm() || node.num_inputs() < 3 || node.num_outputs() < 1) return false;
  const auto& op = node.attrs<ops::LSTM>();
  if (op.layout != 0 || op.input_forget != 0 || op.clip || op.activation_alpha ||
      op.activation_beta || !op.hidden_size) {
    return false;
  }
  LstmShape s;
  if (op.direction == "bidirectional") {
    s.directions = 2;
  } else if (op.direction == "reverse") {
    s.reverse = true;
  } else if (op.direction != "forward") {
    return false;
  }
  for (size_t i = 0; i < op.activations.size(); ++i) {
    static constexpr std::string_view kDefault[] = {"Sigmoid", "Tanh", "Tanh"};
    if (op.activations[i] != kDefault[i % 3]) return false;
  }
  const Value* x = node.input(0);
  if (!x->type().is_tensor() || !x->tensor_type().is_static() ||
      x->tensor_type().dtype != DType::kF32 || x->tensor_type().shape().rank() != 3) {
    return false;
  }
  const Shape& xs = x->tensor_type().shape();
  s.steps = xs[0];
  s.batch = xs[1];
  s.input = xs[2];
  s.hidden = *op.hidden_size;
  const int64_t d = s.directions;
  const int64_t h = s.hidden;
  if (s.steps < 1 || s.batch < 1 || s.input < 1 || h < 1) return false;
  const Tensor* w = f32_constant(node.input(1), {d, 4 * h, s.input});
  const Tensor* r = f32_constant(node.input(2), {d, 4 * h, h});
  const Tensor* bias = node.has_input(3) ? f32_constant(node.input(3), {d, 8 * h}) : nullptr;
  if (w == nullptr || r == nullptr || (node.has_input(3) && bias == nullptr)) return false;
  // Sequence lengths: only all of them the whole sequence.
  if (node.has_input(4)) {
    const Tensor* lens = node.input(4)->constant_value();
    if (lens == nullptr || lens->dtype() != DType::kI32 || lens->numel() != s.batch) return false;
    for (int32_t len : lens->span<int32_t>()) {
      if (len != s.steps) return false;
    }
  }
  const std::vector<int64_t> state{d, s.batch, h};
  for (int i : {5, 6}) {
    if (node.has_input(i) && !f32_of(node.input(i), state)) return false;
  }
  if (node.has_input(7)) return false;  // peepholes
  const std::vector<int64_t> y_dims{s.steps, d, s.batch, h};
  if (!f32_of(node.output(0), y_dims)) return false;
  for (int i = 1; i < node.num_outputs(); ++i) {
    if (!f32_of(node.output(i), state)) return false;
  }
  const dnnl::engine& engine = b.engine();
  const Tensor w_plain = plain_constant(engine, *w);
  const Tensor r_plain = plain_constant(engine, *r);
  const Tensor b_plain = bias != nullptr ? plain_constant(engine, *bias) : Tensor();
  std::vector<dnnl::memory> packed;
  const auto floats = static_cast<int64_t>(lstm_packed_floats(s.input, h));
  for (int64_t dir = 0; dir < d; ++dir) {
    dnnl::memory m = packed_memory(plain_desc(dnnl::memory::dims{floats}, DType::kF32), b.engine());
    lstm_pack(w_plain.data<float>() + dir * 4 * h * s.input,
              r_plain.data<float>() + dir * 4 * h * h,
              bias != nullptr ? b_plain.data<float>() + dir * 8 * h : nullptr, s.input, h,
              static_cast<float*>(m.get_data_handle()));
    packed.push_back(std::move(m));
  }
  std::vector<int> reads = {b.plain(x)};
  const int h0 = node.has_input(5) ? b.plain(node.input(5)) : -1;
  const int c0 = node.has_input(6) ? b.plain(node.input(6)) : -1;
  if (h0 >= 0) reads.push_back(h0);
  if (c0 >= 0) reads.push_back(c0);
  // The weights stay in the graph (what an artifact stores): a step reading them keeps them.
  for (int i : {1, 2, 3}) {
    if (node.has_input(i)) reads.push_back(b.buffer_of(node.input(i)));
  }
  const size_t state_bytes = static_cast<size_t>(d * s.batch * h) * sizeof(float);
  const int y = b.define(node.output(0), dnnl::memory::desc());
  const int yh = node.num_outputs() > 1 ? b.define(node.output(1), dnnl::memory::desc())
                                        : b.scratch(state_bytes);
  const int yc = node.num_outputs() > 2 ? b.define(node.output(2), dnnl::memory::desc())
                                        : b.scratch(state_bytes);
  const int work = b.scratch(lstm_work_floats(s.input, h) * sizeof(float));
  auto step = std::make_unique<LstmStep>(s, std::move(packed), reads[0], h0, c0, y, yh, yc, work);
  step->node = &node;
  step->kind = "LSTM";
  step->reads = std::move(reads);
  step->writes = {y, yh, yc, work};
  b.add_step(std::move(step));
  return true;
}

}  // namespace kiln::compiler::cpu
