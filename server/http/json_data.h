// SPDX-License-Identifier: Apache-2.0
// Streaming the "data" arrays of an inference request: the leaf values of inputs[i].data are
// collected while the JSON is parsed, 9 bytes each, instead of as DOM values (16 bytes each, held
// twice while an array is built). A 228 MiB request peaked at 2.37 GB with the DOM (issue 28).
#pragma once

#include <fmt/format.h>
#include <rapidjson/document.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/status.h"

namespace kiln::server::http::detail {

// The flattened leaf values of one input's "data" (nested arrays are flattened, as the DOM path
// does); a value that is not a scalar (an object, null) is kept as a leaf that converts to nothing.
class JsonData {
 public:
  enum Kind : uint8_t { kBool, kInt, kUint, kDouble, kString, kOther };

  void add(Kind kind, uint64_t bits) {
    kinds_.push_back(kind);
    bits_.push_back(bits);
  }
  void add_string(const char* s, size_t n) {
    add(kString, strings_.size());
    strings_.emplace_back(s, n);
  }
  int64_t size() const { return static_cast<int64_t>(kinds_.size()); }

  // Converts every leaf into `out` (n elements, n == size()) with the DOM path's checks and
  // messages: "<where>: element <i>: expected ...".
  template <class T>
  Status read(T* out, std::string_view where) const {
    for (size_t i = 0; i < kinds_.size(); ++i) {
      KILN_RETURN_IF_ERROR(convert(i, out[i], where));
    }
    return Status();
  }

 private:
  double as_double(size_t i) const {
    const uint64_t b = bits_[i];
    if (kinds_[i] == kInt) return static_cast<double>(static_cast<int64_t>(b));
    if (kinds_[i] == kUint) return static_cast<double>(b);
    double d;
    std::memcpy(&d, &b, sizeof(d));
    return d;
  }

  template <class T>
  Status convert(size_t i, T& out, std::string_view where) const {
    auto bad = [&](std::string_view expected) {
      return invalid_argument_error(fmt::format("{}: element {}: expected {}", where, i, expected));
    };
    const Kind kind = static_cast<Kind>(kinds_[i]);
    const uint64_t b = bits_[i];
    if constexpr (std::is_same_v<T, bool>) {
      if (kind != kBool) return bad("true or false (datatype BOOL)");
      out = b != 0;
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (kind != kString) return bad("a string (datatype BYTES)");
      out = strings_[b];
    } else if constexpr (std::is_integral_v<T>) {
      if constexpr (std::is_same_v<T, uint64_t>) {
        if (kind != kUint) return bad("an integer in 0..2^64-1");
        out = b;
      } else {
        if (kind != kInt && !(kind == kUint && b <= uint64_t{INT64_MAX})) return bad("an integer");
        const int64_t x = static_cast<int64_t>(b);
        if (x < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
            (x > 0 &&
             static_cast<uint64_t>(x) > static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
          return invalid_argument_error(
              fmt::format("{}: element {}: {} is out of range of the datatype", where, i, x));
        }
        out = static_cast<T>(x);
      }
    } else {
      if (kind != kInt && kind != kUint && kind != kDouble) return bad("a number");
      if constexpr (std::is_same_v<T, double>) {
        out = as_double(i);
      } else {
        out = T(static_cast<float>(as_double(i)));
      }
    }
    return Status();
  }

  std::vector<uint8_t> kinds_;
  std::vector<uint64_t> bits_;  // the bool, int64, uint64, double bits, or the string's index
  std::vector<std::string> strings_;
};

// Parses an inference request's JSON into `doc`, except each inputs[i].data, which becomes
// data[i] (and null in `doc`). Errors (invalid JSON, data nested deeper than `max_nesting`) are
// invalid arguments naming `what`.
Status parse_request_json(std::string_view text, rapidjson::Document& doc,
                          std::vector<JsonData>& data, int max_nesting, std::string_view what);

}  // namespace kiln::server::http::detail
