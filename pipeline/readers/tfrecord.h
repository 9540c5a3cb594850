// SPDX-License-Identifier: Apache-2.0
// TFRecord files of tf.train.Example records: the index (DALI's tfrecord2idx format) and parsing.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kiln::pipeline {

// One record of a TFRecord file: where its framed bytes start and how many there are (the 12-byte
// header, the payload and the 4-byte footer), as tfrecord2idx writes them: "offset size" per line.
struct TfRecordSpan {
  int64_t offset = 0;
  int64_t size = 0;
};

// Reads an index file; errors name the file and the line. `file_size` bounds the spans.
Result<std::vector<TfRecordSpan>> read_tfrecord_index(const std::string& index_path,
                                                      int64_t file_size);

// The fields of one tf.train.Example that a classification pipeline needs.
struct TfExample {
  std::span<const uint8_t> encoded;  // the first value of the bytes feature
  int64_t label = 0;                 // the first value of the int64 feature (0 when absent)
};

// Parses one framed record (length, its CRC, payload, payload CRC; the CRC-32C checksums are
// verified) as a tf.train.Example and takes `encoded_key` (a bytes feature, required) and
// `label_key` (an int64 feature, optional). Errors name `where` and what is wrong.
Result<TfExample> parse_tfrecord_example(std::span<const uint8_t> record,
                                         std::string_view encoded_key, std::string_view label_key,
                                         std::string_view where);

// CRC-32C as TFRecord masks it: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t tfrecord_masked_crc(std::span<const uint8_t> bytes);

}  // namespace kiln::pipeline
