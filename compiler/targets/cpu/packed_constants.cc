// SPDX-License-Identifier: Apache-2.0
// Dropping the plain copies of packed weights from a graph, and unpacking them for an artifact.
#include "compiler/targets/cpu/packed_constants.h"

#include <fmt/format.h>
#include <malloc.h>

#include <unordered_map>

#include "compiler/ir/clone.h"
#include "compiler/ops/all_ops.h"

namespace kiln::compiler::cpu {

bool DroppedConstants::drop(const Value* v, const ReleaseAfterPacking& packings) {
  const Tensor* t = v->constant_value();
  if (t == nullptr || t->nbytes() == 0 || !find_dnnl_type(t->dtype())) return false;
  const ReleaseAfterPacking::Packing* p = packings.packing_of(t->raw_data());
  if (p == nullptr || p->plain.get_size() != t->nbytes() ||
      p->plain.data_type() != dnnl_type(t->dtype())) {
    return false;
  }
  const size_t bytes = t->nbytes();
  dropped_.push_back({v, *p});
  bytes_ += bytes;
  v->producer()->set_op(Op(ops::Constant{}));
  // The freed storage is a hole in glibc's heap that the (larger, 64-byte aligned) packed copies
  // do not fit into: without a trim its pages stay resident and the peak holds the weights twice.
  if (bytes >= kTrimBytes) malloc_trim(0);
  return true;
}

Status DroppedConstants::unpack(const dnnl::engine& engine,
                                const std::function<Node*(const Value*)>& node_of) const {
  try {
    dnnl::stream stream(engine);
    for (const Dropped& d : dropped_) {
      const TensorType& type = d.value->tensor_type();
      Result<Tensor> t = Tensor::allocate(type.dtype, type.shape());
      if (!t.ok()) {
        return t.status().with_context(
            fmt::format("cpu target: unpacking constant \"{}\"", d.value->name()));
      }
      dnnl::memory plain(d.packing.plain, engine, t->raw_data());
      dnnl::memory packed = d.packing.packed;  // a handle: execute() takes non-const ones
      dnnl::reorder(packed, plain).execute(stream, packed, plain);
      ops::Constant c;
      c.value = std::move(t).value();
      node_of(d.value)->set_op(Op(std::move(c)));
    }
    stream.wait();
  } catch (const dnnl::error& e) {
    return internal_error(
        fmt::format("cpu target: oneDNN failed unpacking the packed weights: {}", e.what()));
  }
  return Status();
}

Result<std::shared_ptr<const Graph>> DroppedConstants::restore(const Graph& graph,
                                                               const dnnl::engine& engine) const {
  std::unordered_map<const Value*, Value*> values;
  std::shared_ptr<Graph> copy = clone_graph(graph, &values);
  KILN_RETURN_IF_ERROR(
      unpack(engine, [&values](const Value* v) { return values.at(v)->producer(); }));
  return std::shared_ptr<const Graph>(std::move(copy));
}

Status DroppedConstants::undo(const dnnl::engine& engine) {
  KILN_RETURN_IF_ERROR(unpack(engine, [](const Value* v) { return v->producer(); }));
  dropped_.clear();
  bytes_ = 0;
  return Status();
}

}  // namespace kiln::compiler::cpu
