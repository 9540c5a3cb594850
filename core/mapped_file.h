// SPDX-License-Identifier: Apache-2.0
// MappedFile: a whole file mapped read-only into memory, shared by the tensors that point into it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/status.h"

namespace kiln {

class MappedFile {
 public:
  // Maps `path` read-only. Errors name the path: kNotFound for a missing file, kInvalidArgument for
  // a directory, kPermissionDenied when it cannot be read. An empty file maps to an empty span.
  static Result<std::shared_ptr<const MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

// Drops the whole pages inside `range`, which must lie in a read-only file mapping (a MappedFile),
// from the process's resident memory: they are read again from the file (the page cache) if
// touched later. For bytes read once (checksummed, packed), so they do not stay resident.
void release_file_pages(std::span<const uint8_t> range);

// Reads a whole file into a string; errors name the path.
Result<std::string> read_file(const std::string& path);
// Writes `bytes` to `path` through a temporary file and a rename, so readers never see a partial
// file; errors name the path.
Status write_file_atomic(const std::string& path, std::span<const uint8_t> bytes);

}  // namespace kiln
