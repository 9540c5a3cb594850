// SPDX-License-Identifier: Apache-2.0
// The echo backend: outputs share the input tensors' storage, so echoing costs no copy.
#include "server/backends/echo_backend.h"

namespace kiln::server {

namespace {

class EchoBackend final : public Backend {
 public:
  Result<BackendInfo> load(const BackendContext& context) override {
    BackendInfo info;
    info.platform = "kiln_echo";
    // Declared tensors become the metadata (and the checks); none means any inputs are echoed.
    info.inputs = context.config.inputs;
    info.outputs = context.config.inputs;
    return info;
  }

  std::vector<Result<std::vector<InferTensor>>> execute(
      std::span<const InferenceRequest* const> batch) override {
    std::vector<Result<std::vector<InferTensor>>> out;
    out.reserve(batch.size());
    for (const InferenceRequest* r : batch) {
      std::vector<InferTensor> outputs;
      outputs.reserve(r->inputs.size());
      for (const InferTensor& in : r->inputs) outputs.push_back({in.name, in.data, {}});
      out.emplace_back(std::move(outputs));
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Backend> make_echo_backend() {
  return std::make_unique<EchoBackend>();
}

}  // namespace kiln::server
