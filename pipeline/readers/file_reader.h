// SPDX-License-Identifier: Apache-2.0
// The file reader: lists (path, label) samples, shards and shuffles them per epoch, forms batches.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kiln::pipeline {

// What happens to the last batch of an epoch when fewer than batch_size samples are left.
enum class LastBatchPolicy {
  kFill,     // full size: the missing samples repeat the shard's epoch order from its start
  kDrop,     // dropped
  kPartial,  // returned short
};

// "fill", "drop" or "partial"; else an error naming the value.
Result<LastBatchPolicy> parse_last_batch_policy(std::string_view name);

struct FileEntry {
  std::string path;
  int32_t label = 0;
  // A byte range of `path` holding the sample (a TFRecord record); offset -1: the whole file.
  int64_t offset = -1;
  int64_t size = 0;
};

// One sample of an epoch's stream for this shard.
struct SampleRef {
  int64_t entry = 0;     // index into entries()
  int64_t position = 0;  // position in this shard's stream for the epoch (seeds derive from it)
  bool padded = false;   // a repeat added by the fill policy
};

// Where a reader stands: enough to resume an epoch exactly where it was left (the order of an epoch
// is a function of the seed and the epoch, so it is not stored).
struct ReaderPosition {
  int64_t epoch = 0;
  int64_t cursor = 0;   // samples of this shard's epoch order taken so far
  int64_t emitted = 0;  // positions handed out, padding included (seeds derive from them)
};

struct FileReaderOptions {
  // Either a root folder whose sub-folders are the classes (label = index of the sub-folder in
  // sorted order; files inside are sorted; hidden entries skipped) ...
  std::string file_root;
  // ... or a text file with "path label" per line (paths relative to file_root when it is set).
  std::string file_list;
  // ... or the records of a TFRecord file, listed by its index (DALI's tfrecord2idx format).
  std::string tfrecord_path;
  std::string tfrecord_index;
  int64_t shard_id = 0;
  int64_t num_shards = 1;
  bool random_shuffle = false;
  uint64_t seed = 0;
  LastBatchPolicy last_batch_policy = LastBatchPolicy::kPartial;
};

// Not thread-safe: one thread (the executor's producer) drives it.
class FileReader {
 public:
  // Lists the samples. Errors name the folder or list file (and the line of a malformed list).
  static Result<FileReader> open(const FileReaderOptions& options);
  // A reader over `entries` listed elsewhere (e.g. a COCO instances file); the sources in
  // `options` are ignored, its shard, shuffle and last-batch settings apply.
  static Result<FileReader> from_entries(std::vector<FileEntry> entries,
                                         const FileReaderOptions& options);

  const std::vector<FileEntry>& entries() const { return entries_; }
  // The number of samples in this shard per epoch (before last-batch handling).
  int64_t shard_size() const { return static_cast<int64_t>(order_.size()); }
  int64_t epoch() const { return epoch_; }

  // Starts `epoch`: the whole data set is shuffled with (seed, epoch) — the same order on every
  // shard — and this shard takes its contiguous slice, so the shards cover every sample exactly
  // once per epoch.
  void start_epoch(int64_t epoch);
  // Moves to the next epoch (epoch() + 1).
  void reset() { start_epoch(epoch_ + 1); }

  ReaderPosition position() const { return {epoch_, cursor_, emitted_}; }
  // Resumes at `position` (from position() of a reader with the same options). Errors when it
  // lies outside the epoch.
  Status restore(const ReaderPosition& position);

  // The next batch of the epoch per the last-batch policy; empty at the end of the epoch.
  std::vector<SampleRef> next_batch(int64_t batch_size);
  // One more sample of the epoch (no padding), e.g. to replace a skipped one; nullopt at the end.
  std::optional<SampleRef> next_sample();

 private:
  FileReader() = default;

  FileReaderOptions options_;
  std::vector<FileEntry> entries_;
  std::vector<int64_t> order_;  // this shard's entries for the current epoch
  int64_t epoch_ = 0;
  int64_t cursor_ = 0;   // next index into order_
  int64_t emitted_ = 0;  // positions handed out this epoch, padding included
};

}  // namespace kiln::pipeline
