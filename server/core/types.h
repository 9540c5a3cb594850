// SPDX-License-Identifier: Apache-2.0
// The server's request, response and metadata types, shared by every transport and backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace kiln::server {

// A KServe v2 parameter value: bool, integer, double or string.
using ParameterValue = std::variant<bool, int64_t, double, std::string>;

// Named parameters of a request, a tensor or a model load. Typed getters return nullopt when the
// key is missing and an invalid-argument error when it holds another type.
class Parameters {
 public:
  void set(std::string key, ParameterValue value) { values_[std::move(key)] = std::move(value); }
  bool has(std::string_view key) const { return values_.find(key) != values_.end(); }
  void erase(std::string_view key);
  bool empty() const { return values_.empty(); }
  const std::map<std::string, ParameterValue, std::less<>>& values() const { return values_; }

  Result<std::optional<bool>> get_bool(std::string_view key) const;
  // Accepts integers, and doubles with an integral value.
  Result<std::optional<int64_t>> get_int(std::string_view key) const;
  Result<std::optional<double>> get_double(std::string_view key) const;
  Result<std::optional<std::string>> get_string(std::string_view key) const;

  // Copies every entry of `other` over this one's.
  void merge(const Parameters& other);

  friend bool operator==(const Parameters& a, const Parameters& b) {
    return a.values_ == b.values_;
  }

 private:
  std::map<std::string, ParameterValue, std::less<>> values_;
};

// "true", "42", "1.5", "text" (strings unquoted).
std::string parameter_to_string(const ParameterValue& value);

// The KServe wire name of a dtype ("FP32", "INT64", "BYTES", "BOOL", "BF16"), and back.
std::string_view wire_dtype_name(DType dtype);
std::optional<DType> parse_wire_dtype(std::string_view name);

// A named tensor of a request or a response.
struct InferTensor {
  std::string name;
  Tensor data;
  Parameters parameters;
};

// An output the client asks for (all outputs when a request names none).
struct RequestedOutput {
  std::string name;
  Parameters parameters;
};

// When a traced request waited and ran, filled by the model that runs it (server/core/trace.h).
struct RequestTimeline {
  std::chrono::steady_clock::time_point queued;  // arrival at the model's queue
  std::chrono::steady_clock::time_point compute_start;
  std::chrono::steady_clock::time_point compute_end;
  int64_t batch_requests = 0;  // requests in its batch; 0 when it never ran
  int64_t batch_size = 0;      // batch entries in its batch
  std::string version;         // the model version that ran it
};

// One inference request as every transport hands it to the server core.
struct InferenceRequest {
  std::string model;
  std::string version;  // empty: the newest ready version
  std::string id;
  Parameters parameters;  // "priority" (1 is highest, 0 the default) and "timeout" (us) are read
  std::vector<InferTensor> inputs;
  std::vector<RequestedOutput> outputs;
  // When the answer is due, queue and compute together: set by the model from "timeout" (or the
  // model's default); a chain gives its steps its own, so they share one budget. max(): none.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Set by a transport tracing the request (it owns the timeline until the callback has run);
  // null otherwise, and never passed on to a chain's steps.
  RequestTimeline* timeline = nullptr;
};

struct InferenceResponse {
  std::string model;
  std::string version;
  std::string id;
  Parameters parameters;
  std::vector<InferTensor> outputs;
};

// Called exactly once per request, from a server thread, with the response or the error.
using InferCallback = std::function<void(Result<InferenceResponse>)>;

// A tensor a model takes or gives: dims of -1 are variable (the batch dim of a batching model).
struct TensorMetadata {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
};

struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;
  std::string platform;
  std::vector<TensorMetadata> inputs;
  std::vector<TensorMetadata> outputs;
};

struct ServerMetadata {
  std::string name;
  std::string version;
  std::vector<std::string> extensions;
};

// "[-1,3,224,224]".
std::string dims_to_string(const std::vector<int64_t>& dims);

}  // namespace kiln::server
