// SPDX-License-Identifier: Apache-2.0
// TFRecord framing with CRC-32C checks, the index reader, and a minimal protobuf wire-format walk
// of tf.train.Example (Features -> map<string, Feature> -> BytesList / Int64List).
#include "pipeline/readers/tfrecord.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cstring>
#include <optional>
#include <sstream>

#include "core/mapped_file.h"

namespace kiln::pipeline {
namespace {

const std::array<uint32_t, 256>& crc32c_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

uint32_t load_u32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// A cursor over protobuf wire format; every read checks the bounds.
class Wire {
 public:
  explicit Wire(std::span<const uint8_t> bytes) : p_(bytes.data()), end_(p_ + bytes.size()) {}
  bool done() const { return p_ >= end_; }
  std::optional<uint64_t> varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && p_ < end_; shift += 7) {
      const uint8_t b = *p_++;
      v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) return v;
    }
    return std::nullopt;
  }
  std::optional<std::span<const uint8_t>> bytes() {
    auto n = varint();
    if (!n || *n > static_cast<uint64_t>(end_ - p_)) return std::nullopt;
    std::span<const uint8_t> out(p_, static_cast<size_t>(*n));
    p_ += *n;
    return out;
  }
  // Skips a field of `wire_type`; false when malformed.
  bool skip(uint64_t wire_type) {
    switch (wire_type) {
      case 0: return varint().has_value();
      case 1: return advance(8);
      case 2: return bytes().has_value();
      case 5: return advance(4);
      default: return false;
    }
  }

 private:
  bool advance(size_t n) {
    if (n > static_cast<size_t>(end_ - p_)) return false;
    p_ += n;
    return true;
  }
  const uint8_t* p_;
  const uint8_t* end_;
};

// The first value of a Feature's list of kind `kind` (1: bytes, 3: int64), if present.
struct FeatureValue {
  std::optional<std::span<const uint8_t>> bytes;
  std::optional<int64_t> int64;
};

std::optional<FeatureValue> parse_feature(std::span<const uint8_t> feature) {
  FeatureValue out;
  Wire w(feature);
  while (!w.done()) {
    auto tag = w.varint();
    if (!tag) return std::nullopt;
    const uint64_t field = *tag >> 3, type = *tag & 7;
    if ((field == 1 || field == 3) && type == 2) {
      auto list = w.bytes();
      if (!list) return std::nullopt;
      Wire l(*list);
      while (!l.done()) {
        auto t = l.varint();
        if (!t) return std::nullopt;
        if ((*t >> 3) == 1 && field == 1 && (*t & 7) == 2) {
          auto v = l.bytes();
          if (!v) return std::nullopt;
          if (!out.bytes) out.bytes = *v;
        } else if ((*t >> 3) == 1 && field == 3 && (*t & 7) == 2) {  // packed int64s
          auto packed = l.bytes();
          if (!packed) return std::nullopt;
          Wire pw(*packed);
          auto v = pw.varint();
          if (v && !out.int64) out.int64 = static_cast<int64_t>(*v);
        } else if ((*t >> 3) == 1 && field == 3 && (*t & 7) == 0) {
          auto v = l.varint();
          if (!v) return std::nullopt;
          if (!out.int64) out.int64 = static_cast<int64_t>(*v);
        } else if (!l.skip(*t & 7)) {
          return std::nullopt;
        }
      }
    } else if (!w.skip(type)) {
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace

uint32_t tfrecord_masked_crc(std::span<const uint8_t> bytes) {
  const auto& table = crc32c_table();
  uint32_t c = 0xffffffffu;
  for (uint8_t b : bytes) c = table[(c ^ b) & 0xff] ^ (c >> 8);
  c ^= 0xffffffffu;
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

Result<std::vector<TfRecordSpan>> read_tfrecord_index(const std::string& index_path,
                                                      int64_t file_size) {
  KILN_ASSIGN_OR_RETURN(std::string text, read_file(index_path));
  std::vector<TfRecordSpan> out;
  std::istringstream lines(text);
  std::string line;
  for (int line_no = 1; std::getline(lines, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    TfRecordSpan span;
    std::istringstream fields(line);
    if (!(fields >> span.offset >> span.size) || span.offset < 0 || span.size < 16 ||
        span.offset + span.size > file_size) {
      return invalid_argument_error(fmt::format(
          "tfrecord index \"{}\" line {}: expected \"offset size\" of a record inside the {}-byte "
          "file, got \"{}\" (make one with tfrecord2idx)",
          index_path, line_no, file_size, line));
    }
    out.push_back(span);
  }
  if (out.empty()) {
    return invalid_argument_error(fmt::format("tfrecord index \"{}\" is empty", index_path));
  }
  return out;
}

Result<TfExample> parse_tfrecord_example(std::span<const uint8_t> record,
                                         std::string_view encoded_key, std::string_view label_key,
                                         std::string_view where) {
  auto bad = [&](std::string_view why) {
    return data_loss_error(fmt::format("tfrecord {}: {}", where, why));
  };
  if (record.size() < 16) return bad("record shorter than its 16-byte framing");
  uint64_t length = 0;
  std::memcpy(&length, record.data(), 8);  // little-endian on every target kiln builds for
  if (length != record.size() - 16) {
    return bad(fmt::format("record length {} does not match its {} payload bytes (wrong index?)",
                           length, record.size() - 16));
  }
  if (tfrecord_masked_crc(record.first(8)) != load_u32(record.data() + 8)) {
    return bad("length checksum mismatch (wrong index or corrupt file)");
  }
  std::span<const uint8_t> payload = record.subspan(12, length);
  if (tfrecord_masked_crc(payload) != load_u32(record.data() + 12 + length)) {
    return bad("payload checksum mismatch (corrupt record)");
  }
  TfExample out;
  bool have_encoded = false;
  Wire example(payload);
  while (!example.done()) {
    auto tag = example.varint();
    if (!tag) return bad("malformed tf.train.Example");
    if ((*tag >> 3) != 1 || (*tag & 7) != 2) {
      if (!example.skip(*tag & 7)) return bad("malformed tf.train.Example");
      continue;
    }
    auto features = example.bytes();
    if (!features) return bad("malformed Features");
    Wire map(*features);
    while (!map.done()) {
      auto t = map.varint();
      if (!t) return bad("malformed Features");
      if ((*t >> 3) != 1 || (*t & 7) != 2) {
        if (!map.skip(*t & 7)) return bad("malformed Features");
        continue;
      }
      auto entry = map.bytes();
      if (!entry) return bad("malformed feature entry");
      Wire e(*entry);
      std::string_view key;
      std::optional<std::span<const uint8_t>> value;
      while (!e.done()) {
        auto et = e.varint();
        if (!et) return bad("malformed feature entry");
        if ((*et & 7) == 2 && ((*et >> 3) == 1 || (*et >> 3) == 2)) {
          auto b = e.bytes();
          if (!b) return bad("malformed feature entry");
          if ((*et >> 3) == 1) {
            key = std::string_view(reinterpret_cast<const char*>(b->data()), b->size());
          } else {
            value = *b;
          }
        } else if (!e.skip(*et & 7)) {
          return bad("malformed feature entry");
        }
      }
      if (!value || (key != encoded_key && key != label_key)) continue;
      auto feature = parse_feature(*value);
      if (!feature) return bad(fmt::format("malformed feature \"{}\"", key));
      if (key == encoded_key) {
        if (!feature->bytes) return bad(fmt::format("feature \"{}\" has no bytes value", key));
        out.encoded = *feature->bytes;
        have_encoded = true;
      } else if (feature->int64) {
        out.label = *feature->int64;
      }
    }
  }
  if (!have_encoded) return bad(fmt::format("no bytes feature \"{}\"", encoded_key));
  return out;
}

}  // namespace kiln::pipeline
