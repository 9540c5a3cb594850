// SPDX-License-Identifier: Apache-2.0
// The CLI's JSON writer.
#include "tools/json_writer.h"

#include <fmt/format.h>

#include <cmath>

namespace kiln::tools {

JsonWriter& JsonWriter::key(std::string_view k) {
  writer_.Key(k.data(), static_cast<rapidjson::SizeType>(k.size()), true);
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view v) {
  writer_.String(v.data(), static_cast<rapidjson::SizeType>(v.size()), true);
  return *this;
}

JsonWriter& JsonWriter::value(double v) {
  if (std::isfinite(v)) {
    writer_.Double(v);
  } else {
    writer_.Null();
  }
  return *this;
}

JsonWriter& JsonWriter::value(float v) {
  if (!std::isfinite(v)) return null();
  const std::string text = fmt::format("{}", v);
  writer_.RawValue(text.data(), text.size(), rapidjson::kNumberType);
  return *this;
}

JsonWriter& JsonWriter::value(const std::vector<std::string>& v) {
  begin_array();
  for (const std::string& s : v) value(s);
  return end_array();
}

JsonWriter& JsonWriter::value(const std::vector<int64_t>& v) {
  begin_array();
  for (int64_t x : v) value(x);
  return end_array();
}

JsonWriter& JsonWriter::value(const std::vector<double>& v) {
  begin_array();
  for (double x : v) value(x);
  return end_array();
}

}  // namespace kiln::tools
