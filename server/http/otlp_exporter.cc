// SPDX-License-Identifier: Apache-2.0
// The OTLP/HTTP JSON exporter: a bounded queue, one sending thread, retries with backoff, and
// every network step bounded by a deadline (Beast's async operations on the thread's own
// io_context).
#include "server/http/otlp_exporter.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include <functional>

#include "core/logging.h"
#include "core/mapped_file.h"
#include "server/http/json_util.h"

namespace kiln::server::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

struct OtlpExporter::Target {
  bool tls = false;
  std::string host;  // without IPv6 brackets
  std::string port;
  std::string path;
  std::string host_header;
  std::unique_ptr<net::ssl::context> ssl;
  net::io_context ioc;  // the sending thread's alone
  // When stop() was called plus shutdown_timeout; max() before. Read by the waits below.
  std::atomic<SteadyClock::rep> stop_deadline{
      SteadyClock::time_point::max().time_since_epoch().count()};

  SteadyClock::time_point stop_at() const {
    return SteadyClock::time_point(SteadyClock::duration(stop_deadline.load()));
  }
};

namespace {

struct Reply {
  int status = 0;
  std::string body;
};

// Runs `ioc` until `done` or the deadline (or the stop deadline) passes; then `cancel` ends the
// pending operation, whose handler runs before this returns false.
bool wait(OtlpExporter::Target& t, const bool& done, SteadyClock::time_point deadline,
          const std::function<void()>& cancel) {
  t.ioc.restart();
  while (!done) {
    const SteadyClock::time_point limit = std::min(deadline, t.stop_at());
    const SteadyClock::time_point now = SteadyClock::now();
    if (now >= limit) break;
    // Slices, so a stop() during a long attempt is noticed.
    t.ioc.run_one_until(std::min(limit, now + std::chrono::milliseconds(50)));
    if (t.ioc.stopped()) t.ioc.restart();
  }
  if (done) return true;
  cancel();
  t.ioc.restart();
  t.ioc.run();
  return false;
}

template <class Stream>
Result<Reply> talk(OtlpExporter::Target& t, Stream& stream, tcp::socket& socket,
                   const bhttp::request<bhttp::string_body>& req,
                   SteadyClock::time_point deadline) {
  auto close = [&] {
    beast::error_code ignored;
    socket.close(ignored);
  };
  beast::error_code ec;
  bool done = false;
  bhttp::async_write(stream, req, [&](beast::error_code e, size_t) {
    ec = e;
    done = true;
  });
  if (!wait(t, done, deadline, close)) return unavailable_error("timed out sending the spans");
  if (ec) return unavailable_error(fmt::format("sending the spans: {}", ec.message()));
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(1 << 20);
  done = false;
  bhttp::async_read(stream, buffer, parser, [&](beast::error_code e, size_t) {
    ec = e;
    done = true;
  });
  if (!wait(t, done, deadline, close)) return unavailable_error("timed out waiting for the answer");
  if (ec) return unavailable_error(fmt::format("reading the answer: {}", ec.message()));
  Reply reply;
  reply.status = static_cast<int>(parser.get().result_int());
  reply.body = std::move(parser.get().body());
  return reply;
}

// One POST on a fresh connection, within `deadline`.
Result<Reply> exchange(OtlpExporter::Target& t, const std::string& body,
                       SteadyClock::time_point deadline) {
  tcp::resolver resolver(t.ioc);
  tcp::socket socket(t.ioc);
  beast::error_code ec;
  bool done = false;
  tcp::resolver::results_type endpoints;
  resolver.async_resolve(t.host, t.port,
                         [&](beast::error_code e, tcp::resolver::results_type results) {
                           ec = e;
                           endpoints = std::move(results);
                           done = true;
                         });
  if (!wait(t, done, deadline, [&] { resolver.cancel(); })) {
    return unavailable_error(fmt::format("timed out resolving {}", t.host));
  }
  if (ec) return unavailable_error(fmt::format("resolving {}: {}", t.host, ec.message()));
  auto close = [&] {
    beast::error_code ignored;
    socket.close(ignored);
  };
  done = false;
  net::async_connect(socket, endpoints, [&](beast::error_code e, const tcp::endpoint&) {
    ec = e;
    done = true;
  });
  if (!wait(t, done, deadline, close)) return unavailable_error("timed out connecting");
  if (ec) return unavailable_error(fmt::format("connecting: {}", ec.message()));

  bhttp::request<bhttp::string_body> req{bhttp::verb::post, t.path, 11};
  req.set(bhttp::field::host, t.host_header);
  req.set(bhttp::field::content_type, "application/json");
  req.set(bhttp::field::user_agent, "kiln-otlp-exporter");
  req.keep_alive(false);
  req.body() = body;
  req.prepare_payload();
  if (!t.tls) return talk(t, socket, socket, req, deadline);

  net::ssl::stream<tcp::socket&> tls(socket, *t.ssl);
  SSL* ssl = tls.native_handle();
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  beast::error_code not_ip;
  net::ip::make_address(t.host, not_ip);
  // An IP address is checked against the certificate's IP names, a name against its DNS names.
  if (!not_ip) {
    X509_VERIFY_PARAM_set1_ip_asc(param, t.host.c_str());
  } else {
    X509_VERIFY_PARAM_set1_host(param, t.host.c_str(), 0);
    SSL_set_tlsext_host_name(ssl, t.host.c_str());
  }
  done = false;
  tls.async_handshake(net::ssl::stream_base::client, [&](beast::error_code e) {
    ec = e;
    done = true;
  });
  if (!wait(t, done, deadline, close)) return unavailable_error("timed out in the TLS handshake");
  if (ec) return unavailable_error(fmt::format("TLS handshake: {}", ec.message()));
  return talk(t, tls, socket, req, deadline);
}

void write_attribute(detail::JsonWriter& w, const SpanAttribute& a) {
  w.StartObject();
  detail::write_string(w, "key", a.key);
  w.Key("value");
  w.StartObject();
  switch (a.value.index()) {
    case 0: detail::write_string(w, "stringValue", std::get<std::string>(a.value)); break;
    case 1:  // OTLP's JSON writes 64-bit integers as strings
      detail::write_string(w, "intValue", std::to_string(std::get<int64_t>(a.value)));
      break;
    case 2:
      w.Key("doubleValue");
      w.Double(std::get<double>(a.value));
      break;
    default: w.Key("boolValue"); w.Bool(std::get<bool>(a.value));
  }
  w.EndObject();
  w.EndObject();
}

bool is_root(const SpanId& id) {
  for (uint8_t b : id) {
    if (b != 0) return false;
  }
  return true;
}

}  // namespace

std::string otlp_traces_url(std::string_view base) {
  while (!base.empty() && base.back() == '/') base.remove_suffix(1);
  return std::string(base) + "/v1/traces";
}

std::string otlp_traces_json(const std::vector<SpanRecord>& spans, std::string_view service_name) {
  rapidjson::StringBuffer buffer;
  detail::JsonWriter w(buffer);
  w.StartObject();
  w.Key("resourceSpans");
  w.StartArray();
  w.StartObject();
  w.Key("resource");
  w.StartObject();
  w.Key("attributes");
  w.StartArray();
  write_attribute(w, {"service.name", std::string(service_name)});
  write_attribute(w, {"telemetry.sdk.name", std::string("kiln")});
  write_attribute(w, {"telemetry.sdk.language", std::string("cpp")});
  w.EndArray();
  w.EndObject();
  w.Key("scopeSpans");
  w.StartArray();
  w.StartObject();
  w.Key("scope");
  w.StartObject();
  detail::write_string(w, "name", "kiln.server");
  w.EndObject();
  w.Key("spans");
  w.StartArray();
  for (const SpanRecord& s : spans) {
    w.StartObject();
    detail::write_string(w, "traceId", to_hex(s.trace_id));
    detail::write_string(w, "spanId", to_hex(s.span_id));
    if (!is_root(s.parent_id)) detail::write_string(w, "parentSpanId", to_hex(s.parent_id));
    if (!s.trace_state.empty()) detail::write_string(w, "traceState", s.trace_state);
    detail::write_string(w, "name", s.name);
    w.Key("kind");
    w.Int(static_cast<int>(s.kind));
    detail::write_string(w, "startTimeUnixNano", std::to_string(s.start_ns));
    detail::write_string(w, "endTimeUnixNano", std::to_string(s.end_ns));
    w.Key("attributes");
    w.StartArray();
    for (const SpanAttribute& a : s.attributes) write_attribute(w, a);
    w.EndArray();
    w.Key("status");
    w.StartObject();
    w.Key("code");
    w.Int(static_cast<int>(s.status));
    if (!s.status_message.empty()) detail::write_string(w, "message", s.status_message);
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.EndArray();
  w.EndObject();
  w.EndArray();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

Result<std::shared_ptr<OtlpExporter>> OtlpExporter::start(OtlpExporterOptions options) {
  auto bad = [&](std::string_view why) {
    return invalid_argument_error(
        fmt::format("OTLP endpoint \"{}\": {}; give http://HOST:PORT (e.g. http://127.0.0.1:4318)",
                    options.url, why));
  };
  auto target = std::make_unique<Target>();
  std::string_view rest = options.url;
  if (rest.rfind("http://", 0) == 0) {
    rest.remove_prefix(7);
  } else if (rest.rfind("https://", 0) == 0) {
    rest.remove_prefix(8);
    target->tls = true;
  } else {
    return bad("the URL must start with http:// or https://");
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  target->path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  target->host_header = std::string(authority);
  std::string_view port;
  if (!authority.empty() && authority[0] == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("no ']' after the IPv6 address");
    target->host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty() && after[0] != ':') return bad("expected ':PORT' after the IPv6 address");
    if (!after.empty()) port = after.substr(1);
  } else {
    const size_t colon = authority.rfind(':');
    target->host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (target->host.empty()) return bad("no host");
  if (port.empty()) port = target->tls ? "443" : "80";
  for (char c : port) {
    if (c < '0' || c > '9') return bad(fmt::format("port \"{}\" is not a number", port));
  }
  target->port = std::string(port);
  if (options.max_queue_spans == 0 || options.max_batch_spans == 0 || options.max_retries < 0) {
    return invalid_argument_error(
        "OTLP exporter: the queue and batch sizes must be positive and the retries not negative");
  }
  if (target->tls) {
    target->ssl = std::make_unique<net::ssl::context>(net::ssl::context::tls_client);
    beast::error_code ec;
    if (options.ca_file.empty()) {
      target->ssl->set_default_verify_paths(ec);
    } else {
      KILN_ASSIGN_OR_RETURN(std::string ca, read_file(options.ca_file));
      target->ssl->add_certificate_authority(net::buffer(ca), ec);
    }
    if (!ec) target->ssl->set_verify_mode(net::ssl::verify_peer, ec);
    if (ec) return bad(fmt::format("the CA certificates ({}): {}", options.ca_file, ec.message()));
  }
  std::shared_ptr<OtlpExporter> exporter(new OtlpExporter(std::move(options), std::move(target)));
  OtlpExporter* raw = exporter.get();
  exporter->thread_ = std::thread([raw] { raw->run(); });
  return exporter;
}

OtlpExporter::OtlpExporter(OtlpExporterOptions options, std::unique_ptr<Target> target)
    : options_(std::move(options)), target_(std::move(target)) {}

OtlpExporter::~OtlpExporter() {
  stop();
}

void OtlpExporter::submit(std::vector<SpanRecord> spans) {
  bool full = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || queue_.size() + spans.size() > options_.max_queue_spans) {
      dropped_full_.fetch_add(spans.size(), std::memory_order_relaxed);
      return;
    }
    for (SpanRecord& s : spans) queue_.push_back(std::move(s));
    full = queue_.size() >= options_.max_batch_spans;
  }
  if (full) cv_.notify_one();
}

SpanSinkStats OtlpExporter::stats() const {
  SpanSinkStats s;
  s.exported = exported_.load(std::memory_order_relaxed);
  s.dropped_full = dropped_full_.load(std::memory_order_relaxed);
  s.dropped_failed = dropped_failed_.load(std::memory_order_relaxed);
  s.failed_requests = failed_requests_.load(std::memory_order_relaxed);
  return s;
}

void OtlpExporter::stop() {
  std::call_once(stopped_, [this] {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      target_->stop_deadline =
          (SteadyClock::now() + options_.shutdown_timeout).time_since_epoch().count();
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  });
}

void OtlpExporter::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait_for(lock, options_.flush_interval,
                 [this] { return stopping_ || queue_.size() >= options_.max_batch_spans; });
    if (queue_.empty()) {
      if (stopping_) return;
      continue;
    }
    const size_t n = std::min(queue_.size(), options_.max_batch_spans);
    std::vector<SpanRecord> batch(std::make_move_iterator(queue_.begin()),
                                  std::make_move_iterator(queue_.begin() + n));
    queue_.erase(queue_.begin(), queue_.begin() + n);
    lock.unlock();
    send(otlp_traces_json(batch, options_.service_name), n);
    lock.lock();
  }
}

bool OtlpExporter::send(const std::string& body, size_t spans) {
  std::chrono::milliseconds backoff = options_.retry_backoff;
  std::string error;
  int attempts = 0;
  for (int attempt = 0; attempt <= options_.max_retries; ++attempt) {
    const SteadyClock::time_point now = SteadyClock::now();
    if (now >= target_->stop_at()) {
      error = "the shutdown flush ran out of time";
      break;
    }
    ++attempts;
    Result<Reply> reply = exchange(*target_, body, now + options_.timeout);
    if (reply.ok() && reply->status >= 200 && reply->status < 300) {
      exported_.fetch_add(spans, std::memory_order_relaxed);
      if (failing_) {
        log(LogLevel::kWarning, "trace export to {} works again ({} spans were dropped meanwhile)",
            options_.url, dropped_in_spell_);
        failing_ = false;
        dropped_in_spell_ = 0;
      }
      return true;
    }
    failed_requests_.fetch_add(1, std::memory_order_relaxed);
    bool retry = true;
    if (!reply.ok()) {
      error = std::string(reply.status().message());
    } else {
      error = fmt::format("HTTP {}{}{}", reply->status, reply->body.empty() ? "" : ": ",
                          reply->body.substr(0, 200));
      retry = reply->status == 429 || reply->status >= 500;
    }
    if (!retry || attempt == options_.max_retries) break;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait_for(lock, backoff, [this] { return stopping_; });
    }
    backoff *= 2;
  }
  dropped_failed_.fetch_add(spans, std::memory_order_relaxed);
  dropped_in_spell_ += spans;
  if (!failing_) {
    failing_ = true;
    log(LogLevel::kWarning,
        "trace export to {} failed after {} attempt(s): {}; {} spans dropped (further failures "
        "are not logged until an export succeeds)",
        options_.url, attempts, detail::replace_invalid_utf8(error), spans);
  }
  return false;
}

}  // namespace kiln::server::http
