// SPDX-License-Identifier: Apache-2.0
// The RapidJSON helpers the HTTP body formats share: parsing with limits, member lookup,
// parameters, and the writer type.
#pragma once

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <string_view>

#include "core/status.h"
#include "server/core/types.h"

namespace kiln::server::http::detail {

using rapidjson::Value;
using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer, rapidjson::UTF8<>, rapidjson::UTF8<>,
                                     rapidjson::CrtAllocator, rapidjson::kWriteNanAndInfFlag>;
// Iterative parsing: deeply nested input cannot exhaust the stack.
constexpr unsigned kParseFlags = rapidjson::kParseIterativeFlag | rapidjson::kParseNanAndInfFlag |
                                 rapidjson::kParseStopWhenDoneFlag;

inline Status parse_json(std::string_view text, rapidjson::Document& doc, std::string_view what) {
  doc.Parse<kParseFlags>(text.data(), text.size());
  if (doc.HasParseError()) {
    return invalid_argument_error(fmt::format("{} is not valid JSON: {} (at byte {})", what,
                                              rapidjson::GetParseError_En(doc.GetParseError()),
                                              doc.GetErrorOffset()));
  }
  return Status();
}

inline std::string_view sv(const Value& v) {
  return {v.GetString(), v.GetStringLength()};
}

inline const Value* member(const Value& obj, const char* key) {
  auto it = obj.FindMember(key);
  return it == obj.MemberEnd() ? nullptr : &it->value;
}

inline Status parse_parameter_object(const Value& obj, Parameters& out, std::string_view where) {
  if (!obj.IsObject()) {
    return invalid_argument_error(fmt::format("{}: \"parameters\" must be an object", where));
  }
  for (const auto& m : obj.GetObject()) {
    std::string key(sv(m.name));
    const Value& v = m.value;
    if (v.IsBool()) {
      out.set(key, v.GetBool());
    } else if (v.IsInt64()) {
      out.set(key, v.GetInt64());
    } else if (v.IsNumber()) {
      out.set(key, v.GetDouble());
    } else if (v.IsString()) {
      out.set(key, std::string(sv(v)));
    } else {
      return invalid_argument_error(
          fmt::format("{}: parameter \"{}\" must be a bool, number or string", where, key));
    }
  }
  return Status();
}

inline void write_parameters(JsonWriter& w, const Parameters& p) {
  w.StartObject();
  for (const auto& [key, value] : p.values()) {
    w.Key(key.data(), static_cast<rapidjson::SizeType>(key.size()));
    switch (value.index()) {
      case 0: w.Bool(std::get<bool>(value)); break;
      case 1: w.Int64(std::get<int64_t>(value)); break;
      case 2: w.Double(std::get<double>(value)); break;
      default: {
        const std::string& s = std::get<std::string>(value);
        w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
      }
    }
  }
  w.EndObject();
}

inline void write_string(JsonWriter& w, std::string_view key, std::string_view value) {
  w.Key(key.data(), static_cast<rapidjson::SizeType>(key.size()));
  w.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
}

}  // namespace kiln::server::http::detail
