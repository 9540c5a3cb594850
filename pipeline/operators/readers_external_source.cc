// SPDX-License-Identifier: Apache-2.0
// readers.external_source: samples (encoded bytes, label) the caller feeds (Pipeline::feed).
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {

const OperatorSchema& readers_external_source_schema() {
  static const OperatorSchema schema{
      "readers.external_source",
      "encoded images and labels fed by the caller (Pipeline::feed), e.g. a server's requests",
      {},
      {"encoded", "label"},
      {}};
  return schema;
}

Result<std::unique_ptr<Operator>> make_readers_external_source(OpArgs args) {
  return std::unique_ptr<Operator>(new ReaderOperator(std::move(args)));
}

}  // namespace kiln::pipeline::detail
