// SPDX-License-Identifier: Apache-2.0
// HttpClient: the KServe v2 REST client on Boost.Beast, with keep-alive connections (a pool, so
// one client may be used from several threads) and binary tensor data by default.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "client/client.h"
#include "core/thread_pool.h"

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace kiln::client {

struct HttpClientOptions {
  // Send inputs and ask for outputs as raw bytes after the JSON (the binary tensor data
  // extension); false sends and receives JSON arrays.
  bool binary_inputs = true;
  bool binary_outputs = true;
  // Send and receive timeout per call.
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
  // Threads that run model_infer_async calls.
  int async_threads = 4;
  // Headers sent with every call, e.g. {"x-api-key", "..."} for kiln serve --restricted-api.
  std::vector<std::pair<std::string, std::string>> headers;
  // HTTPS (also set by an https:// URL): the server's certificate must chain to tls_ca_file (the
  // system's CAs when empty) and name the host; a client certificate and key for mutual TLS.
  bool tls = false;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
};

// A raw HTTP exchange, for calls the typed methods do not cover.
struct HttpReply {
  int status = 0;
  std::string content_type;
  std::string body;
  std::optional<size_t> inference_header_length;
};

class HttpClient final : public Client {
 public:
  // `url` is "http://host:port" or "host:port"; nothing is connected until the first call.
  static Result<std::unique_ptr<HttpClient>> create(const std::string& url,
                                                    HttpClientOptions options = {});
  ~HttpClient() override;

  Result<bool> server_live() override;
  Result<bool> server_ready() override;
  Result<ServerMetadata> server_metadata() override;
  Result<bool> model_ready(const std::string& model, const std::string& version = "") override;
  Result<ModelMetadata> model_metadata(const std::string& model,
                                       const std::string& version = "") override;
  Status model_load(const std::string& model, const Parameters& parameters = {}) override;
  Status model_unload(const std::string& model) override;
  Result<std::string> worker_load(const std::string& worker,
                                  const Parameters& parameters = {}) override;
  Status worker_unload(const std::string& endpoint) override;
  Result<InferenceResponse> model_infer(const std::string& model,
                                        InferenceRequest request) override;
  std::future<Result<InferenceResponse>> model_infer_async(const std::string& model,
                                                           InferenceRequest request) override;

  // Sends one request and returns the reply whatever its status; unavailable when the server
  // cannot be reached.
  Result<HttpReply> send(const std::string& method, const std::string& target,
                         std::string body = "",
                         std::optional<size_t> inference_header_length = std::nullopt,
                         const std::string& content_type = "application/json");

  struct Connection;

 private:
  HttpClient(std::string host, std::string port, HttpClientOptions options);
  Result<std::unique_ptr<Connection>> connect();
  // A non-2xx reply as a Status carrying the server's message.
  static Status reply_error(const HttpReply& reply);
  Result<HttpReply> call(const std::string& method, const std::string& target,
                         const std::string& body = "");

  const std::string host_;
  const std::string port_;
  const HttpClientOptions options_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::once_flag pool_once_;
  std::unique_ptr<ThreadPool> pool_;
  std::shared_ptr<boost::asio::ssl::context> ssl_;  // https: shared by the connections
};

}  // namespace kiln::client
