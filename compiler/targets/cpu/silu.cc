// SPDX-License-Identifier: Apache-2.0
// Steps that apply kiln's SiLU or channel-mean kernels (kernels/silu.h) after a oneDNN step.
#include "compiler/targets/cpu/silu.h"

#include <memory>
#include <utility>
#include <vector>

#include "compiler/targets/cpu/kernels/silu.h"

namespace kiln::compiler::cpu {

namespace {

// Runs `step`, then `after` over the step's buffers.
template <typename After>
class ThenStep final : public Step {
 public:
  ThenStep(std::unique_ptr<Step> step, After after) : step_(std::move(step)), after_(after) {
    node = step_->node;
    kind = step_->kind;
    reads = step_->reads;
    writes = step_->writes;
    one_thread = step_->one_thread;
  }

  Status run(StepContext& ctx) const override {
    KILN_RETURN_IF_ERROR(step_->run(ctx));
    after_(ctx.data);
    return Status();
  }
  const char* runs_on() const override { return step_->runs_on(); }

 private:
  std::unique_ptr<Step> step_;
  After after_;
};

template <typename After>
std::unique_ptr<Step> then(std::unique_ptr<Step> step, After after) {
  return std::make_unique<ThenStep<After>>(std::move(step), after);
}

float* floats(const std::vector<void*>& data, int buffer) {
  return static_cast<float*>(data[static_cast<size_t>(buffer)]);
}

}  // namespace

std::unique_ptr<Step> silu_after(std::unique_ptr<Step> step, int dst, size_t elements) {
  return then(std::move(step), [dst, elements](const std::vector<void*>& data) {
    silu_f32(floats(data, dst), elements);
  });
}

std::unique_ptr<Step> pool_after(std::unique_ptr<Step> step, int dst, size_t blocks, size_t pixels,
                                 bool silu, int pooled) {
  step = then(std::move(step), [=](const std::vector<void*>& data) {
    pool16_f32(floats(data, dst), blocks, pixels, silu, floats(data, pooled));
  });
  step->writes.push_back(pooled);
  step->kind += "+GlobalAveragePool";
  return step;
}

}  // namespace kiln::compiler::cpu
