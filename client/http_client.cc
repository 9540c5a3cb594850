// SPDX-License-Identifier: Apache-2.0
// HttpClient over synchronous Beast calls on pooled keep-alive connections.
#include "client/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include "core/mapped_file.h"
#include "server/http/infer_json.h"

namespace kiln::client {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

struct HttpClient::Connection {
  net::io_context ioc;
  tcp::socket socket{ioc};
  std::unique_ptr<net::ssl::stream<tcp::socket&>> tls;  // over `socket`, for https
  beast::flat_buffer buffer;

  // Calls fn with the stream requests go over: the TLS stream, or the socket.
  template <class F>
  void with_stream(F&& fn) {
    if (tls) {
      fn(*tls);
    } else {
      fn(socket);
    }
  }
};

namespace {

StatusCode code_of(int status) {
  switch (status) {
    case 400: return StatusCode::kInvalidArgument;
    case 401: return StatusCode::kUnauthenticated;
    case 403: return StatusCode::kPermissionDenied;
    case 404: return StatusCode::kNotFound;
    case 405: return StatusCode::kInvalidArgument;
    case 413:
    case 429:
    case 431: return StatusCode::kResourceExhausted;
    case 501: return StatusCode::kUnimplemented;
    case 503: return StatusCode::kUnavailable;
    default: return StatusCode::kInternal;
  }
}

std::string escape_path(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string model_path(const std::string& model, const std::string& version) {
  std::string p = "/v2/models/" + escape_path(model);
  if (!version.empty()) p += "/versions/" + escape_path(version);
  return p;
}

}  // namespace

HttpClient::HttpClient(std::string host, std::string port, HttpClientOptions options)
    : host_(std::move(host)), port_(std::move(port)), options_(options) {}

HttpClient::~HttpClient() {
  pool_.reset();
}

Result<std::unique_ptr<HttpClient>> HttpClient::create(const std::string& url,
                                                       HttpClientOptions options) {
  std::string rest = url;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  if (rest.rfind("https://", 0) == 0) {
    rest = rest.substr(8);
    options.tls = true;
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size()) {
    return invalid_argument_error(
        fmt::format("\"{}\" is not a server address; expected http://HOST:PORT", url));
  }
  std::unique_ptr<HttpClient> client(
      new HttpClient(rest.substr(0, colon), rest.substr(colon + 1), options));
  if (client->options_.tls) {
    // The server's certificate must chain to the CA file (or the system's CAs) and name the host.
    auto ctx = std::make_shared<net::ssl::context>(net::ssl::context::tls_client);
    beast::error_code ec;
    const HttpClientOptions& o = client->options_;
    if (o.tls_ca_file.empty()) {
      ctx->set_default_verify_paths(ec);
    } else {
      KILN_ASSIGN_OR_RETURN(std::string ca, read_file(o.tls_ca_file));
      ctx->add_certificate_authority(net::buffer(ca), ec);
    }
    if (!ec && !o.tls_cert_file.empty()) {
      KILN_ASSIGN_OR_RETURN(std::string cert, read_file(o.tls_cert_file));
      KILN_ASSIGN_OR_RETURN(std::string key, read_file(o.tls_key_file));
      ctx->use_certificate_chain(net::buffer(cert), ec);
      if (!ec) ctx->use_private_key(net::buffer(key), net::ssl::context::pem, ec);
    }
    if (!ec) ctx->set_verify_mode(net::ssl::verify_peer, ec);
    if (ec) {
      return invalid_argument_error(fmt::format("{}: the TLS files ({}, {}, {}): {}", url,
                                                o.tls_ca_file, o.tls_cert_file, o.tls_key_file,
                                                ec.message()));
    }
    client->ssl_ = std::move(ctx);
  }
  return client;
}

Result<std::unique_ptr<HttpClient::Connection>> HttpClient::connect() {
  auto c = std::make_unique<Connection>();
  beast::error_code ec;
  tcp::resolver resolver(c->ioc);
  auto endpoints = resolver.resolve(host_, port_, ec);
  if (!ec) net::connect(c->socket, endpoints, ec);
  if (ec) {
    return unavailable_error(
        fmt::format("cannot connect to {}:{}: {}", host_, port_, ec.message()));
  }
  c->socket.set_option(tcp::no_delay(true), ec);
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(options_.timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((options_.timeout.count() % 1000) * 1000);
  ::setsockopt(c->socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(c->socket.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (ssl_) {
    c->tls = std::make_unique<net::ssl::stream<tcp::socket&>>(c->socket, *ssl_);
    SSL* ssl = c->tls->native_handle();
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    net::ip::make_address(host_, ec);
    const bool ip = !ec;
    // An IP address is checked against the certificate's IP names, a host name against its DNS
    // names (and sent as SNI).
    if (ip) {
      X509_VERIFY_PARAM_set1_ip_asc(param, host_.c_str());
    } else {
      X509_VERIFY_PARAM_set1_host(param, host_.c_str(), 0);
      SSL_set_tlsext_host_name(ssl, host_.c_str());
    }
    ec = {};
    c->tls->handshake(net::ssl::stream_base::client, ec);
    if (ec) {
      return unavailable_error(
          fmt::format("TLS handshake with {}:{} failed: {}", host_, port_, ec.message()));
    }
  }
  return c;
}

namespace {

// Reads one response. A body with a Content-Length is read straight from the socket into the
// body string in large reads (the parser alone would take it 512 bytes a read out of `buffer`).
template <class Stream>
void read_response(Stream& socket, beast::flat_buffer& buffer,
                   bhttp::response_parser<bhttp::string_body>& parser, beast::error_code& ec) {
  bhttp::read_header(socket, buffer, parser, ec);
  if (ec) return;  // e.g. the server closed the connection: no header to look at
  const auto length = parser.content_length();  // boost::optional
  if (parser.is_done() || !length || parser.chunked()) {
    if (!parser.is_done()) bhttp::read(socket, buffer, parser, ec);
    return;
  }
  std::string& body = parser.get().body();
  body.resize(static_cast<size_t>(*length));
  const size_t have = std::min(buffer.size(), body.size());
  net::buffer_copy(net::buffer(body.data(), have), buffer.data());
  buffer.consume(have);
  net::read(socket, net::buffer(body.data() + have, body.size() - have), ec);
}

}  // namespace

Result<HttpReply> HttpClient::send(const std::string& method, const std::string& target,
                                   std::string body, std::optional<size_t> inference_header_length,
                                   const std::string& content_type) {
  bhttp::request<bhttp::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  req.set(bhttp::field::host, host_);
  req.set(bhttp::field::content_type, content_type);
  for (const auto& [key, value] : options_.headers) req.set(key, value);
  if (inference_header_length) {
    req.set("Inference-Header-Content-Length", std::to_string(*inference_header_length));
  }
  req.keep_alive(true);
  req.body() = std::move(body);
  req.prepare_payload();

  // A pooled connection may have been closed by the server; one retry on a fresh one.
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::unique_ptr<Connection> c;
    bool reused = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!idle_.empty()) {
        c = std::move(idle_.back());
        idle_.pop_back();
        reused = true;
      }
    }
    if (!c) {
      KILN_ASSIGN_OR_RETURN(c, connect());
    }
    beast::error_code ec;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(std::numeric_limits<uint64_t>::max());
    parser.skip(method == "HEAD");  // its Content-Length is that of the GET's body
    c->with_stream([&](auto& stream) {
      bhttp::write(stream, req, ec);
      if (!ec) read_response(stream, c->buffer, parser, ec);
    });
    if (ec) {
      if (reused && attempt == 0) continue;
      return unavailable_error(
          fmt::format("{} {} on {}:{}: {}", method, target, host_, port_, ec.message()));
    }
    bhttp::response<bhttp::string_body>& res = parser.get();
    HttpReply reply;
    reply.status = static_cast<int>(res.result_int());
    reply.content_type = std::string(res[bhttp::field::content_type]);
    auto h = res.find("Inference-Header-Content-Length");
    if (h != res.end()) {
      reply.inference_header_length =
          static_cast<size_t>(std::strtoull(std::string(h->value()).c_str(), nullptr, 10));
    }
    reply.body = std::move(res.body());
    if (res.keep_alive()) {
      std::lock_guard<std::mutex> lock(mutex_);
      idle_.push_back(std::move(c));
    }
    return reply;
  }
  return unavailable_error(fmt::format("{} {}: the connection failed twice", method, target));
}

Status HttpClient::reply_error(const HttpReply& reply) {
  std::string message = reply.body;
  Result<server::Parameters> parsed = server::http::parse_parameters_json(reply.body);
  if (parsed.ok()) {
    Result<std::optional<std::string>> e = parsed->get_string("error");
    if (e.ok() && e->has_value()) message = **e;
  }
  return Status(code_of(reply.status), fmt::format("HTTP {}: {}", reply.status, message));
}

Result<HttpReply> HttpClient::call(const std::string& method, const std::string& target,
                                   const std::string& body) {
  KILN_ASSIGN_OR_RETURN(HttpReply reply, send(method, target, body));
  if (reply.status < 200 || reply.status >= 300) return reply_error(reply);
  return reply;
}

Result<bool> HttpClient::server_live() {
  KILN_ASSIGN_OR_RETURN(HttpReply r, send("GET", "/v2/health/live"));
  return r.status == 200;
}

Result<bool> HttpClient::server_ready() {
  KILN_ASSIGN_OR_RETURN(HttpReply r, send("GET", "/v2/health/ready"));
  return r.status == 200;
}

Result<ServerMetadata> HttpClient::server_metadata() {
  KILN_ASSIGN_OR_RETURN(HttpReply r, call("GET", "/v2"));
  return server::http::parse_server_metadata_json(r.body);
}

Result<bool> HttpClient::model_ready(const std::string& model, const std::string& version) {
  KILN_ASSIGN_OR_RETURN(HttpReply r, send("GET", model_path(model, version) + "/ready"));
  if (r.status == 200) return true;
  if (r.status == 503) return false;
  return reply_error(r);
}

Result<ModelMetadata> HttpClient::model_metadata(const std::string& model,
                                                 const std::string& version) {
  KILN_ASSIGN_OR_RETURN(HttpReply r, call("GET", model_path(model, version)));
  return server::http::parse_model_metadata_json(r.body);
}

Status HttpClient::model_load(const std::string& model, const Parameters& parameters) {
  return call("POST", "/v2/repository/models/" + escape_path(model) + "/load",
              server::http::parameters_json(parameters))
      .status();
}

Status HttpClient::model_unload(const std::string& model) {
  return call("POST", "/v2/repository/models/" + escape_path(model) + "/unload").status();
}

Result<std::string> HttpClient::worker_load(const std::string& worker,
                                            const Parameters& parameters) {
  KILN_ASSIGN_OR_RETURN(HttpReply r, call("POST", "/v2/workers/" + escape_path(worker) + "/load",
                                          server::http::parameters_json(parameters)));
  return r.body;
}

Status HttpClient::worker_unload(const std::string& endpoint) {
  return call("POST", "/v2/workers/" + escape_path(endpoint) + "/unload").status();
}

Result<InferenceResponse> HttpClient::model_infer(const std::string& model,
                                                  InferenceRequest request) {
  if (!model.empty()) request.model = model;
  server::http::EncodedBody body =
      server::http::encode_infer_request(request, options_.binary_inputs, options_.binary_outputs);
  KILN_ASSIGN_OR_RETURN(
      HttpReply r,
      send("POST", model_path(request.model, request.version) + "/infer", std::move(body.body),
           body.json_size, body.json_size ? "application/octet-stream" : "application/json"));
  if (r.status != 200) return reply_error(r);
  return server::http::decode_infer_response(r.body, r.inference_header_length);
}

std::future<Result<InferenceResponse>> HttpClient::model_infer_async(const std::string& model,
                                                                     InferenceRequest request) {
  std::call_once(pool_once_,
                 [this] { pool_ = std::make_unique<ThreadPool>(options_.async_threads); });
  auto promise = std::make_shared<std::promise<Result<InferenceResponse>>>();
  std::future<Result<InferenceResponse>> future = promise->get_future();
  pool_->submit([this, model, promise, request = std::move(request)]() mutable {
    promise->set_value(model_infer(model, std::move(request)));
  });
  return future;
}

}  // namespace kiln::client
