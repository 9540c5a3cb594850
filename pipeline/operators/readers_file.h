// SPDX-License-Identifier: Apache-2.0
// readers.file: the reader options its arguments describe, and how one sample is read.
#pragma once

#include "core/tensor.h"
#include "pipeline/readers/coco.h"
#include "pipeline/readers/file_reader.h"
#include "pipeline/schema/schema.h"

namespace kiln::pipeline {

// `own` followed by the arguments every reader shares (shard_id, num_shards, random_shuffle, seed,
// last_batch_policy), for reader schemas.
std::vector<ArgSpec> with_common_reader_args(std::vector<ArgSpec> own);

// Fills the arguments every reader shares: shard_id, num_shards, random_shuffle, seed (-1 takes
// `pipeline_seed`) and last_batch_policy.
Status read_common_reader_args(const OpArgs& args, uint64_t pipeline_seed, FileReaderOptions* o);

// The options of a validated readers.file instance; a seed argument of -1 takes `pipeline_seed`.
Result<FileReaderOptions> file_reader_options(const OpArgs& args, uint64_t pipeline_seed);

// The options of a validated readers.tfrecord instance.
Result<FileReaderOptions> tfrecord_reader_options(const OpArgs& args, uint64_t pipeline_seed);

// The options of a validated readers.coco instance: the instances file, and the reader settings.
CocoOptions coco_options(const OpArgs& args);
Result<FileReaderOptions> coco_reader_options(const OpArgs& args, uint64_t pipeline_seed);

// The bytes of `path` as a 1-D uint8 tensor; with offset >= 0 only [offset, offset + size).
// Errors name the path.
Result<Tensor> read_encoded(const std::string& path, int64_t offset = -1, int64_t size = 0);

}  // namespace kiln::pipeline
