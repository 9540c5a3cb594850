// SPDX-License-Identifier: Apache-2.0
// The gRPC transport over real loopback sockets, driven by GrpcClient and by the raw generated
// stub: every rpc, raw and typed contents, every bad input with its code, many client threads.
#include "server/grpc/grpc_server.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "client/client_test_util.h"
#include "client/grpc_client.h"
#include "client/native_client.h"
#include "grpc_predict_v2.grpc.pb.h"
#include "server/core/test_certificates.h"
#include "server/core/test_repository.h"

namespace kiln::server::grpc {
namespace {

namespace fs = std::filesystem;
using client::GrpcClient;

using client::testing::request;

Tensor image(uint32_t seed) {
  return testing::random_image(1, seed);
}

// The status code and a part of the message a call must fail with.
template <class R>
void expect_error(const R& result, StatusCode code, std::string_view part) {
  Status s;
  if constexpr (std::is_same_v<R, Status>) {
    s = result;
  } else {
    s = result.status();
  }
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(part), std::string_view::npos)
      << "expected \"" << part << "\" in: " << s.message();
}

class GrpcTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(testing::make_test_repository("grpc"));
    fs::remove_all(*root_ / "broken");
    testing::add_model(*root_, "tiny_queue",
                       "backend = \"echo\"\nmax_batch_size = 8\n[dynamic_batching]\n"
                       "max_queue_delay_microseconds = 300000\nmax_queue_size = 1\n");
    testing::add_model(*root_, "spare", "backend = \"echo\"\n");
    ServerOptions so{*root_, true, {}};
    so.model_control = ModelControl::kExplicit;  // the tests load and unload over the network
    auto s = Server::create(so);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    server_ = std::move(s).value().release();
    GrpcServerOptions o;
    o.address = "127.0.0.1";
    o.port = 0;
    o.max_message_bytes = 1 << 20;
    o.limits.max_elements = 1 << 20;
    auto g = GrpcServer::start(server_, o);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    grpc_ = std::move(g).value().release();
  }
  static void TearDownTestSuite() {
    server_->shutdown();
    delete grpc_;
    delete server_;
    fs::remove_all(*root_);
    delete root_;
  }
  static std::string target() { return "127.0.0.1:" + std::to_string(grpc_->port()); }
  static std::unique_ptr<GrpcClient> client(client::GrpcClientOptions o = {}) {
    auto c = GrpcClient::create(target(), o);
    EXPECT_TRUE(c.ok());
    return std::move(c).value();
  }
  static std::unique_ptr<inference::GRPCInferenceService::Stub> stub() {
    return inference::GRPCInferenceService::NewStub(
        ::grpc::CreateChannel(target(), ::grpc::InsecureChannelCredentials()));
  }
  // One ModelInfer through the raw stub.
  static Status raw_infer(const inference::ModelInferRequest& r,
                          inference::ModelInferResponse* out = nullptr) {
    ::grpc::ClientContext context;
    inference::ModelInferResponse response;
    return from_grpc_status(stub()->ModelInfer(&context, r, out ? out : &response));
  }

  static Server* server_;
  static GrpcServer* grpc_;
  static fs::path* root_;
};
Server* GrpcTest::server_ = nullptr;
GrpcServer* GrpcTest::grpc_ = nullptr;
fs::path* GrpcTest::root_ = nullptr;

TEST_F(GrpcTest, HealthMetadataRepositoryAndWorkers) {
  auto c = client();
  EXPECT_EQ(c->server_live().value(), true);
  EXPECT_EQ(c->server_ready().value(), true);
  ASSERT_TRUE(c->wait_until_server_ready().ok());
  ServerMetadata sm = c->server_metadata().value();
  EXPECT_EQ(sm.name, "kiln");
  EXPECT_EQ(c->model_ready("mnist").value(), true);
  EXPECT_EQ(c->model_ready("mnist", "1").value(), true);
  expect_error(c->model_ready("nope"), StatusCode::kNotFound, "\"nope\"");
  expect_error(c->model_ready("mnist", "7"), StatusCode::kNotFound, "no version 7");
  ModelMetadata mm = c->model_metadata("mnist").value();
  EXPECT_EQ(mm.name, "mnist");
  EXPECT_EQ(mm.versions, std::vector<std::string>{"1"});
  ASSERT_EQ(mm.inputs.size(), 1u);
  EXPECT_EQ(mm.inputs[0].name, "image");
  EXPECT_EQ(mm.inputs[0].dtype, DType::kF32);
  EXPECT_EQ(mm.inputs[0].shape, (std::vector<int64_t>{-1, 1, 28, 28}));
  ASSERT_EQ(mm.outputs.size(), 1u);
  EXPECT_EQ(mm.outputs[0].shape, (std::vector<int64_t>{-1, 10}));
  expect_error(c->model_metadata("nope"), StatusCode::kNotFound, "\"nope\"");

  // The repository extension: index, unload, load.
  ::grpc::ClientContext ctx;
  inference::RepositoryIndexRequest ir;
  inference::RepositoryIndexResponse index;
  ASSERT_TRUE(stub()->RepositoryIndex(&ctx, ir, &index).ok());
  bool found = false;
  for (const auto& m : index.models()) {
    if (m.name() == "mnist") found = m.state() == "READY" && m.version() == "1";
  }
  EXPECT_TRUE(found) << index.DebugString();
  ASSERT_TRUE(c->model_unload("spare").ok());
  EXPECT_EQ(c->model_ready("spare").value(), false);
  expect_error(c->model_infer("spare", request({{"x", Tensor::from_vector<int32_t>({1}), {}}})),
               StatusCode::kUnavailable, "\"spare\" is not ready");
  ASSERT_TRUE(c->model_load("spare").ok());
  EXPECT_EQ(c->model_ready("spare").value(), true);
  expect_error(c->model_load("nope"), StatusCode::kNotFound, "not in the repository");
  ::grpc::ClientContext ctx2;
  inference::RepositoryModelLoadRequest lr;
  lr.set_model_name("spare");
  (*lr.mutable_parameters())["file:1/model.onnx"].set_bytes_param("abc");
  inference::RepositoryModelLoadResponse lresp;
  expect_error(from_grpc_status(stub()->RepositoryModelLoad(&ctx2, lr, &lresp)),
               StatusCode::kInvalidArgument, "bytes parameters");

  // The statistics extension: the requests above show up in mnist's counts.
  ASSERT_TRUE(c->model_infer("mnist", request({{"image", image(2), {}}})).ok());
  ::grpc::ClientContext ctx3;
  inference::ModelStatisticsRequest sr;
  sr.set_name("mnist");
  inference::ModelStatisticsResponse stats;
  ASSERT_TRUE(stub()->ModelStatistics(&ctx3, sr, &stats).ok());
  ASSERT_EQ(stats.model_stats_size(), 1);
  EXPECT_EQ(stats.model_stats(0).version(), "1");
  EXPECT_GE(stats.model_stats(0).inference_count(), 1u);
  EXPECT_GE(stats.model_stats(0).inference_stats().success().count(), 1u);
  EXPECT_GT(stats.model_stats(0).inference_stats().compute_infer().ns(), 0u);
  EXPECT_GE(stats.model_stats(0).batch_stats_size(), 1);
  ::grpc::ClientContext ctx4;
  sr.set_name("nope");
  expect_error(from_grpc_status(stub()->ModelStatistics(&ctx4, sr, &stats)), StatusCode::kNotFound,
               "nope");

  // amdinfer's workers: load the compiler backend on the tiny CNN, infer, unload.
  Parameters p;
  p.set("model", "mnist/1/model.onnx");  // relative to the repository
  p.set("batch", int64_t{2});
  p.set("target", std::string("cpu"));
  Result<std::string> endpoint = c->worker_load("compiler", p);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status().to_string();
  Result<InferenceResponse> r = c->model_infer(*endpoint, request({{"image", image(1), {}}}));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->outputs.at(0).data.shape(), (Shape{1, 10}));
  ASSERT_TRUE(c->worker_unload(*endpoint).ok());
  expect_error(c->worker_load("tensorflow"), StatusCode::kNotFound, "tensorflow");
}

TEST_F(GrpcTest, RawAndTypedContentsGiveTheInProcessResult) {
  client::NativeClient native(server_);
  Tensor img = image(7);
  Result<InferenceResponse> want = native.model_infer("mnist", request({{"image", img, {}}}));
  ASSERT_TRUE(want.ok());
  for (bool raw_in : {true, false}) {
    for (bool raw_out : {true, false}) {
      client::GrpcClientOptions o;
      o.raw_inputs = raw_in;
      o.raw_outputs = raw_out;
      auto c = client(o);
      Result<InferenceResponse> got = c->model_infer("mnist", request({{"image", img, {}}}, "q"));
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_EQ(got->model, "mnist");
      EXPECT_EQ(got->version, "1");
      EXPECT_EQ(got->id, "q");
      ASSERT_EQ(got->outputs.size(), 1u);
      EXPECT_EQ(got->outputs[0].name, want->outputs[0].name);
      EXPECT_TRUE(got->outputs[0].data.equals(want->outputs[0].data)) << raw_in << raw_out;
    }
  }
  // Every dtype round-trips through echo both ways, BYTES and FP16 included.
  std::vector<InferTensor> inputs;
  inputs.push_back({"f32", Tensor::from_vector<float>({1.5f, -2.f, 3.25f}), {}});
  inputs.push_back({"f64", Tensor::from_vector<double>({1e300, -0.5}), {}});
  inputs.push_back({"i8", Tensor::from_vector<int8_t>({-128, 0, 127}), {}});
  inputs.push_back({"u16", Tensor::from_vector<uint16_t>({0, 65535}), {}});
  inputs.push_back({"i64", Tensor::from_vector<int64_t>({int64_t{1} << 62, -3}), {}});
  inputs.push_back({"u64", Tensor::from_vector<uint64_t>({~uint64_t{0}, 4}), {}});
  Tensor flags(DType::kBool, Shape{3});
  flags.data<bool>()[0] = flags.data<bool>()[2] = true;
  inputs.push_back({"b", flags, {}});
  inputs.push_back(
      {"s", Tensor::from_vector<std::string>({"", "héllo", std::string(3, '\0')}), {}});
  Tensor half(DType::kF16, Shape{2, 2});
  for (size_t i = 0; i < half.nbytes(); ++i)
    static_cast<uint8_t*>(half.raw_data())[i] = static_cast<uint8_t>(i * 17);
  inputs.push_back({"h", half, {}});
  for (bool raw : {true, false}) {
    client::GrpcClientOptions o;
    o.raw_inputs = o.raw_outputs = raw;
    auto c = client(o);
    Result<InferenceResponse> got = c->model_infer("echo", request(inputs));
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_EQ(got->outputs.size(), inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      EXPECT_EQ(got->outputs[i].name, inputs[i].name);
      EXPECT_TRUE(got->outputs[i].data.equals(inputs[i].data)) << inputs[i].name << " " << raw;
    }
  }
  // Asking for one output typed and the rest raw.
  inference::ModelInferRequest r;
  r.set_model_name("echo");
  auto* in = r.add_inputs();
  in->set_name("x");
  in->set_datatype("INT32");
  in->add_shape(2);
  in->mutable_contents()->add_int_contents(5);
  in->mutable_contents()->add_int_contents(-6);
  auto* out = r.add_outputs();
  out->set_name("x");
  (*out->mutable_parameters())["binary_data"].set_bool_param(false);
  inference::ModelInferResponse resp;
  ASSERT_TRUE(raw_infer(r, &resp).ok());
  ASSERT_EQ(resp.outputs_size(), 1);
  EXPECT_EQ(resp.raw_output_contents_size(), 0);
  EXPECT_EQ(resp.outputs(0).contents().int_contents_size(), 2);
  EXPECT_EQ(resp.outputs(0).contents().int_contents(1), -6);
}

TEST_F(GrpcTest, EveryBadInputGetsItsCodeAndAClearMessage) {
  auto c = client();
  auto mnist_input = [](std::string name, std::string dtype, std::vector<int64_t> shape,
                        std::string raw) {
    inference::ModelInferRequest r;
    r.set_model_name("mnist");
    auto* in = r.add_inputs();
    in->set_name(std::move(name));
    in->set_datatype(std::move(dtype));
    for (int64_t d : shape) in->add_shape(d);
    r.add_raw_input_contents(std::move(raw));
    return r;
  };
  const std::string good(3136, '\0');
  expect_error(c->model_infer("nope", request({{"x", Tensor::from_vector<int32_t>({1}), {}}})),
               StatusCode::kNotFound, "model \"nope\" does not exist");
  inference::ModelInferRequest r = mnist_input("image", "FP32", {1, 1, 28, 28}, good);
  r.set_model_version("7");
  expect_error(raw_infer(r), StatusCode::kNotFound, "no version 7");
  expect_error(raw_infer(mnist_input("img", "FP32", {1, 1, 28, 28}, good)),
               StatusCode::kInvalidArgument, "has no input \"img\"");
  expect_error(raw_infer(mnist_input("image", "INT32", {1, 1, 28, 28}, good)),
               StatusCode::kInvalidArgument, "expected FP32, got INT32");
  expect_error(raw_infer(mnist_input("image", "FP32", {1, 28, 28, 4}, std::string(12544, '\0'))),
               StatusCode::kInvalidArgument, "image");
  expect_error(raw_infer(mnist_input("image", "FP32", {1, 1, 28, 28}, good.substr(4))),
               StatusCode::kInvalidArgument, "raw contents hold 3132 bytes, but shape");
  expect_error(raw_infer(mnist_input("image", "FLOAT", {1, 1, 28, 28}, good)),
               StatusCode::kInvalidArgument, "datatype \"FLOAT\" is not one of");
  expect_error(raw_infer(mnist_input("image", "FP32", {1, -1, 28, 28}, good)),
               StatusCode::kInvalidArgument, "negative dim");
  r = mnist_input("image", "FP32", {1, 1, 28, 28}, good);
  r.add_raw_input_contents("x");
  expect_error(raw_infer(r), StatusCode::kInvalidArgument, "2 raw_input_contents for 1 inputs");
  r = mnist_input("image", "FP32", {1, 1, 28, 28}, good);
  r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1.f);
  expect_error(raw_infer(r), StatusCode::kInvalidArgument, "both typed contents and raw");
  r = mnist_input("image", "FP32", {1, 1, 28, 28}, good);
  r.clear_raw_input_contents();
  r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1.f);
  expect_error(raw_infer(r), StatusCode::kInvalidArgument,
               "needs 784 elements in fp32_contents, but the contents hold 1");
  // issue 28: FP32 elements sent in int_contents are named where they are, not miscounted
  // ("needs 784 ... but the contents hold 784").
  r = mnist_input("image", "FP32", {1, 1, 28, 28}, good);
  r.clear_raw_input_contents();
  for (int i = 0; i < 784; ++i) r.mutable_inputs(0)->mutable_contents()->add_int_contents(i);
  expect_error(raw_infer(r), StatusCode::kInvalidArgument,
               "needs 784 elements in fp32_contents, but fp32_contents holds 0 and the contents "
               "are in int_contents (784); FP32 elements go in fp32_contents");
  r.mutable_inputs(0)->set_datatype("FP16");
  expect_error(raw_infer(r), StatusCode::kInvalidArgument, "send it in raw_input_contents");
  r = mnist_input("image", "FP32", {1, 1, 28, 28}, good);
  r.add_outputs()->set_name("nope");
  expect_error(raw_infer(r), StatusCode::kInvalidArgument, "no output \"nope\"");
  r = mnist_input("image", "FP32", {1, 1, 28, 28}, good);
  (*r.mutable_parameters())["binary_data_output"].set_string_param("yes");
  expect_error(raw_infer(r), StatusCode::kInvalidArgument, "binary_data_output");
  // BYTES raw contents whose length prefixes disagree with the bytes.
  inference::ModelInferRequest b;
  b.set_model_name("echo");
  auto* in = b.add_inputs();
  in->set_name("s");
  in->set_datatype("BYTES");
  in->add_shape(1);
  b.add_raw_input_contents(std::string("\x09\0\0\0abc", 7));
  expect_error(raw_infer(b), StatusCode::kInvalidArgument, "says 9 bytes but only 3 remain");
  // A large BYTES shape with no data is refused before anything is allocated.
  in->clear_shape();
  in->add_shape(1 << 20);
  b.set_raw_input_contents(0, "abcd");
  expect_error(raw_infer(b), StatusCode::kInvalidArgument, "needs at least 4194304");
  b.clear_raw_input_contents();
  expect_error(raw_infer(b), StatusCode::kInvalidArgument,
               "needs 1048576 elements in bytes_contents, but the contents hold 0");
  // Too many elements, and a message over the server's 1 MiB limit.
  expect_error(raw_infer(mnist_input("x", "FP32", {1 << 20, 2}, "")),
               StatusCode::kResourceExhausted, "elements a tensor may have");
  expect_error(raw_infer(mnist_input("image", "FP32", {1, 1, 28, 28}, std::string(2 << 20, 'a'))),
               StatusCode::kResourceExhausted, "larger than max");
  // A message sent as bytes (read like any other), and bytes that are not a ModelInferRequest.
  const std::string model_ech = std::string("\x0a\x03") + "ech";  // model_name = "ech"
  for (const std::string& garbage : {model_ech, std::string("\xff\xff\xff\xff garbage")}) {
    auto channel = ::grpc::CreateChannel(target(), ::grpc::InsecureChannelCredentials());
    ::grpc::GenericStub generic(channel);
    ::grpc::ClientContext ctx;
    ::grpc::Slice slice(garbage);
    ::grpc::ByteBuffer send(&slice, 1), received;
    std::promise<::grpc::Status> done;
    generic.UnaryCall(&ctx, "/inference.GRPCInferenceService/ModelInfer", ::grpc::StubOptions(),
                      &send, &received, [&](::grpc::Status s) { done.set_value(s); });
    ::grpc::Status s = done.get_future().get();
    if (garbage[0] == '\x0a') {
      EXPECT_EQ(s.error_code(), ::grpc::StatusCode::NOT_FOUND) << s.error_message();
    } else {
      EXPECT_EQ(s.error_code(), ::grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
      EXPECT_NE(s.error_message().find("is not a valid inference.ModelInferRequest"),
                std::string::npos)
          << s.error_message();
    }
  }
  // A full queue, then a request whose deadline ends before the batch delay.
  auto c2 = client();
  std::future<Result<InferenceResponse>> first =
      c->model_infer_async("tiny_queue", request({{"x", Tensor::from_vector<int32_t>({1}), {}}}));
  // Waits until the server holds the first request (on a busy machine it may take a while).
  for (int i = 0; i < 200; ++i) {
    Result<std::vector<ModelStatistics>> stats = server_->statistics("tiny_queue");
    if (stats.ok() && !stats->empty() && stats->front().pending == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  expect_error(
      c2->model_infer("tiny_queue", request({{"x", Tensor::from_vector<int32_t>({2}), {}}})),
      StatusCode::kResourceExhausted, "queue is full");
  ASSERT_TRUE(first.get().ok());
  InferenceRequest late = request({{"x", Tensor::from_vector<int32_t>({3}), {}}});
  late.parameters.set("timeout", int64_t{1000});
  expect_error(c2->model_infer("tiny_queue", late), StatusCode::kDeadlineExceeded,
               "past its timeout");
  client::GrpcClientOptions short_deadline;
  short_deadline.timeout = std::chrono::milliseconds(100);
  expect_error(
      client(short_deadline)
          ->model_infer("tiny_queue", request({{"x", Tensor::from_vector<int32_t>({4}), {}}})),
      StatusCode::kDeadlineExceeded, "");
  // The server is still there, answering correctly.
  EXPECT_EQ(c->model_ready("mnist").value(), true);
}

TEST_F(GrpcTest, NoServerIsUnavailable) {
  expect_error(GrpcClient::create("http://127.0.0.1:1"), StatusCode::kInvalidArgument,
               "not host:port");
  client::GrpcClientOptions o;
  o.timeout = std::chrono::milliseconds(2000);
  auto c = GrpcClient::create("127.0.0.1:1", o).value();
  Result<bool> live = c->server_live();
  EXPECT_FALSE(live.ok());
  EXPECT_TRUE(live.status().code() == StatusCode::kUnavailable ||
              live.status().code() == StatusCode::kDeadlineExceeded)
      << live.status().to_string();
  // A second server on a taken port fails naming the address.
  GrpcServerOptions taken;
  taken.address = "127.0.0.1";
  taken.port = grpc_->port();
  expect_error(GrpcServer::start(server_, taken), StatusCode::kUnavailable, "cannot listen on");
}

TEST_F(GrpcTest, ThirtyTwoClientsEachGetTheirOwnAnswers) {
  // Half the threads share one channel, the other half have their own; half send raw contents.
  std::shared_ptr<client::Client> shared = client();
  client::testing::expect_every_client_gets_its_own_answers(
      server_, 32, 200, 2000, [&](int t) -> std::shared_ptr<client::Client> {
        if (t % 2 == 0) return shared;
        client::GrpcClientOptions o;
        o.raw_inputs = o.raw_outputs = (t % 4 < 2);
        return client(o);
      });
}

// --restricted-api over gRPC: the metadata entry is checked like the HTTP header.
TEST(GrpcRestrictedApi, EndpointGroupsNeedTheirMetadata) {
  const fs::path root =
      fs::temp_directory_path() / ("kiln_grpc_restricted_" + std::to_string(::getpid()));
  fs::remove_all(root);
  testing::add_model(root, "echo", "backend = \"echo\"\n");
  ServerOptions so;
  so.repository = root;
  so.model_control = ModelControl::kExplicit;
  so.access = AccessPolicy::parse({"inference,model-repository:x-api-key=k1"}).value();
  auto server = Server::create(so).value();
  GrpcServerOptions o;
  o.address = "127.0.0.1";
  o.port = 0;
  auto g = GrpcServer::start(server.get(), o).value();
  const std::string target = "127.0.0.1:" + std::to_string(g->port());
  auto anonymous = client::GrpcClient::create(target).value();
  EXPECT_TRUE(anonymous->server_ready().value());  // health stays open
  Result<InferenceResponse> refused =
      anonymous->model_infer("echo", request({{"x", Tensor::from_vector<int32_t>({1}), {}}}));
  expect_error(refused.status(), StatusCode::kUnauthenticated,
               "inference endpoints need the header \"x-api-key\"");
  expect_error(anonymous->model_unload("echo"), StatusCode::kUnauthenticated, "model-repository");
  client::GrpcClientOptions keyed;
  keyed.metadata = {{"x-api-key", "k1"}};
  auto c = client::GrpcClient::create(target, keyed).value();
  Result<InferenceResponse> r =
      c->model_infer("echo", request({{"x", Tensor::from_vector<int32_t>({5}), {}}}));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->outputs[0].data.data<int32_t>()[0], 5);
  EXPECT_TRUE(c->model_unload("echo").ok());
  server->shutdown();
  g->stop();
  fs::remove_all(root);
}

// gRPC over TLS (grpc::SslServerCredentials) and mutual TLS, with the C++ GrpcClient.
TEST(GrpcTls, ServesTlsAndMutualTls) {
  const fs::path root = fs::temp_directory_path() / ("kiln_grpc_tls_" + std::to_string(::getpid()));
  fs::remove_all(root);
  testing::TestCertificates certs;
  ASSERT_TRUE(testing::make_test_certificates(root / "certs", &certs));
  testing::add_model(root / "repo", "echo", "backend = \"echo\"\n");
  ServerOptions so;
  so.repository = root / "repo";
  auto server = Server::create(so).value();
  for (bool mutual : {false, true}) {
    SCOPED_TRACE(mutual ? "mutual TLS" : "TLS");
    GrpcServerOptions o;
    o.address = "127.0.0.1";
    o.port = 0;
    o.tls = {certs.server_cert.string(), certs.server_key.string(),
             mutual ? certs.ca.string() : ""};
    auto g = GrpcServer::start(server.get(), o);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const std::string target = "127.0.0.1:" + std::to_string((*g)->port());
    client::GrpcClientOptions plain;
    plain.timeout = std::chrono::seconds(3);
    EXPECT_FALSE(client::GrpcClient::create(target, plain).value()->server_ready().ok());
    client::GrpcClientOptions trusting = plain;
    trusting.tls_ca_file = certs.ca.string();
    Result<bool> one_way = client::GrpcClient::create(target, trusting).value()->server_ready();
    EXPECT_EQ(one_way.ok(), !mutual) << one_way.status().to_string();
    client::GrpcClientOptions with_cert = trusting;
    with_cert.tls_cert_file = certs.client_cert.string();
    with_cert.tls_key_file = certs.client_key.string();
    auto c = client::GrpcClient::create(target, with_cert).value();
    ASSERT_TRUE(c->server_ready().value_or(false));
    Result<InferenceResponse> r =
        c->model_infer("echo", request({{"x", Tensor::from_vector<int32_t>({9}), {}}}));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->outputs[0].data.data<int32_t>()[0], 9);
    (*g)->stop();
  }
  server->shutdown();
  fs::remove_all(root);
}

}  // namespace
}  // namespace kiln::server::grpc
