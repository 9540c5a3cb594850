// SPDX-License-Identifier: Apache-2.0
// GrpcServer: every rpc of the KServe v2 gRPC service translated to and from server/core.
#include "server/grpc/grpc_server.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <mutex>

#include "grpc_predict_v2.grpc.pb.h"

namespace kiln::server::grpc {

namespace {

using ::grpc::CallbackServerContext;
using ::grpc::ServerUnaryReactor;

ServerUnaryReactor* finish(CallbackServerContext* context, const Status& status) {
  ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(to_grpc_status(status));
  return reactor;
}

// The server's AccessPolicy for `group`, read from the call's metadata (gRPC keys are lower case).
Status allowed(const Server* server, CallbackServerContext* context, ApiGroup group) {
  if (server->access().empty()) return Status();
  return server->access().check(group, [&](std::string_view key) -> std::optional<std::string> {
    const auto& metadata = context->client_metadata();
    auto it = metadata.find(::grpc::string_ref(key.data(), key.size()));
    if (it == metadata.end()) return std::nullopt;
    return std::string(it->second.data(), it->second.size());
  });
}

// A repository parameter as a server parameter; bytes (model files sent inline) are refused.
Result<ParameterValue> from_repository_parameter(const inference::ModelRepositoryParameter& p,
                                                 std::string_view key) {
  switch (p.parameter_choice_case()) {
    case inference::ModelRepositoryParameter::kBoolParam: return ParameterValue(p.bool_param());
    case inference::ModelRepositoryParameter::kInt64Param: return ParameterValue(p.int64_param());
    case inference::ModelRepositoryParameter::kStringParam: return ParameterValue(p.string_param());
    case inference::ModelRepositoryParameter::kBytesParam:
      return invalid_argument_error(fmt::format(
          "load parameter \"{}\": bytes parameters (model files sent with the request) are not "
          "supported; put the model in the repository",
          key));
    case inference::ModelRepositoryParameter::PARAMETER_CHOICE_NOT_SET: break;
  }
  return invalid_argument_error(fmt::format("load parameter \"{}\" has no value", key));
}

// Time left until the client's deadline, in microseconds (nullopt when it set none).
std::optional<int64_t> micros_left(const CallbackServerContext* context) {
  std::chrono::system_clock::time_point deadline = context->deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return std::nullopt;
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(
      deadline - std::chrono::system_clock::now());
  return std::max<int64_t>(1, left.count());
}

// A trace for a ModelInfer call to `model`, continuing the W3C trace of the call's metadata; its
// traceparent goes back in the initial metadata. Null when the model's trace level is OFF.
std::shared_ptr<RequestTrace> start_trace(Tracer& tracer, CallbackServerContext* context,
                                          const std::string& model) {
  auto value = [&](std::string_view key) -> std::string_view {
    const auto& metadata = context->client_metadata();
    auto it = metadata.find(::grpc::string_ref(key.data(), key.size()));
    return it == metadata.end() ? std::string_view()
                                : std::string_view(it->second.data(), it->second.size());
  };
  std::shared_ptr<RequestTrace> trace =
      tracer.start(model, {"grpc", "inference.GRPCInferenceService/ModelInfer"},
                   value("traceparent"), value("tracestate"));
  if (trace) {
    trace->add_attribute("rpc.system", std::string("grpc"));
    trace->add_attribute("rpc.service", std::string("inference.GRPCInferenceService"));
    trace->add_attribute("rpc.method", std::string("ModelInfer"));
    context->AddInitialMetadata("traceparent", trace->traceparent());
  }
  return trace;
}

// Ends a traced call's server span with the call's status.
void end_trace(RequestTrace* trace, const ::grpc::Status& status) {
  if (trace != nullptr) {
    trace->finish("rpc.grpc.status_code", status.error_code(), status.error_message());
  }
}

// Every rpc on the callback API; ModelInfer takes the raw bytes so that a message that is not a
// valid ModelInferRequest gets INVALID_ARGUMENT with a message (gRPC itself would answer
// UNIMPLEMENTED with none).
using G = inference::GRPCInferenceService;
using ServiceBase = G::WithCallbackMethod_ServerLive<
    G::WithCallbackMethod_ServerReady<G::WithCallbackMethod_ModelReady<
        G::WithCallbackMethod_ServerMetadata<G::WithCallbackMethod_ModelMetadata<
            G::WithRawCallbackMethod_ModelInfer<G::WithCallbackMethod_ModelStatistics<
                G::WithCallbackMethod_RepositoryIndex<G::WithCallbackMethod_RepositoryModelLoad<
                    G::WithCallbackMethod_RepositoryModelUnload<G::Service>>>>>>>>>>;

class InferenceService final : public ServiceBase {
 public:
  InferenceService(Server* server, GrpcLimits limits) : server_(server), limits_(limits) {}

  ServerUnaryReactor* ServerLive(CallbackServerContext* context,
                                 const inference::ServerLiveRequest*,
                                 inference::ServerLiveResponse* response) override {
    if (Status a = allowed(server_, context, ApiGroup::kHealth); !a.ok()) return finish(context, a);
    response->set_live(server_->live());
    return finish(context, Status());
  }

  ServerUnaryReactor* ServerReady(CallbackServerContext* context,
                                  const inference::ServerReadyRequest*,
                                  inference::ServerReadyResponse* response) override {
    if (Status a = allowed(server_, context, ApiGroup::kHealth); !a.ok()) return finish(context, a);
    response->set_ready(server_->ready());
    return finish(context, Status());
  }

  ServerUnaryReactor* ModelReady(CallbackServerContext* context,
                                 const inference::ModelReadyRequest* request,
                                 inference::ModelReadyResponse* response) override {
    if (Status a = allowed(server_, context, ApiGroup::kHealth); !a.ok()) return finish(context, a);
    Result<bool> ready = server_->model_ready(request->name(), request->version());
    if (ready.ok()) response->set_ready(*ready);
    return finish(context, ready.status());
  }

  ServerUnaryReactor* ServerMetadata(CallbackServerContext* context,
                                     const inference::ServerMetadataRequest*,
                                     inference::ServerMetadataResponse* response) override {
    if (Status a = allowed(server_, context, ApiGroup::kMetadata); !a.ok())
      return finish(context, a);
    server::ServerMetadata m = server_->metadata();
    response->set_name(m.name);
    response->set_version(m.version);
    for (const std::string& e : m.extensions) response->add_extensions(e);
    return finish(context, Status());
  }

  ServerUnaryReactor* ModelMetadata(CallbackServerContext* context,
                                    const inference::ModelMetadataRequest* request,
                                    inference::ModelMetadataResponse* response) override {
    if (Status a = allowed(server_, context, ApiGroup::kMetadata); !a.ok())
      return finish(context, a);
    Result<server::ModelMetadata> m = server_->model_metadata(request->name(), request->version());
    if (!m.ok()) return finish(context, m.status());
    response->set_name(m->name);
    for (const std::string& v : m->versions) response->add_versions(v);
    response->set_platform(m->platform);
    auto add = [](const TensorMetadata& t, inference::ModelMetadataResponse::TensorMetadata* out) {
      out->set_name(t.name);
      out->set_datatype(std::string(wire_dtype_name(t.dtype)));
      for (int64_t d : t.shape) out->add_shape(d);
    };
    for (const TensorMetadata& t : m->inputs) add(t, response->add_inputs());
    for (const TensorMetadata& t : m->outputs) add(t, response->add_outputs());
    return finish(context, Status());
  }

  ServerUnaryReactor* ModelInfer(CallbackServerContext* context,
                                 const ::grpc::ByteBuffer* request_bytes,
                                 ::grpc::ByteBuffer* response_bytes) override {
    if (Status a = allowed(server_, context, ApiGroup::kInference); !a.ok())
      return finish(context, a);
    ServerUnaryReactor* reactor = context->DefaultReactor();
    inference::ModelInferRequest request;
    {
      ::grpc::ByteBuffer bytes(*request_bytes);  // shares the slices
      ::grpc::ProtoBufferReader reader(&bytes);
      if (!request.ParseFromZeroCopyStream(&reader)) {
        reactor->Finish(to_grpc_status(invalid_argument_error(fmt::format(
            "the ModelInfer request ({} bytes) is not a valid inference.ModelInferRequest message",
            request_bytes->Length()))));
        return reactor;
      }
    }
    std::shared_ptr<RequestTrace> trace;
    if (server_->tracer().enabled()) [[unlikely]] {
      trace = start_trace(server_->tracer(), context, request.model_name());
    }
    auto choice = std::make_shared<OutputChoice>();
    Result<InferenceRequest> decoded = decode_request(request, limits_, choice.get());
    if (!decoded.ok()) {
      ::grpc::Status status = to_grpc_status(decoded.status());
      end_trace(trace.get(), status);
      reactor->Finish(status);
      return reactor;
    }
    if (trace) decoded->timeline = trace->timeline();
    // The client's deadline becomes the request's queue timeout unless it set its own.
    if (!decoded->parameters.has("timeout")) {
      if (std::optional<int64_t> left = micros_left(context)) {
        decoded->parameters.set("timeout", *left);
      }
    }
    server_->infer_async(std::move(decoded).value(), [reactor, response_bytes, choice,
                                                      trace](Result<InferenceResponse> result) {
      if (!result.ok()) {
        ::grpc::Status status = to_grpc_status(result.status());
        end_trace(trace.get(), status);
        reactor->Finish(status);
        return;
      }
      inference::ModelInferResponse response;
      encode_response(*result, *choice, &response);
      bool own_buffer = false;
      ::grpc::Status status = ::grpc::SerializationTraits<inference::ModelInferResponse>::Serialize(
          response, response_bytes, &own_buffer);
      end_trace(trace.get(), status);
      reactor->Finish(status);
    });
    return reactor;
  }

  ServerUnaryReactor* ModelStatistics(CallbackServerContext* context,
                                      const inference::ModelStatisticsRequest* request,
                                      inference::ModelStatisticsResponse* response) override {
    if (Status a = allowed(server_, context, ApiGroup::kStatistics); !a.ok())
      return finish(context, a);
    Result<std::vector<server::ModelStatistics>> stats =
        server_->statistics(request->name(), request->version());
    if (!stats.ok()) return finish(context, stats.status());
    auto duration = [](const DurationStat& d, inference::StatisticDuration* out) {
      out->set_count(d.count);
      out->set_ns(d.ns);
    };
    for (const server::ModelStatistics& s : *stats) {
      auto* m = response->add_model_stats();
      m->set_name(s.name);
      m->set_version(s.version);
      m->set_last_inference(s.last_inference_ms);
      m->set_inference_count(s.inference_count);
      m->set_execution_count(s.execution_count);
      auto* is = m->mutable_inference_stats();
      duration(s.success, is->mutable_success());
      duration(s.fail, is->mutable_fail());
      duration(s.queue, is->mutable_queue());
      duration(s.compute, is->mutable_compute_infer());
      for (const auto& [size, d] : s.batch_stats) {
        auto* b = m->add_batch_stats();
        b->set_batch_size(static_cast<uint64_t>(size));
        duration(d, b->mutable_compute_infer());
      }
    }
    return finish(context, Status());
  }

  ServerUnaryReactor* RepositoryIndex(CallbackServerContext* context,
                                      const inference::RepositoryIndexRequest* request,
                                      inference::RepositoryIndexResponse* response) override {
    if (Status a = allowed(server_, context, ApiGroup::kModelRepository); !a.ok())
      return finish(context, a);
    if (!request->repository_name().empty()) {
      return finish(context, not_found_error(fmt::format(
                                 "repository \"{}\" does not exist; kiln serves one repository, "
                                 "leave repository_name empty",
                                 request->repository_name())));
    }
    for (const RepositoryEntry& e : server_->repository_index(request->ready())) {
      auto* m = response->add_models();
      m->set_name(e.name);
      m->set_version(e.version);
      m->set_state(e.state);
      m->set_reason(e.reason);
    }
    return finish(context, Status());
  }

  ServerUnaryReactor* RepositoryModelLoad(CallbackServerContext* context,
                                          const inference::RepositoryModelLoadRequest* request,
                                          inference::RepositoryModelLoadResponse*) override {
    if (Status a = allowed(server_, context, ApiGroup::kModelRepository); !a.ok())
      return finish(context, a);
    Status allowed = server_->model_control_status("RepositoryModelLoad");
    if (!allowed.ok()) return finish(context, allowed);
    Parameters overrides;
    for (const auto& [key, value] : request->parameters()) {
      Result<ParameterValue> v = from_repository_parameter(value, key);
      if (!v.ok()) return finish(context, v.status());
      overrides.set(key, std::move(v).value());
    }
    // Loads block (a compile may take seconds); gRPC runs the next calls on other threads.
    return finish(context, server_->load_model(request->model_name(), overrides));
  }

  ServerUnaryReactor* RepositoryModelUnload(CallbackServerContext* context,
                                            const inference::RepositoryModelUnloadRequest* request,
                                            inference::RepositoryModelUnloadResponse*) override {
    if (Status a = allowed(server_, context, ApiGroup::kModelRepository); !a.ok())
      return finish(context, a);
    Status allowed = server_->model_control_status("RepositoryModelUnload");
    if (!allowed.ok()) return finish(context, allowed);
    return finish(context, server_->unload_model(request->model_name()));
  }

 private:
  Server* const server_;
  const GrpcLimits limits_;
};

class WorkerService final : public inference::KilnWorkerService::CallbackService {
 public:
  explicit WorkerService(Server* server) : server_(server) {}

  ServerUnaryReactor* WorkerLoad(CallbackServerContext* context,
                                 const inference::WorkerLoadRequest* request,
                                 inference::WorkerLoadResponse* response) override {
    if (Status a = allowed(server_, context, ApiGroup::kModelRepository); !a.ok())
      return finish(context, a);
    Status allowed = server_->model_control_status("WorkerLoad");
    if (!allowed.ok()) return finish(context, allowed);
    Parameters parameters;
    for (const auto& [key, value] : request->parameters()) {
      Result<ParameterValue> v =
          from_infer_parameter(value, fmt::format("worker parameter \"{}\"", key));
      if (!v.ok()) return finish(context, v.status());
      parameters.set(key, std::move(v).value());
    }
    Result<std::string> endpoint = server_->load_worker(request->worker(), parameters);
    if (endpoint.ok()) response->set_endpoint(*endpoint);
    return finish(context, endpoint.status());
  }

  ServerUnaryReactor* WorkerUnload(CallbackServerContext* context,
                                   const inference::WorkerUnloadRequest* request,
                                   inference::WorkerUnloadResponse*) override {
    if (Status a = allowed(server_, context, ApiGroup::kModelRepository); !a.ok())
      return finish(context, a);
    Status allowed = server_->model_control_status("WorkerUnload");
    if (!allowed.ok()) return finish(context, allowed);
    return finish(context, server_->unload_worker(request->endpoint()));
  }

 private:
  Server* const server_;
};

}  // namespace

struct GrpcServer::Impl {
  Impl(Server* server, const GrpcServerOptions& options)
      : inference(server, options.limits), workers(server) {}
  InferenceService inference;
  WorkerService workers;
  std::unique_ptr<::grpc::Server> server;
  int port = 0;
  std::once_flag stopped;
};

Result<std::unique_ptr<GrpcServer>> GrpcServer::start(Server* server, GrpcServerOptions options) {
  KILN_CHECK(server != nullptr, "GrpcServer::start without a server");
  if (options.max_message_bytes <= 0 || options.max_message_bytes > INT32_MAX) {
    return invalid_argument_error(fmt::format(
        "grpc max message size {} bytes is outside 1 .. 2147483647", options.max_message_bytes));
  }
  auto impl = std::make_unique<Impl>(server, options);
  const std::string address = options.address.find(':') != std::string::npos
                                  ? fmt::format("[{}]:{}", options.address, options.port)
                                  : fmt::format("{}:{}", options.address, options.port);
  std::shared_ptr<::grpc::ServerCredentials> credentials = ::grpc::InsecureServerCredentials();
  if (options.tls.enabled()) {
    KILN_ASSIGN_OR_RETURN(TlsPem pem, read_tls_files(options.tls));
    ::grpc::SslServerCredentialsOptions ssl(
        pem.client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                              : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = pem.client_ca;
    ssl.pem_key_cert_pairs.push_back({pem.key, pem.cert});
    credentials = ::grpc::SslServerCredentials(ssl);
  }
  ::grpc::ServerBuilder builder;
  builder.AddListeningPort(address, credentials, &impl->port);
  // Without this a second server would silently share the port instead of failing.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  builder.SetMaxSendMessageSize(-1);
  builder.RegisterService(&impl->inference);
  builder.RegisterService(&impl->workers);
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->port == 0) {
    return unavailable_error(fmt::format(
        "grpc server: cannot listen on {} (is the port taken or the address not local?)", address));
  }
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(impl)));
}

GrpcServer::GrpcServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcServer::~GrpcServer() {
  stop();
}

uint16_t GrpcServer::port() const {
  return static_cast<uint16_t>(impl_->port);
}

void GrpcServer::stop(std::chrono::milliseconds grace) {
  std::call_once(impl_->stopped, [&] {
    impl_->server->Shutdown(std::chrono::system_clock::now() + grace);
    impl_->server->Wait();
  });
}

}  // namespace kiln::server::grpc
