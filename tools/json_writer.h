// SPDX-License-Identifier: Apache-2.0
// The CLI's JSON output (`--json`): a small streaming writer over RapidJSON, so every subcommand
// escapes strings and writes numbers the same way.
#pragma once

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::tools {

// Builds one JSON document. Keys and values alternate inside objects, as in RapidJSON; a
// non-finite double is written as null (JSON has no NaN or infinity).
class JsonWriter {
 public:
  JsonWriter() : writer_(buffer_) {}

  JsonWriter& begin_object() {
    writer_.StartObject();
    return *this;
  }
  JsonWriter& end_object() {
    writer_.EndObject();
    return *this;
  }
  JsonWriter& begin_array() {
    writer_.StartArray();
    return *this;
  }
  JsonWriter& end_array() {
    writer_.EndArray();
    return *this;
  }
  JsonWriter& key(std::string_view k);

  JsonWriter& value(std::string_view v);
  JsonWriter& value(const char* v) { return value(std::string_view(v)); }
  JsonWriter& value(const std::string& v) { return value(std::string_view(v)); }
  JsonWriter& value(bool v) {
    writer_.Bool(v);
    return *this;
  }
  JsonWriter& value(double v);
  // The shortest decimal that reads back as `v` ("0.1", not 0.10000000149011612).
  JsonWriter& value(float v);
  template <std::integral T>
  requires(!std::same_as<T, bool>) JsonWriter& value(T v) {
    if constexpr (std::is_signed_v<T>) {
      writer_.Int64(static_cast<int64_t>(v));
    } else {
      writer_.Uint64(static_cast<uint64_t>(v));
    }
    return *this;
  }
  JsonWriter& value(const std::vector<std::string>& v);
  JsonWriter& value(const std::vector<int64_t>& v);
  JsonWriter& value(const std::vector<double>& v);
  JsonWriter& null() {
    writer_.Null();
    return *this;
  }

  // key(k).value(v)
  template <class T>
  JsonWriter& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

  // The document so far, with a newline.
  std::string str() const { return std::string(buffer_.GetString(), buffer_.GetSize()) + "\n"; }

 private:
  rapidjson::StringBuffer buffer_;
  rapidjson::Writer<rapidjson::StringBuffer> writer_;
};

}  // namespace kiln::tools
