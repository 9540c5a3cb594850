// SPDX-License-Identifier: Apache-2.0
// The Beast transport: one strand per connection; requests are read, routed, and their responses
// written back in order on the connection's strand, whichever thread produced them.
#include "server/http/http_server.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <fmt/format.h>
#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

#include "core/logging.h"
#include "core/thread_pool.h"
#include "server/core/log_limiter.h"
#include "server/http/router.h"
#include "server/http/status_page.h"

namespace kiln::server::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

struct HttpServer::Impl {
  Impl(Server* server, HttpServerOptions o)
      : options(std::move(o)),
        ioc(std::max(1, options.threads)),
        acceptor(net::make_strand(ioc)),
        accept_timer(acceptor.get_executor()),
        router(server, options.limits, options.metrics_only, options.gpus),
        access_keys(server->access().keys()),
        tracer(&server->tracer()) {}

  void accept();
  // Accepts again after `delay` (a failed accept, or the connection limit reached).
  void accept_after(std::chrono::milliseconds delay);

  HttpServerOptions options;
  net::io_context ioc;
  tcp::acceptor acceptor;
  net::steady_timer accept_timer;  // on the acceptor's strand
  std::chrono::milliseconds accept_backoff{0};
  Router router;
  const std::vector<std::string> access_keys;  // the headers the AccessPolicy reads
  Tracer* const tracer;
  std::vector<std::thread> threads;
  std::atomic<int64_t> in_flight{0};
  std::atomic<int> connections{0};
  std::atomic<int> max_connections{0};
  std::atomic<bool> stopping{false};
  std::once_flag stopped;
  uint16_t port = 0;
  LogLimiter accept_log;
  LogLimiter limit_log;
  std::optional<net::ssl::context> ssl;  // HTTPS when set
  std::unique_ptr<HttpServer> ui;        // the status page's own listener (ui_port)
};

namespace {

// Stream is beast::tcp_stream (plain HTTP) or beast::ssl_stream<beast::tcp_stream> (HTTPS).
template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  template <class... Tls>
  Session(tcp::socket&& socket, HttpServer::Impl* impl, Tls&... tls)
      : stream_(std::move(socket), tls...),
        // Bytes the parser has not consumed: a header, or a chunked body's chunk lines and
        // trailer. Beast keeps trailer fields unbounded (and throws on one of 64 KiB or more), so
        // the buffer's own limit is what bounds them.
        buffer_(std::max(impl->options.max_header_bytes, impl->options.max_trailer_bytes)),
        impl_(impl) {
    ++impl_->connections;
  }
  ~Session() { --impl_->connections; }

  void start() {
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (kTls) {
        // The handshake counts against the idle timeout, like a header.
        self->lowest().expires_after(self->impl_->options.idle_timeout);
        self->stream_.async_handshake(net::ssl::stream_base::server, [self](beast::error_code ec) {
          if (ec) return self->close();
          self->read();
        });
      } else {
        self->read();
      }
    });
  }

 private:
  using std::enable_shared_from_this<Session<Stream>>::shared_from_this;

  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  // The first read of a Content-Length body, and the least it grows by afterwards.
  static constexpr size_t kBodyStep = size_t{256} << 10;
  static constexpr size_t kBodyReserve = size_t{16} << 20;

  void read() {
    parser_.emplace();
    parser_->header_limit(impl_->options.max_header_bytes);
    parser_->body_limit(impl_->options.max_body_bytes);
    lowest().expires_after(impl_->options.idle_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             beast::bind_front_handler(&Session::on_header, shared_from_this()));
  }

  // Clients such as curl send `Expect: 100-continue` before a large body and wait for the
  // interim response; without it they pause for a second before sending anyway.
  void on_header(beast::error_code ec, size_t bytes) {
    if (ec) return on_read(ec, bytes);
    const auto& req = parser_->get();
    auto expect = req.find(bhttp::field::expect);
    if (expect != req.end() && beast::iequals(expect->value(), "100-continue") &&
        !parser_->is_done()) {
      continue_ = std::make_shared<bhttp::response<bhttp::empty_body>>(bhttp::status::continue_,
                                                                       req.version());
      bhttp::async_write(stream_, *continue_,
                         [self = shared_from_this()](beast::error_code ec, size_t) {
                           if (ec) return self->close();
                           self->read_body();
                         });
      return;
    }
    read_body();
  }

  void read_body() {
    const auto length = parser_->content_length();  // boost::optional
    if (!parser_->is_done() && length && !parser_->chunked() &&
        *length <= impl_->options.max_body_bytes) {
      return read_body_direct(static_cast<size_t>(*length));
    }
    lowest().expires_after(impl_->options.body_timeout);
    bhttp::async_read(stream_, buffer_, *parser_,
                      beast::bind_front_handler(&Session::on_read, shared_from_this()));
  }

  // A body with a Content-Length is read straight from the socket into its final string, in as
  // large reads as the socket gives: the parser would copy it out of `buffer_` 512 bytes a read
  // (a 600 KB tensor took ~1200 reads, each with its own epoll and timer calls).
  void read_body_direct(size_t length) {
    body_length_ = length;
    // Address space for up to kBodyReserve bytes: pages the body never reaches are never touched
    // (read_body_more writes only as far as the bytes asked for), and a body that fits grows in
    // place instead of being copied each time it doubles.
    body_.reserve(std::min(length, kBodyReserve));
    const size_t have = std::min(buffer_.size(), length);
    body_.resize(have);
    net::buffer_copy(net::buffer(body_.data(), have), buffer_.data());
    buffer_.consume(have);
    read_body_more();
  }

  // Memory follows the bytes that arrived, not the length the client declared: each read asks for
  // at most as much again as the body holds (at least kBodyStep), so a client that declares
  // 256 MiB and sends one byte costs 256 KiB, not 256 MiB.
  void read_body_more() {
    const size_t have = body_.size();
    if (have == body_length_) return on_read({}, 0);
    const size_t step = std::min(body_length_ - have, std::max(kBodyStep, have));
    body_.resize(have + step);
    lowest().expires_after(impl_->options.body_timeout);
    net::async_read(stream_, net::buffer(body_.data() + have, step),
                    [self = shared_from_this()](beast::error_code ec, size_t) {
                      if (ec == net::error::eof) ec = bhttp::error::partial_message;
                      if (ec) {
                        self->body_ = std::string();
                        return self->on_read(ec, 0);
                      }
                      self->read_body_more();
                    });
  }

  void on_read(beast::error_code ec, size_t) {
    if (ec == bhttp::error::end_of_stream || ec == beast::error::timeout ||
        ec == net::error::operation_aborted) {
      return close();
    }
    if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
      // buffer_overflow: the chunk lines and trailer fields of a chunked body outgrew the buffer.
      keep_alive_ = false;
      const bool header = !parser_->is_header_done();
      return respond_now(
          431,
          fmt::format("the request's {} larger than the server's limit of {} bytes",
                      header ? "header fields are" : "chunk lines and trailer fields are",
                      header ? impl_->options.max_header_bytes : impl_->options.max_trailer_bytes));
    }
    if (ec == bhttp::error::body_limit) {
      keep_alive_ = false;
      drain_ = true;
      return respond_now(413, fmt::format("the request body is larger than the server's limit of "
                                          "{} bytes",
                                          impl_->options.max_body_bytes));
    }
    if (ec) {
      if (ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category()) {
        keep_alive_ = false;
        return respond_now(400, fmt::format("malformed HTTP request: {}", ec.message()));
      }
      return close();
    }
    bhttp::request<bhttp::string_body>& req = parser_->get();
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    HttpRequest r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    r.body = parser_->is_done() ? std::move(req.body()) : std::move(body_);
    for (const std::string& key : impl_->access_keys) {
      auto it = req.find(key);
      if (it != req.end()) r.headers[key] = std::string(it->value());
    }
    if (impl_->tracer->enabled()) {  // W3C Trace Context; several tracestate fields join with ','
      auto parent = req.find("traceparent");
      if (parent != req.end()) r.headers["traceparent"] = std::string(parent->value());
      for (auto [it, end] = req.equal_range("tracestate"); it != end; ++it) {
        std::string& state = r.headers["tracestate"];
        state += (state.empty() ? "" : ",") + std::string(it->value());
      }
    }
    body_.clear();
    auto header = req.find("Inference-Header-Content-Length");
    if (header != req.end()) {
      std::string_view v = header->value();
      size_t n = 0;
      bool ok = !v.empty() && v.size() < 19;
      for (char c : v) {
        ok = ok && c >= '0' && c <= '9';
        n = n * 10 + static_cast<size_t>(c - '0');
      }
      if (!ok) {
        return respond_now(400, fmt::format("Inference-Header-Content-Length \"{}\" is not a byte "
                                            "count",
                                            v));
      }
      r.inference_header_length = n;
    }
    if (impl_->options.status_page_only && !is_status_page_target(r.target)) {
      return respond_now(404, fmt::format("no endpoint {} {} on this port: it serves the status "
                                          "page only (/ and /v2/kiln/status; kiln serve --ui-port)",
                                          r.method, r.target.substr(0, r.target.find('?'))));
    }
    ++impl_->in_flight;
    lowest().expires_never();  // the model may take its time; the idle timeout resumes after
    impl_->router.handle(std::move(r), [self = shared_from_this()](HttpResponse resp) {
      net::post(self->stream_.get_executor(),
                [self, resp = std::move(resp)]() mutable { self->write(std::move(resp)); });
    });
  }

  void respond_now(int status, std::string message) {
    ++impl_->in_flight;
    HttpResponse resp;
    resp.status = status;
    resp.body = error_json(message);
    write(std::move(resp));
  }

  void write(HttpResponse resp) {
    res_ = {};
    res_.version(version_);
    res_.result(static_cast<unsigned>(resp.status));
    res_.set(bhttp::field::server, "kiln");
    res_.set(bhttp::field::content_type, resp.content_type);
    for (const auto& [name, value] : resp.headers) res_.set(name, value);
    if (resp.inference_header_length) {
      res_.set("Inference-Header-Content-Length", std::to_string(*resp.inference_header_length));
    }
    res_.keep_alive(keep_alive_ && !impl_->stopping);
    res_.body() = std::move(resp.body);
    res_.prepare_payload();
    lowest().expires_after(impl_->options.idle_timeout);
    bhttp::async_write(stream_, res_,
                       beast::bind_front_handler(&Session::on_write, shared_from_this()));
  }

  void on_write(beast::error_code ec, size_t) {
    --impl_->in_flight;
    if (!ec && drain_) return drain();
    if (ec || !res_.keep_alive()) return close();
    read();
  }

  // Reads and drops the rest of a rejected body, so closing the socket does not reset the
  // connection before the client has read the error response.
  void drain() {
    close();
    lowest().expires_after(std::chrono::seconds(5));
    stream_.async_read_some(net::buffer(discard_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (!ec) self->drain_more();
                            });
  }
  void drain_more() {
    stream_.async_read_some(net::buffer(discard_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (!ec) self->drain_more();
                            });
  }

  void close() {
    beast::error_code ec;
    lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::string body_;  // a body read by read_body_direct (the parser then never sees it)
  size_t body_length_ = 0;
  bhttp::response<bhttp::string_body> res_;
  std::shared_ptr<bhttp::response<bhttp::empty_body>> continue_;
  HttpServer::Impl* impl_;
  bool keep_alive_ = true;
  bool drain_ = false;
  unsigned version_ = 11;
  std::array<char, 16384> discard_;
};

}  // namespace

void HttpServer::Impl::accept() {
  if (stopping) return;
  if (connections >= max_connections) {
    // At the limit: leave new connections in the listen backlog and look again shortly.
    int64_t held = 0;
    if (limit_log.allow(&held)) {
      log(LogLevel::kWarning,
          "http: {} connections are open, the limit (--max-connections, lowered to fit the "
          "open-file limit); new connections wait{}",
          max_connections.load(), held ? fmt::format(" ({} more times)", held) : "");
    }
    return accept_after(std::chrono::milliseconds(20));
  }
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (stopping) return;
    if (ec) {
      // Out of descriptors (EMFILE/ENFILE) or memory the accept fails at once and would fail
      // again at once: back off (5 ms doubling to 1 s) and log once in a while, not every time.
      accept_backoff = std::clamp(accept_backoff * 2, std::chrono::milliseconds(5),
                                  std::chrono::milliseconds(1000));
      int64_t held = 0;
      if (accept_log.allow(&held)) {
        log(LogLevel::kWarning, "http: accept failed: {}; retrying in {} ms{}", ec.message(),
            accept_backoff.count(), held ? fmt::format(" ({} more failures)", held) : "");
      }
      return accept_after(accept_backoff);
    }
    accept_backoff = std::chrono::milliseconds(0);
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    if (ssl) {
      std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(std::move(socket), this, *ssl)
          ->start();
    } else {
      std::make_shared<Session<beast::tcp_stream>>(std::move(socket), this)->start();
    }
    accept();
  });
}

void HttpServer::Impl::accept_after(std::chrono::milliseconds delay) {
  accept_timer.expires_after(delay);
  accept_timer.async_wait([this](beast::error_code ec) {
    if (!ec) accept();
  });
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
  stop();
}

Result<std::unique_ptr<HttpServer>> HttpServer::start(Server* server, HttpServerOptions options) {
  if (options.threads <= 0) options.threads = default_thread_count();
  for (auto [name, value] : {std::pair{"--max-header-bytes", options.max_header_bytes},
                             std::pair{"--max-trailer-bytes", options.max_trailer_bytes}}) {
    // Beast keeps a field's offset and length in 16 bits, and throws past them.
    if (value < 512 || value > 65535) {
      return invalid_argument_error(
          fmt::format("{} {} is out of range; give 512 to 65535 bytes", name, value));
    }
  }
  if (options.ui_port > 65535) {
    return invalid_argument_error(
        fmt::format("--ui-port {} is out of range; give 0 to 65535", options.ui_port));
  }
  if (options.max_connections < 1 || options.fd_headroom < 0) {
    return invalid_argument_error(
        fmt::format("--max-connections {} must be at least 1 (and the fd headroom {} at least 0)",
                    options.max_connections, options.fd_headroom));
  }
  auto impl = std::make_unique<Impl>(server, options);
  impl->max_connections = options.max_connections;
  if (options.tls.enabled()) {
    KILN_ASSIGN_OR_RETURN(TlsPem pem, read_tls_files(options.tls));
    net::ssl::context& ctx = impl->ssl.emplace(net::ssl::context::tls_server);
    beast::error_code e;
    ctx.set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                        net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                        net::ssl::context::no_tlsv1_1,
                    e);
    if (!e) ctx.use_certificate_chain(net::buffer(pem.cert), e);
    if (e)
      return invalid_argument_error(
          fmt::format("--tls-cert {}: {}", options.tls.cert_file, e.message()));
    ctx.use_private_key(net::buffer(pem.key), net::ssl::context::pem, e);
    if (e)
      return invalid_argument_error(
          fmt::format("--tls-key {}: {}", options.tls.key_file, e.message()));
    if (!pem.client_ca.empty()) {
      ctx.add_certificate_authority(net::buffer(pem.client_ca), e);
      if (!e) {
        ctx.set_verify_mode(net::ssl::verify_peer | net::ssl::verify_fail_if_no_peer_cert, e);
      }
      if (e) {
        return invalid_argument_error(
            fmt::format("--tls-client-ca {}: {}", options.tls.client_ca_file, e.message()));
      }
    }
  }
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {
    const int64_t fit = static_cast<int64_t>(files.rlim_cur) - options.fd_headroom;
    if (fit < 1) {
      return unavailable_error(fmt::format(
          "the open-file limit is {}, which leaves no descriptors for connections beside the {} "
          "the server keeps for itself; raise it (ulimit -n)",
          files.rlim_cur, options.fd_headroom));
    }
    if (fit < options.max_connections) impl->max_connections = static_cast<int>(fit);
  }
  beast::error_code ec;
  net::ip::address address = net::ip::make_address(options.address, ec);
  if (ec) {
    return invalid_argument_error(fmt::format(
        "\"{}\" is not an IP address to listen on (e.g. 0.0.0.0 or 127.0.0.1)", options.address));
  }
  const std::string where = fmt::format("{}:{}", options.address, options.port);
  tcp::acceptor& a = impl->acceptor;
  auto listen = [&](const tcp::endpoint& endpoint, bool dual_stack) {
    beast::error_code e;
    if (a.is_open()) a.close(e);
    a.open(endpoint.protocol(), e);
    if (!e && dual_stack) a.set_option(net::ip::v6_only(false), e);
    if (!e) a.set_option(net::socket_base::reuse_address(true), e);
    if (!e) a.bind(endpoint, e);
    if (!e) a.listen(net::socket_base::max_listen_connections, e);
    return e;
  };
  // Every interface means IPv6 too, as for gRPC: one dual-stack socket on [::], or IPv4 alone
  // where the host has no IPv6.
  if (address.is_unspecified()) {
    ec = listen(tcp::endpoint(net::ip::address_v6::any(), options.port), true);
    if (ec && address.is_v4()) ec = listen(tcp::endpoint(address, options.port), false);
  } else {
    ec = listen(tcp::endpoint(address, options.port), false);
  }
  if (ec) {
    return unavailable_error(fmt::format("cannot listen on {}: {}; choose another port with {}",
                                         where, ec.message(),
                                         options.status_page_only ? "--ui-port"
                                         : options.metrics_only   ? "--metrics-port"
                                                                  : "--http-port"));
  }
  impl->port = a.local_endpoint(ec).port();
  impl->accept();
  for (int i = 0; i < options.threads; ++i) {
    impl->threads.emplace_back([io = &impl->ioc] {
      pthread_setname_np(pthread_self(), "kiln-http");  // for profilers and CPU-time splits
      io->run();
    });
  }
  std::unique_ptr<HttpServer> started(new HttpServer(std::move(impl)));
  if (options.ui_port >= 0) {
    HttpServerOptions ui = options;
    ui.port = static_cast<uint16_t>(options.ui_port);
    ui.ui_port = -1;
    ui.status_page_only = true;
    ui.threads = 1;
    ui.max_connections = std::min(options.max_connections, 64);  // a few browsers, not clients
    KILN_ASSIGN_OR_RETURN(started->impl_->ui, start(server, std::move(ui)));
  }
  return started;
}

uint16_t HttpServer::port() const {
  return impl_->port;
}

uint16_t HttpServer::ui_port() const {
  return impl_->ui ? impl_->ui->port() : 0;
}

int HttpServer::max_connections() const {
  return impl_->max_connections;
}

int HttpServer::connections() const {
  return impl_->connections;
}

void HttpServer::stop(std::chrono::milliseconds grace) {
  std::call_once(impl_->stopped, [&] {
    if (impl_->ui) impl_->ui->stop(grace);
    impl_->stopping = true;
    net::post(impl_->acceptor.get_executor(), [impl = impl_.get()] {
      beast::error_code ec;
      impl->acceptor.close(ec);
      impl->accept_timer.cancel();
    });
    auto deadline = std::chrono::steady_clock::now() + grace;
    while (impl_->in_flight > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    impl_->ioc.stop();
    for (std::thread& t : impl_->threads) t.join();
    // The posted close may not have run before ioc.stop() (nothing in flight: no wait at all);
    // with the threads joined nothing else touches the acceptor, and the port is free on return.
    beast::error_code ec;
    impl_->acceptor.close(ec);
  });
}

}  // namespace kiln::server::http
