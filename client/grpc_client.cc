// SPDX-License-Identifier: Apache-2.0
// GrpcClient: each call is one unary rpc on a shared channel; model_infer_async uses gRPC's
// callback stub, so no client thread waits on an answer.
#include "client/grpc_client.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/client_callback.h>

#include "core/mapped_file.h"
#include "grpc_predict_v2.grpc.pb.h"
#include "server/grpc/grpc_convert.h"

namespace kiln::client {

namespace sg = server::grpc;

struct GrpcClient::Stubs {
  std::unique_ptr<inference::GRPCInferenceService::Stub> inference;
  std::unique_ptr<inference::KilnWorkerService::Stub> workers;
  // ModelInfer called with the message's bytes (sg::encode_request_bytes), so that input tensors
  // are sent from their own storage rather than copied into the message and again into its bytes.
  std::unique_ptr<::grpc::internal::RpcMethod> model_infer;
};

namespace {

// The server's error, or unavailable naming the target when there is no server.
Status call_status(const ::grpc::Status& status, const std::string& target) {
  if (status.ok()) return Status();
  if (status.error_code() == ::grpc::StatusCode::UNAVAILABLE &&
      status.error_message().find("failed to connect") != std::string::npos) {
    return unavailable_error(
        fmt::format("grpc server {} cannot be reached: {}", target, status.error_message()));
  }
  // GrpcClient never cancels a call, so a cancelled one was refused by a server that is shutting
  // down (gRPC cancels the calls that race with its shutdown): the server is not there.
  if (status.error_code() == ::grpc::StatusCode::CANCELLED) {
    return unavailable_error(
        fmt::format("grpc server {} cancelled the call (is it shutting down?)", target));
  }
  return sg::from_grpc_status(status);
}

// A ModelInfer answer's bytes as the response (its raw outputs moved, not copied, into tensors).
Result<InferenceResponse> decode_answer(::grpc::ByteBuffer& answer) {
  inference::ModelInferResponse response;
  ::grpc::Status parsed =
      ::grpc::SerializationTraits<inference::ModelInferResponse>::Deserialize(&answer, &response);
  if (!parsed.ok()) {
    return internal_error(
        fmt::format("the server's ModelInfer answer is not a valid "
                    "inference.ModelInferResponse: {}",
                    parsed.error_message()));
  }
  return sg::decode_response(response);
}

// The call's deadline and the metadata every call carries.
void prepare(::grpc::ClientContext& context, const GrpcClientOptions& options) {
  context.set_deadline(std::chrono::system_clock::now() + options.timeout);
  for (const auto& [key, value] : options.metadata) context.AddMetadata(key, value);
}

}  // namespace

Result<std::unique_ptr<GrpcClient>> GrpcClient::create(const std::string& url,
                                                       GrpcClientOptions options) {
  std::string target = url;
  if (target.rfind("grpc://", 0) == 0) target = target.substr(7);
  if (target.empty() || target.find("://") != std::string::npos ||
      target.find(':') == std::string::npos) {
    return invalid_argument_error(
        fmt::format("grpc url \"{}\" is not host:port (for example 127.0.0.1:8001)", url));
  }
  std::unique_ptr<GrpcClient> client(new GrpcClient(std::move(target), options));
  KILN_RETURN_IF_ERROR(client->connect());
  return client;
}

Status GrpcClient::connect() {
  ::grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options_.max_message_bytes);
  args.SetMaxSendMessageSize(options_.max_message_bytes);
  if (options_.own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<::grpc::ChannelCredentials> credentials = ::grpc::InsecureChannelCredentials();
  if (options_.tls || !options_.tls_ca_file.empty()) {
    ::grpc::SslCredentialsOptions ssl;
    for (auto [path, out] : {std::pair{&options_.tls_ca_file, &ssl.pem_root_certs},
                             std::pair{&options_.tls_cert_file, &ssl.pem_cert_chain},
                             std::pair{&options_.tls_key_file, &ssl.pem_private_key}}) {
      if (path->empty()) continue;
      KILN_ASSIGN_OR_RETURN(*out, read_file(*path));
    }
    credentials = ::grpc::SslCredentials(ssl);
  }
  channel_ = ::grpc::CreateCustomChannel(target_, credentials, args);
  stubs_->inference = inference::GRPCInferenceService::NewStub(channel_);
  stubs_->workers = inference::KilnWorkerService::NewStub(channel_);
  stubs_->model_infer = std::make_unique<::grpc::internal::RpcMethod>(
      "/inference.GRPCInferenceService/ModelInfer", ::grpc::internal::RpcMethod::NORMAL_RPC,
      channel_);
  return Status();
}

GrpcClient::GrpcClient(std::string target, GrpcClientOptions options)
    : target_(std::move(target)), options_(options), stubs_(std::make_unique<Stubs>()) {}

GrpcClient::~GrpcClient() = default;

Result<bool> GrpcClient::server_live() {
  ::grpc::ClientContext context;
  prepare(context, options_);
  inference::ServerLiveResponse response;
  KILN_RETURN_IF_ERROR(call_status(
      stubs_->inference->ServerLive(&context, inference::ServerLiveRequest(), &response), target_));
  return response.live();
}

Result<bool> GrpcClient::server_ready() {
  ::grpc::ClientContext context;
  prepare(context, options_);
  inference::ServerReadyResponse response;
  KILN_RETURN_IF_ERROR(call_status(
      stubs_->inference->ServerReady(&context, inference::ServerReadyRequest(), &response),
      target_));
  return response.ready();
}

Result<ServerMetadata> GrpcClient::server_metadata() {
  ::grpc::ClientContext context;
  prepare(context, options_);
  inference::ServerMetadataResponse response;
  KILN_RETURN_IF_ERROR(call_status(
      stubs_->inference->ServerMetadata(&context, inference::ServerMetadataRequest(), &response),
      target_));
  ServerMetadata m;
  m.name = response.name();
  m.version = response.version();
  m.extensions.assign(response.extensions().begin(), response.extensions().end());
  return m;
}

Result<bool> GrpcClient::model_ready(const std::string& model, const std::string& version) {
  ::grpc::ClientContext context;
  prepare(context, options_);
  inference::ModelReadyRequest request;
  request.set_name(model);
  request.set_version(version);
  inference::ModelReadyResponse response;
  KILN_RETURN_IF_ERROR(
      call_status(stubs_->inference->ModelReady(&context, request, &response), target_));
  return response.ready();
}

Result<ModelMetadata> GrpcClient::model_metadata(const std::string& model,
                                                 const std::string& version) {
  ::grpc::ClientContext context;
  prepare(context, options_);
  inference::ModelMetadataRequest request;
  request.set_name(model);
  request.set_version(version);
  inference::ModelMetadataResponse response;
  KILN_RETURN_IF_ERROR(
      call_status(stubs_->inference->ModelMetadata(&context, request, &response), target_));
  ModelMetadata m;
  m.name = response.name();
  m.versions.assign(response.versions().begin(), response.versions().end());
  m.platform = response.platform();
  auto read = [&](const auto& in, std::vector<server::TensorMetadata>& out) -> Status {
    for (const auto& t : in) {
      std::optional<DType> dtype = server::parse_wire_dtype(t.datatype());
      if (!dtype) {
        return invalid_argument_error(fmt::format(
            "model metadata: tensor \"{}\" has unknown datatype \"{}\"", t.name(), t.datatype()));
      }
      out.push_back({t.name(), *dtype, std::vector<int64_t>(t.shape().begin(), t.shape().end())});
    }
    return Status();
  };
  KILN_RETURN_IF_ERROR(read(response.inputs(), m.inputs));
  KILN_RETURN_IF_ERROR(read(response.outputs(), m.outputs));
  return m;
}

Status GrpcClient::model_load(const std::string& model, const Parameters& parameters) {
  ::grpc::ClientContext context;
  prepare(context, options_);
  inference::RepositoryModelLoadRequest request;
  request.set_model_name(model);
  for (const auto& [key, value] : parameters.values()) {
    inference::ModelRepositoryParameter& p = (*request.mutable_parameters())[key];
    if (const bool* b = std::get_if<bool>(&value)) {
      p.set_bool_param(*b);
    } else if (const int64_t* i = std::get_if<int64_t>(&value)) {
      p.set_int64_param(*i);
    } else {
      // The protocol has no double repository parameter; a double travels as its text.
      p.set_string_param(server::parameter_to_string(value));
    }
  }
  inference::RepositoryModelLoadResponse response;
  return call_status(stubs_->inference->RepositoryModelLoad(&context, request, &response), target_);
}

Status GrpcClient::model_unload(const std::string& model) {
  ::grpc::ClientContext context;
  prepare(context, options_);
  inference::RepositoryModelUnloadRequest request;
  request.set_model_name(model);
  inference::RepositoryModelUnloadResponse response;
  return call_status(stubs_->inference->RepositoryModelUnload(&context, request, &response),
                     target_);
}

Result<std::string> GrpcClient::worker_load(const std::string& worker,
                                            const Parameters& parameters) {
  ::grpc::ClientContext context;
  prepare(context, options_);
  inference::WorkerLoadRequest request;
  request.set_worker(worker);
  for (const auto& [key, value] : parameters.values()) {
    sg::to_infer_parameter(value, &(*request.mutable_parameters())[key]);
  }
  inference::WorkerLoadResponse response;
  KILN_RETURN_IF_ERROR(
      call_status(stubs_->workers->WorkerLoad(&context, request, &response), target_));
  return response.endpoint();
}

Status GrpcClient::worker_unload(const std::string& endpoint) {
  ::grpc::ClientContext context;
  prepare(context, options_);
  inference::WorkerUnloadRequest request;
  request.set_endpoint(endpoint);
  inference::WorkerUnloadResponse response;
  return call_status(stubs_->workers->WorkerUnload(&context, request, &response), target_);
}

Result<InferenceResponse> GrpcClient::model_infer(const std::string& model,
                                                  InferenceRequest request) {
  // The blocking stub answers on this thread (no hand-off to a callback thread and back).
  if (!model.empty()) request.model = model;
  ::grpc::ClientContext context;
  prepare(context, options_);
  const ::grpc::ByteBuffer message =
      sg::encode_request_bytes(request, options_.raw_inputs, options_.raw_outputs);
  ::grpc::ByteBuffer answer;
  KILN_RETURN_IF_ERROR(
      call_status(::grpc::internal::BlockingUnaryCall(channel_.get(), *stubs_->model_infer,
                                                      &context, message, &answer),
                  target_));
  return decode_answer(answer);
}

std::future<Result<InferenceResponse>> GrpcClient::model_infer_async(const std::string& model,
                                                                     InferenceRequest request) {
  if (!model.empty()) request.model = model;
  // Everything the call needs lives until its callback has run.
  struct Call {
    ::grpc::ClientContext context;
    ::grpc::ByteBuffer request;
    ::grpc::ByteBuffer answer;
    std::promise<Result<InferenceResponse>> promise;
  };
  auto call = std::make_shared<Call>();
  prepare(call->context, options_);
  call->request = sg::encode_request_bytes(request, options_.raw_inputs, options_.raw_outputs);
  std::future<Result<InferenceResponse>> future = call->promise.get_future();
  ::grpc::internal::CallbackUnaryCall(channel_.get(), *stubs_->model_infer, &call->context,
                                      &call->request, &call->answer,
                                      [call, target = target_](::grpc::Status status) {
                                        Status s = call_status(status, target);
                                        if (!s.ok()) {
                                          call->promise.set_value(s);
                                          return;
                                        }
                                        call->promise.set_value(decode_answer(call->answer));
                                      });
  return future;
}

}  // namespace kiln::client
