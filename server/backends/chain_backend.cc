// SPDX-License-Identifier: Apache-2.0
// The chain backend: each request walks the steps, every step a request to another model of the
// server (so it passes that model's checks and joins its dynamic batches); the requests of one
// batch walk concurrently and execute() waits for all of them.
#include "server/backends/chain_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <latch>
#include <map>
#include <optional>
#include <set>

namespace kiln::server {

namespace {

using TensorMap = std::vector<std::pair<std::string, std::string>>;

const TensorMetadata* find_tensor(const std::vector<TensorMetadata>& list,
                                  const std::string& name) {
  for (const TensorMetadata& t : list) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string names_of(const std::vector<TensorMetadata>& list) {
  std::vector<std::string> names;
  for (const TensorMetadata& t : list) names.push_back(t.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

class ChainBackend final : public Backend {
 public:
  Result<BackendInfo> load(const BackendContext& ctx) override {
    name_ = ctx.config.name;
    router_ = ctx.router;
    steps_ = ctx.config.steps;
    if (router_ == nullptr) {
      return unavailable_error(
          fmt::format("chain \"{}\" runs only inside a server (its steps are models)", name_));
    }
    std::map<std::string, TensorMetadata> produced;  // chain tensor -> where it comes from
    std::vector<TensorMetadata> inputs;              // consumed before any step produces them
    std::set<std::string> consumed_later;
    bool any_input = false;  // a step's model takes any inputs (echo): so does the chain
    int64_t max_batch = INT64_MAX;
    for (size_t k = 0; k < steps_.size(); ++k) {
      const ChainStep& step = steps_[k];
      const std::string where =
          fmt::format("chain \"{}\" step {} (model \"{}\")", name_, k, step.model);
      Result<ModelMetadata> md = router_->model_metadata(step.model, step.version);
      if (!md.ok()) {
        return md.status().with_context(
            fmt::format("{}: the step's model must be loaded before the chain", where));
      }
      KILN_ASSIGN_OR_RETURN(int64_t batch, router_->model_max_batch_size(step.model, step.version));
      max_batch = std::min(max_batch, batch);
      for (const TensorMetadata& t : md->inputs) {
        auto mapped = [&](const auto& entry) { return entry.first == t.name; };
        if (std::none_of(step.input_map.begin(), step.input_map.end(), mapped)) {
          return invalid_argument_error(fmt::format(
              "{}: input \"{}\" is not in input_map; map each of the model's inputs ({}) to a "
              "chain tensor",
              where, t.name, names_of(md->inputs)));
        }
      }
      for (const auto& [model_input, tensor] : step.input_map) {
        const TensorMetadata* t = find_tensor(md->inputs, model_input);
        if (t == nullptr && !md->inputs.empty()) {
          return invalid_argument_error(
              fmt::format("{}: input_map names \"{}\", which is not an input of the model ({})",
                          where, model_input, names_of(md->inputs)));
        }
        auto from = produced.find(tensor);
        if (from != produced.end()) {
          if (t != nullptr && t->dtype != from->second.dtype) {
            return invalid_argument_error(fmt::format(
                "{}: input \"{}\" takes {}, but chain tensor \"{}\" is {}", where, model_input,
                wire_dtype_name(t->dtype), tensor, wire_dtype_name(from->second.dtype)));
          }
          consumed_later.insert(tensor);
        } else if (find_tensor(inputs, tensor) == nullptr) {
          any_input = any_input || t == nullptr;
          TensorMetadata in = t != nullptr ? *t : TensorMetadata{};
          in.name = tensor;
          inputs.push_back(std::move(in));
        }
      }
      for (const auto& [model_output, tensor] : step.output_map) {
        const TensorMetadata* t = find_tensor(md->outputs, model_output);
        if (t == nullptr && md->outputs.empty()) {
          // A model that lists no outputs (echo) returns its inputs under their names.
          for (const auto& [model_input, fed] : step.input_map) {
            if (model_input != model_output) continue;
            auto it = produced.find(fed);
            t = it != produced.end() ? &it->second : find_tensor(inputs, fed);
          }
          static const TensorMetadata kUnknown{"", DType::kF32, {}};
          if (t == nullptr) t = &kUnknown;
        }
        if (t == nullptr) {
          return invalid_argument_error(
              fmt::format("{}: output_map names \"{}\", which is not an output of the model ({})",
                          where, model_output, names_of(md->outputs)));
        }
        TensorMetadata out = *t;
        out.name = tensor;
        produced[tensor] = std::move(out);
      }
    }
    BackendInfo info;
    info.platform = "ensemble";
    info.max_batch_size = max_batch == INT64_MAX ? 0 : max_batch;
    if (!any_input) info.inputs = inputs;
    if (!ctx.config.inputs.empty()) {
      for (const TensorMetadata& t : ctx.config.inputs) {
        if (find_tensor(inputs, t.name) == nullptr) {
          return invalid_argument_error(
              fmt::format("chain \"{}\": declared input \"{}\" feeds no step; the steps take {}",
                          name_, t.name, names_of(inputs)));
        }
      }
      info.inputs = ctx.config.inputs;
    }
    if (!ctx.config.outputs.empty()) {
      for (const TensorMetadata& t : ctx.config.outputs) {
        if (!produced.count(t.name)) {
          return invalid_argument_error(
              fmt::format("chain \"{}\": declared output \"{}\" is not in any step's output_map",
                          name_, t.name));
        }
      }
      info.outputs = ctx.config.outputs;
    } else {
      for (const auto& [tensor, meta] : produced) {
        if (!consumed_later.count(tensor)) info.outputs.push_back(meta);
      }
    }
    for (const TensorMetadata& t : info.outputs) outputs_.push_back(t.name);
    return info;
  }

  std::vector<Result<std::vector<InferTensor>>> execute(
      std::span<const InferenceRequest* const> batch) override {
    std::vector<std::optional<Result<std::vector<InferTensor>>>> slots(batch.size());
    std::latch done(static_cast<std::ptrdiff_t>(batch.size()));
    for (size_t i = 0; i < batch.size(); ++i) {
      auto flow = std::make_shared<Flow>();
      flow->request = batch[i];
      flow->slot = &slots[i];
      flow->done = &done;
      for (const InferTensor& in : batch[i]->inputs) flow->tensors[in.name] = in.data;
      advance(std::move(flow));
    }
    done.wait();
    std::vector<Result<std::vector<InferTensor>>> out;
    out.reserve(batch.size());
    for (auto& slot : slots) out.push_back(std::move(*slot));
    return out;
  }

 private:
  // One request's walk through the steps.
  struct Flow {
    const InferenceRequest* request = nullptr;
    std::map<std::string, Tensor> tensors;  // chain tensors so far
    size_t step = 0;
    std::optional<Result<std::vector<InferTensor>>>* slot = nullptr;
    std::latch* done = nullptr;
  };

  void finish(const std::shared_ptr<Flow>& flow, Result<std::vector<InferTensor>> result) {
    *flow->slot = std::move(result);
    flow->done->count_down();
  }

  // Sends the flow's next step, or finishes it; runs again from the step model's callback.
  void advance(std::shared_ptr<Flow> flow) {
    if (flow->step == steps_.size()) {
      std::vector<InferTensor> outputs;
      for (const std::string& name : outputs_) outputs.push_back({name, flow->tensors[name], {}});
      return finish(flow, std::move(outputs));
    }
    const ChainStep& step = steps_[flow->step];
    InferenceRequest sub;
    sub.model = step.model;
    sub.version = step.version;
    sub.id = flow->request->id;
    sub.deadline = flow->request->deadline;
    if (flow->request->parameters.has("priority")) {
      sub.parameters.set("priority", flow->request->parameters.values().at("priority"));
    }
    for (const auto& [model_input, tensor] : step.input_map) {
      sub.inputs.push_back({model_input, flow->tensors[tensor], {}});
    }
    for (const auto& [model_output, tensor] : step.output_map) {
      sub.outputs.push_back({model_output, {}});
    }
    router_->route(std::move(sub), [this, flow](Result<InferenceResponse> response) mutable {
      const ChainStep& step = steps_[flow->step];
      if (!response.ok()) {
        return finish(flow, response.status().with_context(fmt::format(
                                "chain step {} (model \"{}\")", flow->step, step.model)));
      }
      for (InferTensor& t : response->outputs) {
        for (const auto& [model_output, tensor] : step.output_map) {
          if (model_output == t.name) flow->tensors[tensor] = t.data;
        }
      }
      ++flow->step;
      advance(std::move(flow));
    });
  }

  std::string name_;
  ModelRouter* router_ = nullptr;
  std::vector<ChainStep> steps_;
  std::vector<std::string> outputs_;
};

}  // namespace

std::unique_ptr<Backend> make_chain_backend() {
  return std::make_unique<ChainBackend>();
}

}  // namespace kiln::server
