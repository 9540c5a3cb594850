// SPDX-License-Identifier: Apache-2.0
// The status page's headers (its CSP hashes are worked out from the built-in HTML) and its JSON.
#include "server/http/status_page.h"

#include <openssl/evp.h>

#include <chrono>
#include <vector>

#include "server/http/json_util.h"
#include "server/http/metadata_json.h"

namespace kiln::server::http {

namespace {

using detail::JsonWriter;
using detail::write_string;

std::string sha256_base64(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  KILN_CHECK(EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha256(), nullptr) == 1);
  std::string out(4 * ((size + 2) / 3) + 1, '\0');
  const int length =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), digest, static_cast<int>(size));
  out.resize(static_cast<size_t>(length));
  return out;
}

// " 'sha256-...'" for each <tag>...</tag> of `html`, hashed as a browser does: over the text
// between the tags after HTML's line-ending normalization (CR LF and CR become LF).
std::string inline_hashes(std::string_view html, std::string_view tag) {
  const std::string open = fmt::format("<{}>", tag), close = fmt::format("</{}>", tag);
  std::string out;
  for (size_t at = html.find(open); at != std::string_view::npos; at = html.find(open, at)) {
    // A tag named inside a comment is no element.
    const size_t comment = html.rfind("<!--", at);
    if (comment != std::string_view::npos && html.find("-->", comment) > at) {
      at = html.find("-->", at);
      continue;
    }
    const size_t begin = at + open.size();
    const size_t end = html.find(close, begin);
    KILN_CHECK(end != std::string_view::npos, "status_page.html: an unclosed inline element");
    std::string text;
    text.reserve(end - begin);
    for (size_t i = begin; i < end; ++i) {
      if (html[i] == '\r') {
        text += '\n';
        if (i + 1 < end && html[i + 1] == '\n') ++i;
      } else {
        text += html[i];
      }
    }
    out += fmt::format(" 'sha256-{}'", sha256_base64(text));
    at = end + close.size();
  }
  return out;
}

uint64_t now_ms() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// Headers every status answer carries: no MIME sniffing, no referrer, never framed.
void harden(HttpResponse& r) {
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  r.headers.emplace_back("X-Frame-Options", "DENY");
}

}  // namespace

const std::string& status_page_csp() {
  static const std::string csp = [] {
    const std::string_view html = status_page_html();
    return fmt::format(
        "default-src 'none'; script-src{}; style-src{}; connect-src 'self'; img-src data:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        inline_hashes(html, "script"), inline_hashes(html, "style"));
  }();
  return csp;
}

bool is_status_page_target(std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  return path == "/" || path == "/v2/kiln/status";
}

HttpResponse status_page_response() {
  HttpResponse r;
  r.content_type = "text/html; charset=utf-8";
  r.body = std::string(status_page_html());
  r.headers.emplace_back("Content-Security-Policy", status_page_csp());
  r.headers.emplace_back("Cache-Control", "no-cache");
  harden(r);
  return r;
}

std::string status_json(const Server& server) {
  const ServerMetadata metadata = server.metadata();
  const std::vector<ModelState> models = server.model_states();
  const uint64_t time_ms = now_ms();
  Result<std::vector<ModelStatistics>> stats = server.statistics();
  const std::string statistics =
      statistics_json(stats.ok() ? *stats : std::vector<ModelStatistics>());
  const std::vector<RecentError> errors = server.recent_errors();
  const uint64_t errors_total =
      std::max<uint64_t>(server.error_count(), errors.empty() ? 0 : errors.back().sequence);

  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("server");
  w.StartObject();
  write_string(w, "name", metadata.name);
  write_string(w, "version", metadata.version);
  w.Key("ready");
  w.Bool(server.ready());
  w.EndObject();
  w.Key("time_ms");
  w.Uint64(time_ms);
  w.Key("models");
  w.StartArray();
  for (const ModelState& m : models) {
    w.StartObject();
    write_string(w, "name", m.name);
    w.Key("versions");
    w.StartArray();
    for (const std::string& v : m.versions) detail::write_text(w, v);
    w.EndArray();
    write_string(w, "state", m.state);
    w.Key("failed");
    w.Bool(m.failed);
    write_string(w, "reason", m.reason);
    write_string(w, "backend", m.backend);
    write_string(w, "platform", m.platform);
    w.EndObject();
  }
  w.EndArray();
  w.Key("statistics");
  w.RawValue(statistics.data(), statistics.size(), rapidjson::kObjectType);
  w.Key("recent_errors");
  w.StartArray();
  for (const RecentError& e : errors) {
    w.StartObject();
    w.Key("sequence");
    w.Uint64(e.sequence);
    w.Key("time_ms");
    w.Uint64(e.time_ms);
    write_string(w, "kind", error_kind_name(e.kind));
    write_string(w, "model", e.model);
    write_string(w, "version", e.version);
    write_string(w, "code", status_code_name(e.code));
    w.Key("http_status");
    w.Int(http_status(e.code));
    write_string(w, "message", e.message);
    w.EndObject();
  }
  w.EndArray();
  w.Key("errors_total");
  w.Uint64(errors_total);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

HttpResponse status_json_response(const Server& server) {
  HttpResponse r;
  r.body = status_json(server);
  r.headers.emplace_back("Cache-Control", "no-store");
  harden(r);
  return r;
}

}  // namespace kiln::server::http
