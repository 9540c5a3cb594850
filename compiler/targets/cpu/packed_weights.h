// SPDX-License-Identifier: Apache-2.0
// Pre-packed weights in artifacts: every constant the cpu target reorders into a primitive's layout
// (pack() in dnnl_kernel.h) is recorded while a graph is compiled, stored in the artifact's
// "cpu.packed_weights" section, and used in place (no copy, no reorder) when the artifact loads.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "compiler/targets/target.h"
#include "core/status.h"

namespace kiln::compiler::cpu {

inline constexpr std::string_view kPackedWeightsSection = "cpu.packed_weights";

// The packed weights of one build of a program, in the order they were packed. Recording (compile):
// pack() reorders and keeps the memory. Serving (load): the i-th pack() is served from the i-th
// stored entry, wrapped in place, when its source and destination layouts are the ones stored;
// otherwise (another CPU made oneDNN pick another blocking) it is repacked from the plain weights.
class PackedWeights {
 public:
  PackedWeights() = default;
  // Serving from a loaded artifact's section; a malformed section is a data-loss error naming the
  // file. A section of another format version is ignored (everything is repacked).
  static Result<std::shared_ptr<PackedWeights>> open(const LoadedSections& loaded,
                                                     std::span<const uint8_t> section);

  // `src` (in `src_layout`) in `layout`: a stored copy or a new one.
  dnnl::memory pack(const dnnl::engine& engine, const dnnl::memory::desc& src_layout,
                    const void* src, const dnnl::memory::desc& layout);

  // The section storing every memory packed so far (its pieces point into them; `self` keeps them).
  static TargetSection section(std::shared_ptr<const PackedWeights> self);

  int reused() const { return reused_; }
  int repacked() const { return static_cast<int>(packed_.size()) - reused_; }
  size_t stored_entries() const { return stored_.size(); }
  // The source ranges of the packs served in place (plain weights nothing else needs after load,
  // when they lie in the artifact's mapping).
  const std::vector<std::span<const uint8_t>>& served_sources() const { return served_sources_; }

 private:
  struct Stored {
    dnnl_memory_desc_t src_layout;
    dnnl_memory_desc_t layout;
    std::span<const uint8_t> bytes;
  };
  std::vector<dnnl::memory> packed_;         // every pack, in order (stored ones wrap the mapping)
  std::vector<dnnl::memory::desc> sources_;  // the source layout of each
  std::vector<Stored> stored_;
  std::vector<std::span<const uint8_t>> served_sources_;
  int reused_ = 0;
};

// While alive, pack() (dnnl_kernel.h) on this thread goes through `weights` (nullptr: plain
// packing).
class PackScope {
 public:
  explicit PackScope(PackedWeights* weights);
  ~PackScope();
  PackScope(const PackScope&) = delete;
  PackScope& operator=(const PackScope&) = delete;
  static PackedWeights* current();

 private:
  PackedWeights* previous_;
};

}  // namespace kiln::compiler::cpu
