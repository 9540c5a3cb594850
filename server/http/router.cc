// SPDX-License-Identifier: Apache-2.0
// The KServe v2 REST routes, the repository and statistics extensions and amdinfer's workers.
#include "server/http/router.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "server/http/status_page.h"
#include "server/http/trace_json.h"

namespace kiln::server::http {

namespace {

HttpResponse json(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse error(const Status& s) {
  return json(http_status(s.code()), error_json(s.message()));
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "%41b" -> "Ab"; a '%' without two hex digits stays as it is.
std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The path's segments, percent-decoded.
std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (end > start) parts.push_back(percent_decode(path.substr(start, end - start)));
    start = end + 1;
  }
  return parts;
}

// The endpoint group of a /v2 path (see AccessPolicy); nullopt for a path that is no endpoint.
std::optional<ApiGroup> api_group(const std::vector<std::string>& p) {
  if (p.size() == 1 && p[0] == "metrics") return ApiGroup::kStatistics;
  // The status page "/" and its JSON show statistics (and model states and errors) as /metrics
  // does, so they are in its group.
  if (p.empty() || (p.size() == 3 && p[0] == "v2" && p[1] == "kiln")) return ApiGroup::kStatistics;
  if (p[0] != "v2") return std::nullopt;
  if (p.size() == 1) return ApiGroup::kMetadata;
  if ((p.size() == 3 && p[1] == "trace") ||
      (p.size() == 5 && p[1] == "models" && p[3] == "trace")) {
    return ApiGroup::kTrace;
  }
  if (p[1] == "health") return ApiGroup::kHealth;
  if (p[1] == "repository" || p[1] == "workers") return ApiGroup::kModelRepository;
  if (p[1] != "models") return std::nullopt;
  if (p.size() == 2) return ApiGroup::kMetadata;
  if (p.size() == 3 && p[2] == "stats") return ApiGroup::kStatistics;
  const size_t rest = p.size() >= 5 && p[3] == "versions" ? 5 : 3;
  if (p.size() != rest + 1) return ApiGroup::kMetadata;
  if (p[rest] == "ready") return ApiGroup::kHealth;
  if (p[rest] == "infer") return ApiGroup::kInference;
  if (p[rest] == "stats") return ApiGroup::kStatistics;
  return ApiGroup::kMetadata;
}

// A trace for an inference request to `model`, continuing the caller's W3C trace; null when the
// model's trace level is OFF.
std::shared_ptr<RequestTrace> start_trace(Tracer& tracer, const HttpRequest& req,
                                          const std::string& model) {
  auto header = [&](std::string_view key) -> std::string_view {
    auto it = req.headers.find(key);
    return it == req.headers.end() ? std::string_view() : std::string_view(it->second);
  };
  std::shared_ptr<RequestTrace> trace =
      tracer.start(model, {"http", "POST /v2/models/{model}/infer"}, header("traceparent"),
                   header("tracestate"));
  if (trace) {
    trace->add_attribute("http.request.method", std::string("POST"));
    trace->add_attribute("http.route", std::string("/v2/models/{model}/infer"));
  }
  return trace;
}

// `reply` that first ends the trace's server span with the response's status and names the span
// in the response's traceparent header.
std::function<void(HttpResponse)> traced(std::shared_ptr<RequestTrace> trace,
                                         std::function<void(HttpResponse)> reply) {
  return [trace = std::move(trace), reply = std::move(reply)](HttpResponse r) {
    trace->finish("http.response.status_code", r.status,
                  r.status >= 400 ? error_body_message(r.body) : std::string());
    r.headers.emplace_back("traceparent", trace->traceparent());
    reply(std::move(r));
  };
}

}  // namespace

int http_status(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kPermissionDenied: return 403;
    case StatusCode::kResourceExhausted: return 429;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded: return 503;
    case StatusCode::kUnimplemented: return 501;
    case StatusCode::kInternal:
    case StatusCode::kUnknown:
    case StatusCode::kDataLoss: return 500;
    default: return 400;
  }
}

void Router::handle(HttpRequest&& req, std::function<void(HttpResponse)> reply) const {
  std::string_view target = req.target;
  size_t q = target.find('?');
  std::string_view path = target.substr(0, q);
  std::vector<std::string> p = split_path(path);
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool post = req.method == "POST";
  auto wrong_method = [&](std::string_view allowed) {
    reply(json(405, error_json(fmt::format("{} {}: use {}", req.method, path, allowed))));
  };
  if (!server_->access().empty()) {
    if (std::optional<ApiGroup> group = api_group(p)) {
      Status allowed = server_->access().check(*group, [&](std::string_view key) {
        auto it = req.headers.find(key);
        return it == req.headers.end() ? std::nullopt : std::optional<std::string>(it->second);
      });
      if (!allowed.ok()) return reply(error(allowed));
    }
  }

  if (metrics_only_ && !(p.size() == 1 && p[0] == "metrics")) {
    return reply(json(404, error_json(fmt::format(
                               "no endpoint {} {}: this port (--metrics-port) serves GET /metrics "
                               "alone",
                               req.method, path))));
  }
  // The status page and its JSON (status_page.h).
  if (p.empty() || (p.size() == 3 && p[0] == "v2" && p[1] == "kiln" && p[2] == "status")) {
    if (!get) return wrong_method("GET");
    return reply(p.empty() ? status_page_response() : status_json_response(*server_));
  }
  if (p.size() == 1 && p[0] == "metrics") {
    if (!get) return wrong_method("GET");
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4";
    r.body = prometheus_metrics(*server_, gpus_.get());
    return reply(std::move(r));
  }
  if (p.empty() || p[0] != "v2") {
    return reply(json(404, error_json(fmt::format(
                               "no endpoint {} {}; the KServe v2 endpoints start with /v2 (see "
                               "docs/server.md)",
                               req.method, path))));
  }
  // /v2
  if (p.size() == 1) {
    if (!get) return wrong_method("GET");
    return reply(json(200, server_metadata_json(server_->metadata())));
  }
  // /v2/health/live|ready
  if (p.size() == 3 && p[1] == "health") {
    if (!get) return wrong_method("GET");
    if (p[2] == "live") return reply(json(200, "{\"live\":true}"));
    if (p[2] == "ready") {
      bool ready = server_->ready();
      return reply(json(ready ? 200 : 503, ready ? "{\"ready\":true}" : "{\"ready\":false}"));
    }
  }
  // /v2/repository/index, /v2/repository/models/{m}/load|unload
  if (p.size() == 3 && p[1] == "repository" && p[2] == "index") {
    if (!post && !get) return wrong_method("POST");
    Result<Parameters> body = parse_parameters_json(req.body);
    if (!body.ok()) return reply(error(body.status()));
    Result<std::optional<bool>> ready = body->get_bool("ready");
    if (!ready.ok()) return reply(error(ready.status()));
    return reply(
        json(200, repository_index_json(server_->repository_index(ready->value_or(false)))));
  }
  if (p.size() == 5 && p[1] == "repository" && p[2] == "models" &&
      (p[4] == "load" || p[4] == "unload")) {
    if (!post) return wrong_method("POST");
    std::string model(p[3]);
    Status allowed = server_->model_control_status(fmt::format("POST {}", path));
    if (!allowed.ok()) return reply(error(allowed));
    if (p[4] == "unload") {
      Status s = server_->unload_model(model);
      return reply(s.ok() ? json(200, "{}") : error(s));
    }
    Result<Parameters> params = parse_parameters_json(req.body);
    if (!params.ok()) return reply(error(params.status()));
    Status s = server_->load_model(model, *params);
    return reply(s.ok() ? json(200, "{}") : error(s));
  }
  // amdinfer: /v2/workers/{worker}/load answers the endpoint name; /v2/workers/{endpoint}/unload.
  if (p.size() == 4 && p[1] == "workers" && (p[3] == "load" || p[3] == "unload")) {
    if (!post) return wrong_method("POST");
    Status allowed = server_->model_control_status(fmt::format("POST {}", path));
    if (!allowed.ok()) return reply(error(allowed));
    if (p[3] == "unload") {
      Status s = server_->unload_worker(std::string(p[2]));
      return reply(s.ok() ? json(200, "{}") : error(s));
    }
    Result<Parameters> params = parse_parameters_json(req.body);
    if (!params.ok()) return reply(error(params.status()));
    Result<std::string> endpoint = server_->load_worker(std::string(p[2]), *params);
    if (!endpoint.ok()) return reply(error(endpoint.status()));
    HttpResponse r;
    r.content_type = "text/plain";
    r.body = *endpoint;
    return reply(std::move(r));
  }
  // /v2/models, /v2/models/stats
  if (p.size() == 2 && p[1] == "models") {
    if (!get) return wrong_method("GET");
    std::vector<std::string> names;
    for (const RepositoryEntry& e : server_->repository_index(true)) names.push_back(e.name);
    return reply(json(200, model_list_json(names)));
  }
  if (p.size() == 3 && p[1] == "models" && p[2] == "stats") {
    if (!get) return wrong_method("GET");
    Result<std::vector<ModelStatistics>> stats = server_->statistics();
    return reply(stats.ok() ? json(200, statistics_json(*stats)) : error(stats.status()));
  }
  // Triton's trace extension: /v2/trace/setting, /v2/models/{m}/trace/setting.
  if ((p.size() == 3 && p[1] == "trace" && p[2] == "setting") ||
      (p.size() == 5 && p[1] == "models" && p[3] == "trace" && p[4] == "setting")) {
    if (!get && !post) return wrong_method("GET or POST");
    return reply(trace_setting(req, p.size() == 5 ? p[2] : std::string()));
  }
  // /v2/models/{m}[/versions/{v}][/ready|infer|config|stats]
  if (p.size() >= 3 && p[1] == "models") {
    std::string model(p[2]);
    std::string version;
    size_t rest = 3;
    if (p.size() >= 5 && p[3] == "versions") {
      version = std::string(p[4]);
      rest = 5;
    }
    if (p.size() == rest) {
      if (!get) return wrong_method("GET");
      Result<ModelMetadata> md = server_->model_metadata(model, version);
      return reply(md.ok() ? json(200, model_metadata_json(*md)) : error(md.status()));
    }
    if (p.size() == rest + 1) {
      if (p[rest] == "ready") {
        if (!get) return wrong_method("GET");
        Result<bool> ready = server_->model_ready(model, version);
        if (!ready.ok()) return reply(error(ready.status()));
        return reply(json(*ready ? 200 : 503, model_ready_json(model, *ready)));
      }
      if (p[rest] == "infer") {
        if (!post) return wrong_method("POST");
        return infer(std::move(req), model, version, std::move(reply));
      }
      if (p[rest] == "config") {
        if (!get) return wrong_method("GET");
        Result<ModelConfig> config = server_->model_config(model, version);
        return reply(config.ok() ? json(200, model_config_json(*config)) : error(config.status()));
      }
      if (p[rest] == "stats") {
        if (!get) return wrong_method("GET");
        Result<std::vector<ModelStatistics>> stats = server_->statistics(model, version);
        return reply(stats.ok() ? json(200, statistics_json(*stats)) : error(stats.status()));
      }
    }
  }
  reply(json(404, error_json(fmt::format("no endpoint {} {} (see docs/server.md for the list)",
                                         req.method, path))));
}

Result<InferenceRequest> Router::raw_request(const std::string& body, const std::string& model,
                                             const std::string& version) const {
  KILN_ASSIGN_OR_RETURN(ModelMetadata md, server_->model_metadata(model, version));
  if (md.inputs.size() != 1) {
    return invalid_argument_error(fmt::format(
        "model \"{}\" has {} inputs; a raw binary request (Inference-Header-Content-Length: 0) "
        "needs a model with exactly one input; send a JSON header instead",
        model, md.inputs.size()));
  }
  const TensorMetadata& in = md.inputs[0];
  std::vector<int64_t> dims = in.shape;
  // A leading variable dim is the batch: a raw request is one batch entry.
  int variable = static_cast<int>(std::count(dims.begin(), dims.end(), -1));
  if (variable > 1 && dims[0] == -1) {
    dims[0] = 1;
    --variable;
  }
  if (variable > 1) {
    return invalid_argument_error(fmt::format(
        "input \"{}\" {} has more than one variable dim, so a raw binary request cannot give its "
        "shape; send a JSON header instead",
        in.name, dims_to_string(in.shape)));
  }
  int64_t known = 1;
  for (int64_t d : dims) known *= d < 0 ? 1 : d;
  if (in.dtype == DType::kString) {
    for (int64_t& d : dims) d = d < 0 ? 1 : d;
    if (known != 1) {
      return invalid_argument_error(
          fmt::format("input \"{}\" holds {} BYTES elements; a raw binary request carries one",
                      in.name, known));
    }
  } else {
    const size_t element = dtype_size(in.dtype);
    const size_t count = body.size() / element;
    if (body.size() % element != 0 || (variable == 0 && static_cast<int64_t>(count) != known) ||
        (variable == 1 && (known == 0 || static_cast<int64_t>(count) % known != 0 || count == 0))) {
      return invalid_argument_error(fmt::format(
          "model \"{}\": the raw body holds {} bytes, which do not fill input \"{}\" {} of {}",
          model, body.size(), in.name, dims_to_string(in.shape), wire_dtype_name(in.dtype)));
    }
    for (int64_t& d : dims) {
      if (d < 0) d = static_cast<int64_t>(count) / known;
    }
  }
  Shape shape(dims);
  KILN_ASSIGN_OR_RETURN(int64_t numel, shape.checked_numel(limits_.max_elements));
  (void)numel;
  InferenceRequest r;
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate_uninitialized(in.dtype, shape));
  if (in.dtype == DType::kString) {
    t.data<std::string>()[0] = body;
  } else if (!body.empty()) {
    std::memcpy(t.raw_data(), body.data(), body.size());
  }
  r.inputs.push_back({in.name, std::move(t), {}});
  return r;
}

HttpResponse Router::trace_setting(const HttpRequest& req, const std::string& model) const {
  if (!model.empty()) {
    // A model that is loading or failed may get settings; one that does not exist may not.
    Result<ModelMetadata> md = server_->model_metadata(model);
    if (!md.ok() && md.status().code() == StatusCode::kNotFound) return error(md.status());
  }
  if (req.method != "POST") {
    return json(200, trace_settings_json(server_->tracer().settings(model)));
  }
  Result<TraceSettingUpdate> update = parse_trace_settings_json(req.body);
  if (!update.ok()) return error(update.status());
  Result<TraceSettingValues> now = server_->tracer().update(model, *update);
  if (!now.ok()) {
    return error(model.empty() ? now.status()
                               : now.status().with_context(fmt::format("model \"{}\"", model)));
  }
  return json(200, trace_settings_json(*now));
}

void Router::infer(HttpRequest&& req, const std::string& model, const std::string& version,
                   std::function<void(HttpResponse)> reply) const {
  std::shared_ptr<RequestTrace> trace;
  if (server_->tracer().enabled()) [[unlikely]] {
    trace = start_trace(server_->tracer(), req, model);
    if (trace) reply = traced(trace, std::move(reply));
  }
  OutputEncoding encoding;
  Result<InferenceRequest> request = Status(StatusCode::kUnknown, "");
  if (req.inference_header_length == size_t{0}) {
    // Triton's raw binary request: the body is the one input's bytes; outputs come back binary.
    request = raw_request(req.body, model, version);
    encoding.binary_by_default = true;
  } else {
    request = decode_infer_request(req.body, req.inference_header_length, limits_, &encoding);
  }
  if (!request.ok()) {
    Status s = request.status().with_context(fmt::format("model \"{}\"", model));
    server_->record_request_error(model, version, s);
    // A tensor past the element limit is a payload too large, not a full queue.
    if (s.code() == StatusCode::kResourceExhausted) {
      return reply(json(413, error_json(s.message())));
    }
    return reply(error(s));
  }
  request->model = model;
  request->version = version;
  if (trace) request->timeline = trace->timeline();
  server_->infer_async(
      std::move(request).value(),
      [reply = std::move(reply), encoding = std::move(encoding)](Result<InferenceResponse> r) {
        if (!r.ok()) return reply(error(r.status()));
        Result<EncodedBody> body = encode_infer_response(*r, encoding);
        if (!body.ok()) {
          return reply(error(body.status().with_context(fmt::format("model \"{}\"", r->model))));
        }
        HttpResponse resp;
        resp.body = std::move(body->body);
        resp.inference_header_length = body->json_size;
        if (body->json_size) resp.content_type = "application/octet-stream";
        reply(std::move(resp));
      });
}

}  // namespace kiln::server::http
