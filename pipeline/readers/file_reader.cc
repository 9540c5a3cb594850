// SPDX-License-Identifier: Apache-2.0
// The file reader: folder and list parsing, per-epoch seeded shuffle, sharding and batching.
#include "pipeline/readers/file_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <numeric>
#include <random>
#include <sstream>

#include "core/mapped_file.h"
#include "pipeline/readers/tfrecord.h"

namespace kiln::pipeline {
namespace {

namespace fs = std::filesystem;

Result<std::vector<FileEntry>> list_folder(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return not_found_error(fmt::format("file reader: root folder \"{}\" does not exist", root));
  }
  std::vector<std::string> classes;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    std::string name = entry.path().filename().string();
    if (!name.empty() && name[0] != '.' && entry.is_directory()) classes.push_back(name);
  }
  if (ec) return errno_error(ec.value(), fmt::format("file reader: listing \"{}\"", root));
  std::sort(classes.begin(), classes.end());
  std::vector<FileEntry> out;
  for (size_t label = 0; label < classes.size(); ++label) {
    fs::path dir = fs::path(root) / classes[label];
    std::vector<std::string> files;
    for (const auto& entry : fs::recursive_directory_iterator(dir, ec)) {
      std::string name = entry.path().filename().string();
      if (!name.empty() && name[0] != '.' && entry.is_regular_file()) {
        files.push_back(entry.path().string());
      }
    }
    if (ec)
      return errno_error(ec.value(), fmt::format("file reader: listing \"{}\"", dir.string()));
    std::sort(files.begin(), files.end());
    for (auto& f : files) out.push_back({std::move(f), static_cast<int32_t>(label)});
  }
  if (out.empty()) {
    return invalid_argument_error(
        fmt::format("file reader: root folder \"{}\" has no files in class sub-folders", root));
  }
  return out;
}

Result<std::vector<FileEntry>> parse_list(const std::string& list, const std::string& root) {
  KILN_ASSIGN_OR_RETURN(std::string text, read_file(list));
  std::vector<FileEntry> out;
  std::istringstream lines(text);
  std::string line;
  for (int line_no = 1; std::getline(lines, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    size_t end = line.find_last_not_of(" \t");
    size_t split = line.find_last_of(" \t", end);
    int32_t label = 0;
    const char* first = line.data() + (split == std::string::npos ? 0 : split + 1);
    const char* last = line.data() + end + 1;
    auto [ptr, err] = std::from_chars(first, last, label);
    if (split == std::string::npos || split < start || err != std::errc() || ptr != last ||
        label < 0) {
      return invalid_argument_error(fmt::format(
          "file list \"{}\" line {}: expected \"path label\" with a label >= 0, got \"{}\"", list,
          line_no, line));
    }
    std::string path = line.substr(start, line.find_last_not_of(" \t", split) - start + 1);
    if (!root.empty() && fs::path(path).is_relative()) path = (fs::path(root) / path).string();
    out.push_back({std::move(path), label});
  }
  if (out.empty()) return invalid_argument_error(fmt::format("file list \"{}\" is empty", list));
  return out;
}

}  // namespace

Result<LastBatchPolicy> parse_last_batch_policy(std::string_view name) {
  if (name == "fill") return LastBatchPolicy::kFill;
  if (name == "drop") return LastBatchPolicy::kDrop;
  if (name == "partial") return LastBatchPolicy::kPartial;
  return invalid_argument_error(
      fmt::format("last batch policy \"{}\": expected fill, drop or partial", name));
}

Result<FileReader> FileReader::open(const FileReaderOptions& options) {
  std::vector<FileEntry> entries;
  if (!options.tfrecord_path.empty()) {
    std::error_code ec;
    const auto file_size = static_cast<int64_t>(fs::file_size(options.tfrecord_path, ec));
    if (ec) {
      return not_found_error(fmt::format("tfrecord reader: cannot open \"{}\": {}",
                                         options.tfrecord_path, ec.message()));
    }
    KILN_ASSIGN_OR_RETURN(std::vector<TfRecordSpan> spans,
                          read_tfrecord_index(options.tfrecord_index, file_size));
    for (const TfRecordSpan& span : spans) {
      entries.push_back({options.tfrecord_path, 0, span.offset, span.size});
    }
  } else if (!options.file_list.empty()) {
    KILN_ASSIGN_OR_RETURN(entries, parse_list(options.file_list, options.file_root));
  } else if (!options.file_root.empty()) {
    KILN_ASSIGN_OR_RETURN(entries, list_folder(options.file_root));
  } else {
    return invalid_argument_error("file reader: set file_root or file_list");
  }
  return from_entries(std::move(entries), options);
}

Result<FileReader> FileReader::from_entries(std::vector<FileEntry> entries,
                                            const FileReaderOptions& options) {
  if (options.num_shards < 1 || options.shard_id < 0 || options.shard_id >= options.num_shards) {
    return invalid_argument_error(
        fmt::format("file reader: shard_id {} must be in [0, num_shards {})", options.shard_id,
                    options.num_shards));
  }
  FileReader reader;
  reader.options_ = options;
  reader.entries_ = std::move(entries);
  if (static_cast<int64_t>(reader.entries_.size()) < options.num_shards) {
    return invalid_argument_error(fmt::format("file reader: {} samples cannot fill {} shards",
                                              reader.entries_.size(), options.num_shards));
  }
  reader.start_epoch(0);
  return reader;
}

void FileReader::start_epoch(int64_t epoch) {
  epoch_ = epoch;
  cursor_ = 0;
  emitted_ = 0;
  const int64_t n = static_cast<int64_t>(entries_.size());
  std::vector<int64_t> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  if (options_.random_shuffle) {
    std::seed_seq seq{static_cast<uint32_t>(options_.seed),
                      static_cast<uint32_t>(options_.seed >> 32), static_cast<uint32_t>(epoch),
                      static_cast<uint32_t>(epoch >> 32), 0x5eedu};
    std::mt19937_64 rng(seq);
    // Fisher-Yates with our own bounded draws: std::shuffle's output differs between libraries.
    for (int64_t i = n - 1; i > 0; --i) {
      int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
      std::swap(all[i], all[j]);
    }
  }
  const int64_t begin = options_.shard_id * n / options_.num_shards;
  const int64_t end = (options_.shard_id + 1) * n / options_.num_shards;
  order_.assign(all.begin() + begin, all.begin() + end);
}

Status FileReader::restore(const ReaderPosition& position) {
  if (position.epoch < 0 || position.cursor < 0 || position.cursor > shard_size() ||
      position.emitted < position.cursor) {
    return invalid_argument_error(fmt::format(
        "file reader: cannot restore position (epoch {}, cursor {}, emitted {}) in a shard of {} "
        "samples",
        position.epoch, position.cursor, position.emitted, shard_size()));
  }
  start_epoch(position.epoch);
  cursor_ = position.cursor;
  emitted_ = position.emitted;
  return Status();
}

std::optional<SampleRef> FileReader::next_sample() {
  if (cursor_ >= shard_size()) return std::nullopt;
  return SampleRef{order_[cursor_++], emitted_++, false};
}

std::vector<SampleRef> FileReader::next_batch(int64_t batch_size) {
  KILN_CHECK(batch_size > 0, "next_batch: batch_size must be positive");
  std::vector<SampleRef> batch;
  const int64_t left = shard_size() - cursor_;
  if (left <= 0) return batch;
  if (left < batch_size && options_.last_batch_policy == LastBatchPolicy::kDrop) {
    cursor_ = shard_size();
    return batch;
  }
  while (static_cast<int64_t>(batch.size()) < batch_size) {
    std::optional<SampleRef> s = next_sample();
    if (!s) break;
    batch.push_back(*s);
  }
  if (options_.last_batch_policy == LastBatchPolicy::kFill) {
    for (int64_t i = 0; static_cast<int64_t>(batch.size()) < batch_size; ++i) {
      batch.push_back(SampleRef{order_[i % shard_size()], emitted_++, true});
    }
  }
  return batch;
}

}  // namespace kiln::pipeline
