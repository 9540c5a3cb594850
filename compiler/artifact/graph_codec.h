// SPDX-License-Identifier: Apache-2.0
// Graph serialization for artifacts: every op attribute through reflect(), constants as slices
// of a 64-byte-aligned weight section that loading wraps in place (no copy).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "core/byte_io.h"
#include "core/status.h"

namespace kiln::compiler {

inline constexpr uint64_t kWeightAlignment = 64;

// Where one constant's bytes go in the weight section.
struct WeightSlice {
  const void* data;
  size_t nbytes;
  uint64_t offset;  // a multiple of kWeightAlignment
};

// A graph ready to be written: the graph section, and the layout of the weight section.
struct EncodedGraph {
  std::vector<uint8_t> graph;
  std::vector<WeightSlice> weights;  // storage shared by several tensors appears once
  uint64_t weights_size = 0;         // a multiple of kWeightAlignment
};

// Encodes `graph` with its subgraphs. Every tensor attribute (Constant values and any other) of a
// non-string dtype goes to the weight section; string tensors stay in the graph section.
Result<EncodedGraph> encode_graph(const Graph& graph);

// Rebuilds a graph from its sections. Constants wrap `weights` without copying and keep `owner`
// (the mapped file) alive. Malformed input of any kind is a data-loss error that names `file`,
// never a crash: reads are bounds-checked, value references are checked for scope, and the result
// passes the IR verifier and every node's type inference.
Result<std::shared_ptr<Graph>> decode_graph(std::span<const uint8_t> graph_section,
                                            std::span<const uint8_t> weights,
                                            std::shared_ptr<const void> owner,
                                            const std::string& file);

// The encoding of a value type, shared with the artifact header's signature.
void write_value_type(ByteWriter& w, const ValueType& type);
Result<ValueType> read_value_type(ByteReader& r);

}  // namespace kiln::compiler
