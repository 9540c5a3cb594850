// SPDX-License-Identifier: Apache-2.0
// Trace setting bodies with RapidJSON.
#include "server/http/trace_json.h"

#include "server/http/json_util.h"

namespace kiln::server::http {

using detail::sv;
using detail::Value;

std::string trace_settings_json(const TraceSettingValues& settings) {
  rapidjson::StringBuffer buffer;
  detail::JsonWriter w(buffer);
  w.StartObject();
  for (const auto& [name, values] : settings) {
    if (name == "trace_level") {
      w.Key(name.data(), static_cast<rapidjson::SizeType>(name.size()));
      w.StartArray();
      for (const std::string& v : values) detail::write_text(w, v);
      w.EndArray();
    } else {
      detail::write_string(w, name, values.empty() ? std::string() : values[0]);
    }
  }
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

Result<TraceSettingUpdate> parse_trace_settings_json(std::string_view body) {
  TraceSettingUpdate update;
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return update;
  rapidjson::Document doc;
  KILN_RETURN_IF_ERROR(detail::parse_json(body, doc, "the trace setting body"));
  if (!doc.IsObject()) {
    return invalid_argument_error(
        "the trace setting body must be a JSON object such as {\"trace_rate\":\"100\"}");
  }
  for (const auto& m : doc.GetObject()) {
    const std::string name = detail::replace_invalid_utf8(sv(m.name));
    const Value& v = m.value;
    auto bad = [&] {
      return invalid_argument_error(fmt::format(
          "trace setting \"{}\": give a string, an array of strings, an integer or null", name));
    };
    if (v.IsNull()) {
      update[name] = std::nullopt;
    } else if (v.IsString()) {
      update[name] = std::vector<std::string>{std::string(sv(v))};
    } else if (v.IsInt64()) {
      update[name] = std::vector<std::string>{std::to_string(v.GetInt64())};
    } else if (v.IsArray()) {
      std::vector<std::string> values;
      for (const Value& e : v.GetArray()) {
        if (!e.IsString()) return bad();
        values.emplace_back(sv(e));
      }
      update[name] = std::move(values);
    } else {
      return bad();
    }
  }
  return update;
}

std::string error_body_message(std::string_view body) {
  rapidjson::Document doc;
  if (detail::parse_json(body, doc, "").ok() && doc.IsObject()) {
    const Value* error = detail::member(doc, "error");
    if (error != nullptr && error->IsString()) return std::string(sv(*error));
  }
  return std::string(body);
}

}  // namespace kiln::server::http
