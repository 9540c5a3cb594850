// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the HTTP request path of `kiln serve` on arbitrary bytes. The bytes are one
// connection's stream: Beast's request parser with the server's limits (header and trailer caps
// enforced the way the transport does, by a bounded buffer), then the Router over an in-process
// server with an echo model (KServe JSON, the binary extension, the repository and worker routes).
// Every request must get exactly one answer with a status, never a crash.
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <string_view>

#include "server/core/server.h"
#include "server/http/router.h"

namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using kiln::server::Server;

constexpr size_t kHeaderLimit = 8192;
constexpr size_t kBodyLimit = size_t{1} << 20;

Server* server() {
  static Server* s = [] {
    namespace fs = std::filesystem;
    const fs::path root =
        fs::temp_directory_path() / ("kiln_fuzz_http_" + std::to_string(::getpid()));
    fs::create_directories(root / "echo" / "1");
    std::ofstream(root / "echo" / "config.toml") << "backend = \"echo\"\nmax_batch_size = 4\n";
    fs::create_directories(root / "typed" / "1");
    std::ofstream(root / "typed" / "config.toml")
        << "backend = \"echo\"\n[[inputs]]\nname = \"x\"\ndatatype = \"FP32\"\nshape = [2, 2]\n";
    static const fs::path to_remove = root;
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(to_remove, ec);
    });
    kiln::server::ServerOptions o;
    o.repository = root;
    o.max_instances = 2;
    return kiln::server::Server::create(o).value().release();
  }();
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const kiln::server::http::Router router(server(), {int64_t{1} << 16, 16});
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t pos = 0;
  // Up to 4 pipelined requests per input.
  for (int request = 0; request < 4 && pos < input.size(); ++request) {
    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(kBodyLimit);
    parser.eager(true);
    // Fed like the transport reads: at most kHeaderLimit unparsed bytes at a time, so a header,
    // chunk line or trailer that does not fit is the transport's 431 (buffer_overflow).
    beast::error_code ec;
    while (!parser.is_done()) {
      const size_t avail = std::min(kHeaderLimit, input.size() - pos);
      if (avail == 0) {
        parser.put_eof(ec);
        break;
      }
      const size_t used = parser.put(boost::asio::buffer(input.data() + pos, avail), ec);
      pos += used;
      if (ec == bhttp::error::need_more) {
        ec = {};
        if (used > 0) continue;
        if (avail == kHeaderLimit) return 0;  // the buffer is full: 431
        parser.put_eof(ec);
        break;
      }
      if (ec) break;
    }
    if (ec || !parser.is_done()) return 0;
    auto& req = parser.get();
    kiln::server::http::HttpRequest r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    r.body = std::move(req.body());
    auto header = req.find("Inference-Header-Content-Length");
    if (header != req.end()) {
      const std::string v(header->value());
      if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos) {
        return 0;  // the transport answers 400 itself
      }
      r.inference_header_length = std::strtoull(v.c_str(), nullptr, 10);
    }
    std::promise<int> answered;
    router.handle(std::move(r), [&](kiln::server::http::HttpResponse resp) {
      if (resp.status < 200 || resp.status > 599) std::abort();
      answered.set_value(resp.status);
    });
    answered.get_future().get();
  }
  return 0;
}
