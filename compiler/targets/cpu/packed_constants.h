// SPDX-License-Identifier: Apache-2.0
// Graph constants a program holds only packed: dropped from the graph as it is lowered, so that a
// model holds its weights once, and unpacked again for the graph an artifact stores.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <functional>
#include <memory>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/targets/cpu/dnnl_kernel.h"
#include "core/status.h"

namespace kiln::compiler::cpu {

class DroppedConstants {
 public:
  // Drops the value of `v`'s Constant node when `packings` holds an exact packing of all of it
  // (which the program's steps keep); returns whether it did. The node stays, with no value.
  bool drop(const Value* v, const ReleaseAfterPacking& packings);

  bool empty() const { return dropped_.empty(); }
  int count() const { return static_cast<int>(dropped_.size()); }
  size_t bytes() const { return bytes_; }

  // A copy of `graph` (the graph the constants were dropped from; the copy shares the storage of
  // the other constants) with every dropped value unpacked again.
  Result<std::shared_ptr<const Graph>> restore(const Graph& graph,
                                               const dnnl::engine& engine) const;
  // Unpacks every dropped value back into its own node (a program that failed to build leaves
  // its graph as it found it); the packed copies must still be alive.
  Status undo(const dnnl::engine& engine);

 private:
  static constexpr size_t kTrimBytes = size_t{1} << 20;
  // Unpacks each dropped value into the Constant node `node_of` gives for it.
  Status unpack(const dnnl::engine& engine,
                const std::function<Node*(const Value*)>& node_of) const;
  struct Dropped {
    const Value* value;
    ReleaseAfterPacking::Packing packing;
  };
  std::vector<Dropped> dropped_;
  size_t bytes_ = 0;
};

}  // namespace kiln::compiler::cpu
