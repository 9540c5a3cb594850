// SPDX-License-Identifier: Apache-2.0
// Traces over gRPC: a ModelInfer call's traceparent metadata is continued, the server span comes
// back in the initial metadata, and the spans reach a collector listening in this process.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "grpc_predict_v2.grpc.pb.h"
#include "server/core/test_repository.h"
#include "server/grpc/grpc_server.h"
#include "server/http/otlp_exporter.h"
#include "server/http/test_otlp_collector.h"

namespace kiln::server::grpc {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using testing::ReceivedSpan;
using testing::TestCollector;

constexpr char kTraceId[] = "0af7651916cd43dd8448eb211c80319c";
constexpr char kParentId[] = "b7ad6b7169203331";
const std::string kParent = std::string("00-") + kTraceId + "-" + kParentId + "-01";

class GrpcTracing : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("kiln_grpc_trace_repo_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    testing::add_model(root_, "echo", "backend = \"echo\"\n");
    http::OtlpExporterOptions eo;
    eo.url = http::otlp_traces_url(collector_.base_url());
    eo.flush_interval = milliseconds(20);
    exporter_ = http::OtlpExporter::start(eo).value();
    ServerOptions so{root_, true, {}};
    so.tracer = Tracer::create({{TraceLevel::kTimestamps, 1, -1}, exporter_, eo.url}).value();
    server_ = Server::create(so).value();
    GrpcServerOptions go;
    go.address = "127.0.0.1";
    go.port = 0;
    grpc_ = GrpcServer::start(server_.get(), go).value();
    stub_ = inference::GRPCInferenceService::NewStub(::grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(grpc_->port()), ::grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    server_->shutdown();
    grpc_->stop();
    exporter_->stop();
    fs::remove_all(root_);
  }

  // One ModelInfer of a 2-element INT32 tensor; returns the code and the traceparent that came
  // back in the initial metadata.
  std::pair<::grpc::StatusCode, std::string> infer(const std::string& model,
                                                   const std::string& traceparent) {
    inference::ModelInferRequest r;
    r.set_model_name(model);
    auto* in = r.add_inputs();
    in->set_name("x");
    in->set_datatype("INT32");
    in->add_shape(2);
    in->mutable_contents()->add_int_contents(5);
    in->mutable_contents()->add_int_contents(-6);
    ::grpc::ClientContext context;
    if (!traceparent.empty()) context.AddMetadata("traceparent", traceparent);
    inference::ModelInferResponse response;
    ::grpc::Status s = stub_->ModelInfer(&context, r, &response);
    const auto& metadata = context.GetServerInitialMetadata();
    auto it = metadata.find("traceparent");
    return {s.error_code(),
            it == metadata.end() ? "" : std::string(it->second.data(), it->second.size())};
  }

  std::vector<ReceivedSpan> trace(const std::string& trace_id, size_t spans) {
    std::vector<ReceivedSpan> out;
    for (const ReceivedSpan& s : collector_.wait_for([&](const auto& all) {
           size_t n = 0;
           for (const ReceivedSpan& s : all) n += s.trace_id == trace_id ? 1 : 0;
           return n >= spans;
         })) {
      if (s.trace_id != trace_id) continue;
      if (s.kind == 2) {
        out.insert(out.begin(), s);
      } else {
        out.push_back(s);
      }
    }
    return out;
  }

  TestCollector collector_;
  fs::path root_;
  std::shared_ptr<http::OtlpExporter> exporter_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<GrpcServer> grpc_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

TEST_F(GrpcTracing, ModelInferContinuesTheCallersTrace) {
  auto [code, back] = infer("echo", kParent);
  ASSERT_EQ(code, ::grpc::StatusCode::OK);
  ASSERT_EQ(back.size(), 55u) << back;
  EXPECT_EQ(back.substr(3, 32), kTraceId);
  EXPECT_NE(back.substr(36, 16), kParentId);
  EXPECT_EQ(back.substr(52), "-01");
  std::vector<ReceivedSpan> spans = trace(kTraceId, 3);
  ASSERT_EQ(spans.size(), 3u);
  const ReceivedSpan& server = spans[0];
  EXPECT_EQ(server.name, "inference.GRPCInferenceService/ModelInfer");
  EXPECT_EQ(server.span_id, back.substr(36, 16));
  EXPECT_EQ(server.parent_id, kParentId);
  EXPECT_EQ(server.attribute("kiln.model.name"), "echo");
  EXPECT_EQ(server.attribute("kiln.model.version"), "1");
  EXPECT_EQ(server.attribute("kiln.protocol"), "grpc");
  EXPECT_EQ(server.attribute("rpc.system"), "grpc");
  EXPECT_EQ(server.attribute("rpc.grpc.status_code"), "0");
  for (size_t i = 1; i < spans.size(); ++i) {
    EXPECT_EQ(spans[i].parent_id, server.span_id);
    EXPECT_GE(spans[i].start_ns, server.start_ns);
    EXPECT_LE(spans[i].end_ns, server.end_ns);
  }
}

TEST_F(GrpcTracing, WithoutTraceparentANewTraceAndAFailureSaysWhy) {
  auto [code, back] = infer("echo", "");
  ASSERT_EQ(code, ::grpc::StatusCode::OK);
  ASSERT_EQ(back.size(), 55u);
  std::vector<ReceivedSpan> spans = trace(back.substr(3, 32), 3);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].parent_id, "");
  auto [missing, failed_back] =
      infer("nope", "00-" + std::string(kTraceId) + "-" + kParentId + "-01");
  EXPECT_EQ(missing, ::grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(failed_back.substr(3, 32), kTraceId);
  std::vector<ReceivedSpan> failed = trace(kTraceId, 1);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].status, 2);
  EXPECT_EQ(failed[0].attribute("rpc.grpc.status_code"), "5");
  EXPECT_NE(failed[0].status_message.find("\"nope\""), std::string::npos);
}

}  // namespace
}  // namespace kiln::server::grpc
