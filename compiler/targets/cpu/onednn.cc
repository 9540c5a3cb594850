// SPDX-License-Identifier: Apache-2.0
// Layouts, element types, weights packed at compile time and their arena, scratchpads.
#include "compiler/targets/cpu/onednn.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>

#include "compiler/targets/cpu/winograd_weights.h"
#include "core/huge_pages.h"
#include "core/mapped_file.h"

namespace kiln::compiler::cpu {

dnnl::memory::dims to_dims(const std::vector<int64_t>& values) {
  return dnnl::memory::dims(values.begin(), values.end());
}

dnnl::memory::dims to_dims(const Shape& shape) {
  dnnl::memory::dims dims;
  for (int i = 0; i < shape.rank(); ++i) dims.push_back(shape[i]);
  if (dims.empty()) dims.push_back(1);
  return dims;
}

std::optional<dnnl::memory::data_type> find_dnnl_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return dnnl::memory::data_type::f32;
    case DType::kBF16: return dnnl::memory::data_type::bf16;
    case DType::kF16: return dnnl::memory::data_type::f16;
    case DType::kI8: return dnnl::memory::data_type::s8;
    case DType::kU8: return dnnl::memory::data_type::u8;
    case DType::kI32: return dnnl::memory::data_type::s32;
    default: return std::nullopt;
  }
}

dnnl::memory::data_type dnnl_type(DType dtype) {
  std::optional<dnnl::memory::data_type> type = find_dnnl_type(dtype);
  KILN_CHECK(type.has_value(), "dnnl_type: oneDNN has no such element type");
  return *type;
}

DType dtype_of(dnnl::memory::data_type type) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16, DType::kI8, DType::kU8, DType::kI32}) {
    if (dnnl_type(d) == type) return d;
  }
  KILN_CHECK(false, "dtype_of: a oneDNN element type kiln has no DType for");
  return DType::kF32;
}

dnnl::memory::desc plain_desc(const dnnl::memory::dims& dims, DType dtype) {
  dnnl::memory::dims strides(dims.size());
  dnnl::memory::dim stride = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= dims[i];
  }
  return dnnl::memory::desc(dims, find_dnnl_type(dtype).value_or(dnnl::memory::data_type::f32),
                            strides);
}

dnnl::memory::desc plain_desc(const Shape& shape, DType dtype) {
  return plain_desc(to_dims(shape), dtype);
}

dnnl::memory::desc with_type(const dnnl::memory::desc& layout, dnnl::memory::data_type dt) {
  dnnl_memory_desc_t md = layout.data;
  md.data_type = static_cast<dnnl_data_type_t>(dt);
  md.extra = dnnl_memory_extra_desc_t{};
  return dnnl::memory::desc(md);
}

dnnl::memory::desc with_type(const dnnl::memory::desc& layout, DType dtype) {
  return with_type(layout, dnnl_type(dtype));
}

namespace {

std::optional<StaticShapes> static_shapes(const Node& node, bool allow_bf16) {
  auto static_f32 = [allow_bf16](const Value* v) -> std::optional<Shape> {
    if (!v->type().is_tensor()) return std::nullopt;
    const TensorType& t = v->tensor_type();
    const bool type_ok = t.dtype == DType::kF32 || (allow_bf16 && t.dtype == DType::kBF16);
    if (!type_ok || !t.is_static()) return std::nullopt;
    return t.shape();
  };
  if (node.num_outputs() < 1) return std::nullopt;
  StaticShapes shapes;
  for (const Value* v : node.inputs()) {
    if (v == nullptr) {
      shapes.inputs.emplace_back();
      continue;
    }
    std::optional<Shape> s = static_f32(v);
    if (!s) return std::nullopt;
    shapes.inputs.push_back(std::move(s));
  }
  std::optional<Shape> out = static_f32(node.output(0));
  if (!out) return std::nullopt;
  shapes.output = std::move(*out);
  shapes.dtype = node.output(0)->tensor_type().dtype;
  for (const Value* v : node.inputs()) {
    if (v != nullptr && v->tensor_type().dtype != shapes.dtype) return std::nullopt;
  }
  return shapes;
}

}  // namespace

std::optional<StaticShapes> static_f32_shapes(const Node& node) {
  return static_shapes(node, false);
}

std::optional<StaticShapes> static_float_shapes(const Node& node) {
  return static_shapes(node, true);
}

namespace {
thread_local ReleaseAfterPacking* current_release = nullptr;
}  // namespace

ReleaseAfterPacking::ReleaseAfterPacking(std::span<const uint8_t> mapping)
    : previous_(current_release), mapping_(mapping) {
  current_release = this;
}
ReleaseAfterPacking::~ReleaseAfterPacking() {
  current_release = previous_;
}

const ReleaseAfterPacking::Packing* ReleaseAfterPacking::packing_of(const void* src) const {
  auto it = packings_.find(src);
  return it != packings_.end() ? &it->second : nullptr;
}

void ReleaseAfterPacking::add_stored(const void* bytes, const dnnl::memory::desc& layout) {
  stored_[bytes] = Stored{layout, false};
}

bool ReleaseAfterPacking::taken_in_place(const void* bytes) const {
  auto it = stored_.find(bytes);
  return it != stored_.end() && it->second.in_place;
}

namespace {
thread_local WeightArena* current_arena = nullptr;
constexpr size_t kFirstBlockBytes = kHugePageBytes;
constexpr size_t kLargestBlockBytes = 16 * kHugePageBytes;
}  // namespace

WeightArena::~WeightArena() {
  for (const Block& b : blocks_) std::free(b.data);
}

size_t WeightArena::reserved_bytes() const {
  size_t n = 0;
  for (const Block& b : blocks_) n += b.size;
  return n;
}

void* WeightArena::allocate(size_t bytes) {
  constexpr size_t kAlign = 64;
  bytes = (bytes + kAlign - 1) / kAlign * kAlign;
  if (blocks_.empty() || blocks_.back().size - blocks_.back().used < bytes) {
    // Each block twice the last, up to 32 MiB, and large enough for this request.
    const size_t next =
        blocks_.empty() ? kFirstBlockBytes : std::min(2 * blocks_.back().size, kLargestBlockBytes);
    const size_t size =
        std::max(next, (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes);
    // Huge pages from the second block on, or a first one past 2 MiB.
    const bool small_pages = blocks_.empty() && size == kFirstBlockBytes;
    auto* data = static_cast<uint8_t*>(small_pages ? std::aligned_alloc(kHugePageBytes, size)
                                                   : alloc_huge_aligned(kHugePageBytes, size));
    if (data == nullptr) return nullptr;
    blocks_.push_back({data, size, 0});
  }
  Block& b = blocks_.back();
  void* p = b.data + b.used;
  b.used += bytes;
  used_ += bytes;
  populate_pages(p, bytes);  // the packing writes them next
  return p;
}

void populate_pages(void* data, size_t bytes) {
  constexpr uintptr_t kPage = 4096;
  const auto begin = reinterpret_cast<uintptr_t>(data) / kPage * kPage;
  const auto end = (reinterpret_cast<uintptr_t>(data) + bytes + kPage - 1) / kPage * kPage;
  if (bytes == 0 || end <= begin) return;
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

PackInto::PackInto(WeightArena* arena) : previous_(current_arena) {
  current_arena = arena;
}
PackInto::~PackInto() {
  current_arena = previous_;
}

dnnl::memory packed_memory(const dnnl::memory::desc& layout, const dnnl::engine& engine) {
  if (WeightArena* arena = current_arena) {
    if (void* p = arena->allocate(layout.get_size())) return dnnl::memory(layout, engine, p);
  }
  return dnnl::memory(layout, engine);
}

Tensor plain_constant(const dnnl::engine& engine, const Tensor& t) {
  const ReleaseAfterPacking* release = current_release;
  if (release == nullptr) return t;
  auto it = release->stored_.find(t.raw_data());
  if (it == release->stored_.end()) return t;
  const dnnl::memory::desc& layout = it->second.layout;
  Tensor plain(t.dtype(), t.shape());
  dnnl::memory from(layout, engine, const_cast<void*>(t.raw_data()));
  dnnl::memory into(plain_desc(layout.dims(), dtype_of(layout.data_type())), engine,
                    plain.raw_data());
  dnnl::stream stream(engine);
  dnnl::reorder(from, into).execute(stream, from, into);
  stream.wait();
  return plain;
}

dnnl::memory pack(const dnnl::engine& engine, const dnnl::memory::desc& src_layout, const void* src,
                  const dnnl::memory::desc& layout) {
  ReleaseAfterPacking* release = current_release;
  ReleaseAfterPacking::Stored* stored = nullptr;
  if (release != nullptr) {
    auto it = release->stored_.find(src);
    if (it != release->stored_.end()) stored = &it->second;
  }
  dnnl::memory to;
  dnnl::stream stream(engine);
  if (stored != nullptr && stored->layout == layout) {
    // An artifact's weights stored as packed here: the file's bytes are the packed weights.
    to = dnnl::memory(layout, engine, const_cast<void*>(src));
    stored->in_place = true;
  } else {
    const void* plain = src;
    std::vector<uint8_t> unpacked;
    if (stored != nullptr) {
      // Stored in another layout than this one: unpacked first, then packed as asked.
      // Row-major in the stored layout's dims: the same bytes as in `src_layout`'s.
      unpacked.resize(src_layout.get_size());
      dnnl::memory from(stored->layout, engine, const_cast<void*>(src));
      dnnl::memory into(plain_desc(stored->layout.dims(), dtype_of(stored->layout.data_type())),
                        engine, unpacked.data());
      dnnl::reorder(from, into).execute(stream, from, into);
      stream.wait();
      plain = unpacked.data();
    }
    to = packed_memory(layout, engine);
    if (can_pack_winograd(src_layout, layout)) {
      pack_winograd(src_layout, static_cast<const float*>(plain), layout,
                    static_cast<float*>(to.get_data_handle()));
    } else {
      dnnl::memory from(src_layout, engine, const_cast<void*>(plain));
      dnnl::reorder(from, to).execute(stream, from, to);
      stream.wait();
    }
  }
  if (release != nullptr) {
    ++release->packed_;
    if (!can_pack_winograd(src_layout, layout) && src_layout.data_type() == layout.data_type()) {
      release->packings_.try_emplace(src, ReleaseAfterPacking::Packing{src_layout, to});
    }
    const std::span<const uint8_t> bytes(static_cast<const uint8_t*>(src), src_layout.get_size());
    const std::span<const uint8_t> m = release->mapping_;
    const bool in_place = stored != nullptr && stored->in_place;
    if (!in_place && bytes.data() >= m.data() &&
        bytes.data() + bytes.size() <= m.data() + m.size()) {
      release_file_pages(bytes);
      release->released_bytes_ += bytes.size();
    }
  }
  return to;
}

dnnl::primitive_attr scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

}  // namespace kiln::compiler::cpu
