// SPDX-License-Identifier: Apache-2.0
// The Beast transport: one strand per connection; requests are read, routed, and their responses
// written back in order on the connection's strand, whichever thread produced them.
#include "server/http/http_server.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <pthread.h>

#include <array>
#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "core/logging.h"
#include "core/thread_pool.h"
#include "server/http/router.h"

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
        router(server, options.limits) {}

  void accept();

  HttpServerOptions options;
  net::io_context ioc;
  tcp::acceptor acceptor;
  Router router;
  std::vector<std::thread> threads;
  std::atomic<int64_t> in_flight{0};
  std::atomic<bool> stopping{false};
  std::once_flag stopped;
  uint16_t port = 0;
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, HttpServer::Impl* impl) : stream_(std::move(socket)), impl_(impl) {}

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read(); });
  }

 private:
  void read() {
    parser_.emplace();
    parser_->body_limit(impl_->options.max_body_bytes);
    stream_.expires_after(impl_->options.idle_timeout);
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
    bhttp::async_read(stream_, buffer_, *parser_,
                      beast::bind_front_handler(&Session::on_read, shared_from_this()));
  }

  // A body with a Content-Length is read straight from the socket into its final string, in as
  // large reads as the socket gives: the parser would copy it out of `buffer_` 512 bytes a read
  // (a 600 KB tensor took ~1200 reads, each with its own epoll and timer calls).
  void read_body_direct(size_t length) {
    body_.resize(length);
    const size_t have = std::min(buffer_.size(), length);
    net::buffer_copy(net::buffer(body_.data(), have), buffer_.data());
    buffer_.consume(have);
    net::async_read(stream_, net::buffer(body_.data() + have, length - have),
                    [self = shared_from_this()](beast::error_code ec, size_t) {
                      if (ec == net::error::eof) ec = bhttp::error::partial_message;
                      self->on_read(ec, 0);
                    });
  }

  void on_read(beast::error_code ec, size_t) {
    if (ec == bhttp::error::end_of_stream || ec == beast::error::timeout ||
        ec == net::error::operation_aborted) {
      return close();
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
    ++impl_->in_flight;
    stream_.expires_never();  // the model may take its time; the idle timeout resumes after
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
    if (resp.inference_header_length) {
      res_.set("Inference-Header-Content-Length", std::to_string(*resp.inference_header_length));
    }
    res_.keep_alive(keep_alive_ && !impl_->stopping);
    res_.body() = std::move(resp.body);
    res_.prepare_payload();
    stream_.expires_after(impl_->options.idle_timeout);
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
    stream_.expires_after(std::chrono::seconds(5));
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
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::string body_;  // a body read by read_body_direct (the parser then never sees it)
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
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (stopping) return;
    if (!ec) {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<Session>(std::move(socket), this)->start();
    } else {
      log(LogLevel::kWarning, "http: accept failed: {}", ec.message());
    }
    accept();
  });
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
  stop();
}

Result<std::unique_ptr<HttpServer>> HttpServer::start(Server* server, HttpServerOptions options) {
  if (options.threads <= 0) options.threads = default_thread_count();
  auto impl = std::make_unique<Impl>(server, options);
  beast::error_code ec;
  net::ip::address address = net::ip::make_address(options.address, ec);
  if (ec) {
    return invalid_argument_error(fmt::format(
        "\"{}\" is not an IP address to listen on (e.g. 0.0.0.0 or 127.0.0.1)", options.address));
  }
  tcp::endpoint endpoint(address, options.port);
  const std::string where = fmt::format("{}:{}", options.address, options.port);
  tcp::acceptor& a = impl->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return unavailable_error(fmt::format(
        "cannot listen on {}: {}; choose another port with --http-port", where, ec.message()));
  }
  impl->port = a.local_endpoint(ec).port();
  impl->accept();
  for (int i = 0; i < options.threads; ++i) {
    impl->threads.emplace_back([io = &impl->ioc] {
      pthread_setname_np(pthread_self(), "kiln-http");  // for profilers and CPU-time splits
      io->run();
    });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

uint16_t HttpServer::port() const {
  return impl_->port;
}

void HttpServer::stop(std::chrono::milliseconds grace) {
  std::call_once(impl_->stopped, [&] {
    impl_->stopping = true;
    net::post(impl_->acceptor.get_executor(), [impl = impl_.get()] {
      beast::error_code ec;
      impl->acceptor.close(ec);
    });
    auto deadline = std::chrono::steady_clock::now() + grace;
    while (impl_->in_flight > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    impl_->ioc.stop();
    for (std::thread& t : impl_->threads) t.join();
  });
}

}  // namespace kiln::server::http
