// SPDX-License-Identifier: Apache-2.0
// readers.tfrecord: (encoded, label) samples from tf.train.Example records of a TFRecord file.
#include "pipeline/operators/operators.h"
#include "pipeline/operators/readers_file.h"

namespace kiln::pipeline {

Result<FileReaderOptions> tfrecord_reader_options(const OpArgs& args, uint64_t pipeline_seed) {
  FileReaderOptions o;
  o.tfrecord_path = args.get_string("path");
  o.tfrecord_index = args.get_string("index_path");
  KILN_RETURN_IF_ERROR(read_common_reader_args(args, pipeline_seed, &o));
  return o;
}

namespace detail {

const OperatorSchema& readers_tfrecord_schema() {
  static const OperatorSchema schema{
      "readers.tfrecord",
      "reads encoded images and int64 labels from tf.train.Example records of a TFRecord file",
      {},
      {"encoded", "label"},
      with_common_reader_args({
          {"path", ArgType::kString, std::nullopt, "the TFRecord file"},
          {"index_path", ArgType::kString, std::nullopt,
           "its index: \"offset size\" per record (DALI's tfrecord2idx writes it)"},
          {"encoded_key", ArgType::kString, std::string("image/encoded"),
           "bytes feature holding the encoded image"},
          {"label_key", ArgType::kString, std::string("image/class/label"),
           "int64 feature holding the label (0 when absent)"},
      })};
  return schema;
}

Result<std::unique_ptr<Operator>> make_readers_tfrecord(OpArgs args) {
  KILN_RETURN_IF_ERROR(tfrecord_reader_options(args, 0).status());
  return std::unique_ptr<Operator>(new ReaderOperator(std::move(args)));
}

}  // namespace detail
}  // namespace kiln::pipeline
