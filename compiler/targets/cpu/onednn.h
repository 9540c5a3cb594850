// SPDX-License-Identifier: Apache-2.0
// What the cpu target's oneDNN lowering shares: layouts and element types, weights packed at
// compile time (and the arena they go into), and the setup of convolutions and pools from a node.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "compiler/ir/graph.h"
#include "core/tensor.h"

namespace kiln::compiler::cpu {

// Plain (row-major) layout of `shape` with elements of `dtype` (f32 by default; a dtype oneDNN
// lacks is described as f32: such buffers are never reordered); a rank-0 shape is described as [1].
dnnl::memory::desc plain_desc(const Shape& shape, DType dtype = DType::kF32);
dnnl::memory::desc plain_desc(const dnnl::memory::dims& dims, DType dtype = DType::kF32);
// oneDNN's element type for f32, bf16, f16, s8, u8 and s32, when it has one.
std::optional<dnnl::memory::data_type> find_dnnl_type(DType dtype);
// The same, checked.
dnnl::memory::data_type dnnl_type(DType dtype);
// The DType of a oneDNN element type (the inverse of dnnl_type; checked).
DType dtype_of(dnnl::memory::data_type type);
// `layout` with its elements of another type (the same dims, blocking and strides; no extra
// flags such as s8 weight compensation).
dnnl::memory::desc with_type(const dnnl::memory::desc& layout, dnnl::memory::data_type dt);
dnnl::memory::desc with_type(const dnnl::memory::desc& layout, DType dtype);
dnnl::memory::dims to_dims(const Shape& shape);
dnnl::memory::dims to_dims(const std::vector<int64_t>& values);

// The node's static f32 tensor shapes, input by input (nullopt for an omitted input), when every
// present input and output 0 is an f32 tensor of static shape; nullopt otherwise.
struct StaticShapes {
  std::vector<std::optional<Shape>> inputs;
  Shape output;
  DType dtype = DType::kF32;  // every tensor's element type
};
std::optional<StaticShapes> static_f32_shapes(const Node& node);
// The same, also accepting nodes whose tensors are all bf16 (what quantize_bf16 leaves).
std::optional<StaticShapes> static_float_shapes(const Node& node);

// `src` copied into a new memory of layout `layout` (a reorder when they differ; Winograd weights
// through pack_winograd()), at compile time. Within a ReleaseAfterPacking scope whose mapping holds
// `src`, its pages are dropped from resident memory once packed; when the scope knows `src` as
// bytes an artifact stores already packed in `layout`, the memory is those bytes, where they are.
dnnl::memory pack(const dnnl::engine& engine, const dnnl::memory::desc& src_layout, const void* src,
                  const dnnl::memory::desc& layout);

// The plain values of the constant `t` for a kernel that reads them as they are, not through
// pack() (the own stem, Winograd, 1x1-over-taps and excitation kernels): `t` itself, or, where the
// ReleaseAfterPacking scope on this thread knows its bytes as a loaded artifact's weights stored
// packed (add_stored), a copy unpacked from them.
Tensor plain_constant(const dnnl::engine& engine, const Tensor& t);

// While alive, pack() on this thread releases (release_file_pages) the sources that lie in
// `mapping`, a read-only file mapping: a loaded artifact's plain weights, read once to pack them.
// It also records every packing a reorder back restores exactly (the same element type, no
// Winograd transform), so that a graph constant held only packed can be dropped and restored.
class ReleaseAfterPacking {
 public:
  explicit ReleaseAfterPacking(std::span<const uint8_t> mapping);
  ~ReleaseAfterPacking();
  ReleaseAfterPacking(const ReleaseAfterPacking&) = delete;
  ReleaseAfterPacking& operator=(const ReleaseAfterPacking&) = delete;
  // The weights packed, and the bytes of those released.
  int packed() const { return packed_; }
  size_t released_bytes() const { return released_bytes_; }

  // A packed copy of the plain data at `src` (in layout `plain`) that a reorder from `packed` to
  // `plain` restores bit for bit.
  struct Packing {
    dnnl::memory::desc plain;
    dnnl::memory packed;
  };
  // The first exact packing of the data at `src`, or nullptr.
  const Packing* packing_of(const void* src) const;

  // Declares the `bytes` of a constant (in the mapping) as stored already packed in `layout`:
  // pack() of them into `layout` takes them in place, with no copy; into another layout, it
  // unpacks them first.
  void add_stored(const void* bytes, const dnnl::memory::desc& layout);
  // Whether pack() took the stored bytes at `bytes` in place.
  bool taken_in_place(const void* bytes) const;

 private:
  friend dnnl::memory pack(const dnnl::engine&, const dnnl::memory::desc&, const void*,
                           const dnnl::memory::desc&);
  friend Tensor plain_constant(const dnnl::engine&, const Tensor&);
  ReleaseAfterPacking* previous_;
  std::span<const uint8_t> mapping_;
  int packed_ = 0;
  size_t released_bytes_ = 0;
  std::unordered_map<const void*, Packing> packings_;
  struct Stored {
    dnnl::memory::desc layout;
    bool in_place = false;
  };
  std::unordered_map<const void*, Stored> stored_;
};

// An executable's packed weights, side by side in large blocks on transparent huge pages
// (core/huge_pages.h): a batch-1 run reads every weight once, and on 4 KiB pages each 4 KiB of
// them needs a TLB entry of its own. Paired against oneDNN's allocations (docs/performance.md,
// "Weights"), the models ran 0.980-0.995 of the time with it. Blocks grow from 2 MiB (left on
// small pages, so that a small model's weights stay a few pages) to 32 MiB. The memory lives as
// long as the arena.
class WeightArena {
 public:
  WeightArena() = default;
  ~WeightArena();
  WeightArena(const WeightArena&) = delete;
  WeightArena& operator=(const WeightArena&) = delete;
  // `bytes` of uninitialized memory, 64-byte aligned; nullptr when out of memory.
  void* allocate(size_t bytes);
  // The bytes handed out, and those reserved in blocks.
  size_t used_bytes() const { return used_; }
  size_t reserved_bytes() const;

 private:
  struct Block {
    uint8_t* data;
    size_t size;
    size_t used;
  };
  std::vector<Block> blocks_;
  size_t used_ = 0;
};

// Faults in the pages of [data, data + bytes) in one call (madvise MADV_POPULATE_WRITE) before
// they are written: a page first touched by a write faults on its own, about 20 us each on the
// virtual machines kiln's figures come from against about 1 us in bulk, which made a small model's
// compile and first run wait on its weights' and arena's pages. A hint: nothing where the kernel
// does not know it (before Linux 5.14).
void populate_pages(void* data, size_t bytes);

// While alive, packed_memory() (and so pack()) on this thread takes its memory from `arena`.
class PackInto {
 public:
  explicit PackInto(WeightArena* arena);
  ~PackInto();
  PackInto(const PackInto&) = delete;
  PackInto& operator=(const PackInto&) = delete;

 private:
  WeightArena* previous_;
};

// A new memory of `layout` for weights packed at compile time: in the arena of the PackInto scope
// on this thread, or oneDNN's own allocation outside one (or when the arena is out of memory).
dnnl::memory packed_memory(const dnnl::memory::desc& layout, const dnnl::engine& engine);

// An attribute with user-managed scratchpad (so one primitive may run on several threads at once).
dnnl::primitive_attr scratchpad_attr();

// A Conv node's oneDNN convolution parameters (f32 — or bf16 too with `allow_bf16` — static
// shapes, 1 to 3 spatial dims); nullopt when oneDNN cannot run it.
struct ConvSetup {
  dnnl::memory::dims src, weights, bias, dst;  // weights grouped as [g, O/g, I/g, k...]
  dnnl::memory::dims strides, dilates, pad_begin, pad_end;
  dnnl::memory::desc user_weights;  // the ONNX weights' plain layout (grouped dims, their dtype)
  const Tensor* weights_const = nullptr;
  const Tensor* bias_const = nullptr;
  bool has_bias = false;
  bool relu = false;  // Conv[activation="Relu"]
};
std::optional<ConvSetup> conv_setup(const Node& node, bool allow_bf16 = false);

// The pooling descriptor of a MaxPool, AveragePool or GlobalAveragePool node reading `src` and
// writing `dst` (either may be format_tag::any); nullopt when oneDNN cannot run it.
std::optional<dnnl::pooling_v2_forward::desc> pool_desc(const Node& node,
                                                        const dnnl::memory::desc& src,
                                                        const dnnl::memory::desc& dst);

}  // namespace kiln::compiler::cpu
