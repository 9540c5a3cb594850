// SPDX-License-Identifier: Apache-2.0
// ByteWriter and ByteReader: fixed-width little-endian numbers and length-prefixed strings (the
// encoding of artifact headers, graphs and packed weights).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/status.h"

namespace kiln {

static_assert(std::endian::native == std::endian::little,
              "the artifact format is little-endian; a big-endian host needs byte swaps here");

// Appends fixed-width little-endian numbers and length-prefixed strings to a byte vector.
class ByteWriter {
 public:
  template <class T>
  requires std::is_arithmetic_v<T>
  void put(T value) {
    size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &value, sizeof(T));
  }
  void put_string(std::string_view s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  void put_bytes(std::span<const uint8_t> b) { bytes_.insert(bytes_.end(), b.begin(), b.end()); }

  size_t size() const { return bytes_.size(); }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Reads what ByteWriter wrote, never past the end: a read beyond it fails with an error naming
// `what` (the section being read) and leaves the reader failed.
class ByteReader {
 public:
  ByteReader(std::span<const uint8_t> bytes, std::string what)
      : bytes_(bytes), what_(std::move(what)) {}

  template <class T>
  requires std::is_arithmetic_v<T> Result<T> get() {
    KILN_RETURN_IF_ERROR(need(sizeof(T)));
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  Result<std::string> get_string() {
    KILN_ASSIGN_OR_RETURN(uint32_t n, get<uint32_t>());
    KILN_RETURN_IF_ERROR(need(n));
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  // A count of items that each take at least `min_item_bytes`: fails when the rest of the input
  // could not hold that many, so a corrupt count never allocates gigabytes.
  Result<uint32_t> get_count(size_t min_item_bytes) {
    KILN_ASSIGN_OR_RETURN(uint32_t n, get<uint32_t>());
    if (min_item_bytes > 0 && n > remaining() / min_item_bytes) {
      return error(std::to_string(n) + " items cannot fit in the " + std::to_string(remaining()) +
                   " bytes left");
    }
    return n;
  }

  size_t remaining() const { return bytes_.size() - pos_; }
  size_t position() const { return pos_; }
  bool at_end() const { return pos_ == bytes_.size(); }

  // A data-loss error about this input: "<what> is malformed at byte N: <message>".
  Status error(std::string_view message) const {
    return data_loss_error(what_ + " is malformed at byte " + std::to_string(pos_) + ": " +
                           std::string(message));
  }

 private:
  Status need(size_t n) const {
    if (n > remaining()) {
      return error("needs " + std::to_string(n) + " more bytes, " + std::to_string(remaining()) +
                   " are left");
    }
    return Status();
  }

  std::span<const uint8_t> bytes_;
  std::string what_;
  size_t pos_ = 0;
};

}  // namespace kiln
