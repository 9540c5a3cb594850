// SPDX-License-Identifier: Apache-2.0
// For tests: an OTLP/HTTP collector on a real loopback socket (answers each POST with the status
// it is told, keeps the bodies, and parses the spans out of them), and one HTTP exchange that
// returns the response's headers.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kiln::server::testing {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// One span as the collector received it (OTLP JSON), attribute values as strings.
struct ReceivedSpan {
  std::string service;  // the resource's service.name
  std::string trace_id, span_id, parent_id, trace_state, name;
  int kind = 0;
  uint64_t start_ns = 0, end_ns = 0;
  std::map<std::string, std::string> attributes;
  int status = 0;
  std::string status_message;

  std::string attribute(const std::string& key) const {
    auto it = attributes.find(key);
    return it == attributes.end() ? "<none>" : it->second;
  }
};

struct ReceivedRequest {
  std::string method, target, content_type, body;
  int answered = 0;
};

// The spans of an OTLP JSON body; a body that does not parse gives none (and fails the test).
inline std::vector<ReceivedSpan> parse_otlp_spans(const std::string& body) {
  std::vector<ReceivedSpan> out;
  rapidjson::Document doc;
  doc.Parse(body.c_str(), body.size());
  EXPECT_FALSE(doc.HasParseError()) << body.substr(0, 200);
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("resourceSpans")) return out;
  auto text = [](const rapidjson::Value& v) {
    return std::string(v.GetString(), v.GetStringLength());
  };
  auto value_text = [&](const rapidjson::Value& v) -> std::string {
    if (v.HasMember("stringValue")) return text(v["stringValue"]);
    if (v.HasMember("intValue")) return text(v["intValue"]);  // a string in OTLP JSON
    if (v.HasMember("boolValue")) return v["boolValue"].GetBool() ? "true" : "false";
    if (v.HasMember("doubleValue")) return std::to_string(v["doubleValue"].GetDouble());
    return "?";
  };
  for (const auto& rs : doc["resourceSpans"].GetArray()) {
    std::string service;
    for (const auto& a : rs["resource"]["attributes"].GetArray()) {
      if (text(a["key"]) == "service.name") service = value_text(a["value"]);
    }
    for (const auto& ss : rs["scopeSpans"].GetArray()) {
      for (const auto& s : ss["spans"].GetArray()) {
        ReceivedSpan r;
        r.service = service;
        r.trace_id = text(s["traceId"]);
        r.span_id = text(s["spanId"]);
        if (s.HasMember("parentSpanId")) r.parent_id = text(s["parentSpanId"]);
        if (s.HasMember("traceState")) r.trace_state = text(s["traceState"]);
        r.name = text(s["name"]);
        r.kind = s["kind"].GetInt();
        r.start_ns = std::stoull(text(s["startTimeUnixNano"]));
        r.end_ns = std::stoull(text(s["endTimeUnixNano"]));
        for (const auto& a : s["attributes"].GetArray()) {
          r.attributes[text(a["key"])] = value_text(a["value"]);
        }
        r.status = s["status"]["code"].GetInt();
        if (s["status"].HasMember("message")) r.status_message = text(s["status"]["message"]);
        out.push_back(std::move(r));
      }
    }
  }
  return out;
}

class TestCollector {
 public:
  // Listens on 127.0.0.1 (a free port); the n-th POST is answered with statuses[n], the rest 200.
  // `delay` holds every answer back that long (a slow or stuck collector).
  explicit TestCollector(std::vector<int> statuses = {},
                         std::chrono::milliseconds delay = std::chrono::milliseconds(0))
      : statuses_(std::move(statuses)), delay_(delay), acceptor_(ioc_) {
    tcp::endpoint endpoint(net::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { serve(); });
  }
  ~TestCollector() { stop(); }

  // Stops listening (a later export finds the port closed).
  void stop() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    // Wakes the blocking accept.
    beast::error_code ec;
    net::io_context ioc;
    tcp::socket wake(ioc);
    wake.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port_), ec);
    thread_.join();
  }

  uint16_t port() const { return port_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  std::vector<ReceivedRequest> requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }
  // Every span of the requests answered 2xx.
  std::vector<ReceivedSpan> spans() const {
    std::vector<ReceivedSpan> out;
    for (const ReceivedRequest& r : requests()) {
      if (r.answered < 200 || r.answered >= 300) continue;
      for (ReceivedSpan& s : parse_otlp_spans(r.body)) out.push_back(std::move(s));
    }
    return out;
  }
  // Waits (up to `timeout`) until `done(spans())` holds; returns the spans then.
  std::vector<ReceivedSpan> wait_for(
      const std::function<bool(const std::vector<ReceivedSpan>&)>& done,
      std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    std::vector<ReceivedSpan> now = spans();
    while (!done(now) && std::chrono::steady_clock::now() < until) {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait_for(lock, std::chrono::milliseconds(20));
      lock.unlock();
      now = spans();
    }
    return now;
  }

 private:
  void serve() {
    for (;;) {
      tcp::socket socket(ioc_);
      beast::error_code ec;
      acceptor_.accept(socket, ec);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_) return;
      }
      if (ec) continue;
      beast::flat_buffer buffer;
      bhttp::request<bhttp::string_body> req;
      bhttp::read(socket, buffer, req, ec);
      if (ec) continue;
      ReceivedRequest r;
      r.method = std::string(req.method_string());
      r.target = std::string(req.target());
      r.content_type = std::string(req[bhttp::field::content_type]);
      r.body = req.body();
      {
        std::unique_lock<std::mutex> lock(mutex_);
        r.answered = requests_.size() < statuses_.size() ? statuses_[requests_.size()] : 200;
        // A held answer ends early when the collector stops.
        cv_.wait_for(lock, delay_, [this] { return stopping_; });
        requests_.push_back(r);
      }
      cv_.notify_all();
      bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(r.answered), 11};
      res.set(bhttp::field::content_type, "application/json");
      res.body() = r.answered < 300 ? "{}" : "{\"message\":\"collector unavailable\"}";
      res.keep_alive(false);
      res.prepare_payload();
      bhttp::write(socket, res, ec);
      socket.shutdown(tcp::socket::shutdown_both, ec);
    }
  }

  const std::vector<int> statuses_;
  const std::chrono::milliseconds delay_;
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<ReceivedRequest> requests_;
  std::thread thread_;
};

// A port nothing listens on (bound, then closed).
inline uint16_t closed_port() {
  net::io_context ioc;
  tcp::acceptor a(ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

struct HttpExchange {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;

  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

// One request on a fresh connection to 127.0.0.1:`port`.
inline HttpExchange http_exchange(uint16_t port, const std::string& method,
                                  const std::string& target, const std::string& body = "",
                                  const std::map<std::string, std::string>& headers = {}) {
  HttpExchange out;
  net::io_context ioc;
  tcp::socket socket(ioc);
  beast::error_code ec;
  socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
  EXPECT_FALSE(ec) << ec.message();
  if (ec) return out;
  bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
  req.set(bhttp::field::host, "127.0.0.1");
  req.set(bhttp::field::content_type, "application/json");
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  bhttp::write(socket, req, ec);
  beast::flat_buffer buffer;
  bhttp::response<bhttp::string_body> res;
  if (!ec) bhttp::read(socket, buffer, res, ec);
  EXPECT_FALSE(ec) << ec.message();
  out.status = static_cast<int>(res.result_int());
  for (const auto& field : res) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out.headers[name] = std::string(field.value());
  }
  out.body = res.body();
  return out;
}

}  // namespace kiln::server::testing
