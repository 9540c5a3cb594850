// SPDX-License-Identifier: Apache-2.0
// Graph constants a program holds only packed: dropped from the graph as it is lowered, so that a
// model holds its weights once, and unpacked again for the graph an artifact stores.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/targets/cpu/onednn.h"
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

  // What an artifact stores of `graph` (as restore()): a copy whose dropped values keep their
  // packed bytes, listed in a kPackedSection, wherever a file can describe the packed layout
  // (oneDNN's blocked layouts with no extra data, as large as the plain one), so that loading it
  // packs nothing again; the others unpacked. The copy's constants point into the packed
  // weights, which must outlive it.
  struct ArtifactForm {
    std::shared_ptr<const Graph> graph;
    std::vector<uint8_t> section;  // empty when no value is stored packed
    int stored = 0;                // the values stored packed
  };
  Result<ArtifactForm> artifact_form(const Graph& graph, const dnnl::engine& engine) const;

 private:
  static constexpr size_t kTrimBytes = size_t{1} << 20;
  // Unpacks each dropped value that `keep_packed` does not claim into the Constant node
  // `node_of` gives for it.
  using Packing = ReleaseAfterPacking::Packing;
  Status unpack(
      const dnnl::engine& engine, const std::function<Node*(const Value*)>& node_of,
      const std::function<bool(const Value*, const Packing&)>& keep_packed = nullptr) const;
  struct Dropped {
    const Value* value;
    ReleaseAfterPacking::Packing packing;
  };
  std::vector<Dropped> dropped_;
  size_t bytes_ = 0;
};

// The artifact section that lists the constants an artifact stores already packed (a target's
// section named "<target>.packed" holds constants in its own layouts: artifact.h).
inline constexpr std::string_view kPackedSection = "cpu.packed";

// The constants a loaded artifact stores already packed, as its kPackedSection lists them.
class StoredPackings {
 public:
  // Reads `section` (of artifact `artifact`; `hint` says how to recompile it) for `graph`, the
  // artifact's decoded graph, and declares every listed constant's bytes to `scope` (when given),
  // so that pack() takes them in place. A section that does not match the graph is a data-loss
  // error.
  static Result<StoredPackings> read(std::span<const uint8_t> section, const Graph& graph,
                                     const std::string& artifact, const std::string& hint,
                                     ReleaseAfterPacking* scope);

  int count() const { return static_cast<int>(entries_.size()); }
  size_t bytes() const { return bytes_; }
  // The bytes pack() took in place.
  size_t in_place_bytes(const ReleaseAfterPacking& scope) const;
  // Once a program is built: whether its steps read none of the listed constants as plain
  // values. Each either left the graph packed, or no step reads it (`unread`: the program
  // builder offered it for release; another lowering than the compiling one's, e.g. under
  // KILN_CPU_CONV1X1=onednn, packed it with a transform no reorder undoes), which gets its plain
  // values back here. False: a step reads stored bytes as plain values, and the program must be
  // built again from an unpacked graph.
  Result<bool> settle(const dnnl::engine& engine,
                      const std::function<bool(const Value*)>& unread) const;
  // Unpacks every listed constant whose node still holds its stored bytes: for the interpreter,
  // which reads plain values, when no program was built, and before a program is built again.
  Status unpack(const dnnl::engine& engine) const;

 private:
  struct Entry {
    Node* node;
    const void* bytes;
    dnnl::memory::desc layout;
  };
  Status unpack(const dnnl::engine& engine, const Entry& e) const;
  std::vector<Entry> entries_;
  size_t bytes_ = 0;
};

}  // namespace kiln::compiler::cpu
