// SPDX-License-Identifier: Apache-2.0
// The RapidJSON helpers the HTTP body formats share: parsing with limits, member lookup,
// parameters, and the writer type.
#pragma once

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <string>
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

inline bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
    } else {
      return false;
    }
    if (i + len > n || p[i + 1] < lo || p[i + 1] > hi) return false;
    for (size_t k = 2; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

// `s` with every byte that does not start a valid UTF-8 sequence replaced by U+FFFD, so text from
// a client (a URL, a request id, a parameter) never makes the JSON written around it invalid.
inline std::string replace_invalid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    // The longest valid sequence here is 1-4 bytes long; try them shortest first.
    size_t len = 0;
    for (size_t k = 1; k <= 4 && i + k <= s.size(); ++k) {
      if (valid_utf8(s.substr(i, k))) {
        len = k;
        break;
      }
    }
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.data() + i, len);
      i += len;
    }
  }
  return out;
}

// Writes `s` as a JSON string, invalid UTF-8 replaced (see replace_invalid_utf8).
inline void write_text(JsonWriter& w, std::string_view s) {
  if (valid_utf8(s)) {
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
    return;
  }
  const std::string valid = replace_invalid_utf8(s);
  w.String(valid.data(), static_cast<rapidjson::SizeType>(valid.size()));
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
        write_text(w, std::get<std::string>(value));
      }
    }
  }
  w.EndObject();
}

inline void write_string(JsonWriter& w, std::string_view key, std::string_view value) {
  w.Key(key.data(), static_cast<rapidjson::SizeType>(key.size()));
  write_text(w, value);
}

}  // namespace kiln::server::http::detail
