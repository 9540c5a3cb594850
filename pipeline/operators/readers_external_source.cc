// SPDX-License-Identifier: Apache-2.0
// readers.external_source: samples (encoded bytes, label) the caller feeds (Pipeline::feed).
#include "pipeline/operators/operators.h"

namespace kiln::pipeline::detail {
namespace {

class ReadersExternalSource final : public Operator {
 public:
  using Operator::Operator;
  bool is_reader() const override { return true; }
  Status run(const SampleContext&, const OpArgs&, std::span<const Tensor>,
             std::vector<Tensor>*) const override {
    return internal_error("operator readers.external_source: readers are driven by the executor");
  }
};

}  // namespace

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
  return std::unique_ptr<Operator>(new ReadersExternalSource(std::move(args)));
}

}  // namespace kiln::pipeline::detail
