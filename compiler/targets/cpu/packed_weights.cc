// SPDX-License-Identifier: Apache-2.0
// The "cpu.packed_weights" artifact section: a table of (source layout, packed layout, offset,
// size) entries, then each packed memory at a 64-byte-aligned offset from the section's start.
//
//   u32 format version (1), u32 entry count
//   per entry: source desc, packed desc (see write_desc), u64 offset, u64 size
//   packed bytes, 64-byte aligned, zero padding between
//
// A desc is written field by field (oneDNN 2.6 has no public serialization of memory descs; its
// dnnl_memory_desc_t is a plain C struct): ndims, dims, data type, padded dims and offsets,
// offset0, format kind, the blocking descriptor (strides, inner blocks and their indices), the
// Winograd descriptor, and the extra descriptor (flags, compensation masks, scale adjust).
#include "compiler/targets/cpu/packed_weights.h"

#include <fmt/format.h>

#include <cstring>

#include "core/logging.h"

namespace kiln::compiler::cpu {

namespace {

constexpr uint32_t kVersion = 1;
constexpr size_t kAlign = 64;

thread_local PackedWeights* current_weights = nullptr;

class Writer {
 public:
  template <class T>
  void put(T v) {
    const size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
  }
  void put_dims(const dnnl_dims_t dims) {
    for (int i = 0; i < DNNL_MAX_NDIMS; ++i) put<int64_t>(dims[i]);
  }
  std::vector<uint8_t> bytes;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  template <class T>
  bool get(T& v) {
    if (bytes_.size() - at_ < sizeof(T)) return false;
    std::memcpy(&v, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  bool get_dims(dnnl_dims_t dims) {
    for (int i = 0; i < DNNL_MAX_NDIMS; ++i) {
      int64_t d = 0;
      if (!get(d)) return false;
      dims[i] = d;
    }
    return true;
  }

 private:
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

void write_desc(Writer& w, const dnnl_memory_desc_t& md) {
  w.put<int32_t>(md.ndims);
  w.put_dims(md.dims);
  w.put<int32_t>(md.data_type);
  w.put_dims(md.padded_dims);
  w.put_dims(md.padded_offsets);
  w.put<int64_t>(md.offset0);
  w.put<int32_t>(md.format_kind);
  const bool blocked = md.format_kind == dnnl_blocked;
  const dnnl_blocking_desc_t blk = blocked ? md.format_desc.blocking : dnnl_blocking_desc_t{};
  w.put_dims(blk.strides);
  w.put<int32_t>(blk.inner_nblks);
  w.put_dims(blk.inner_blks);
  w.put_dims(blk.inner_idxs);
  const dnnl_wino_desc_t wino =
      md.format_kind == dnnl_format_kind_wino ? md.format_desc.wino_desc : dnnl_wino_desc_t{};
  w.put<int32_t>(wino.wino_format);
  for (int v : {wino.r, wino.alpha, wino.ic, wino.oc, wino.ic_block, wino.oc_block, wino.ic2_block,
                wino.oc2_block}) {
    w.put<int32_t>(v);
  }
  w.put<float>(wino.adj_scale);
  w.put<uint64_t>(wino.size);
  w.put<uint64_t>(md.extra.flags);
  w.put<int32_t>(md.extra.compensation_mask);
  w.put<float>(md.extra.scale_adjust);
  w.put<int32_t>(md.extra.asymm_compensation_mask);
}

bool read_desc(Reader& r, dnnl_memory_desc_t& md) {
  md = dnnl_memory_desc_t{};
  int32_t ndims = 0, data_type = 0, format_kind = 0;
  if (!r.get(ndims) || !r.get_dims(md.dims) || !r.get(data_type) || !r.get_dims(md.padded_dims) ||
      !r.get_dims(md.padded_offsets) || !r.get(md.offset0) || !r.get(format_kind)) {
    return false;
  }
  if (ndims < 0 || ndims > DNNL_MAX_NDIMS) return false;
  md.ndims = ndims;
  md.data_type = static_cast<dnnl_data_type_t>(data_type);
  md.format_kind = static_cast<dnnl_format_kind_t>(format_kind);
  dnnl_blocking_desc_t blk{};
  int32_t nblks = 0;
  if (!r.get_dims(blk.strides) || !r.get(nblks) || !r.get_dims(blk.inner_blks) ||
      !r.get_dims(blk.inner_idxs) || nblks < 0 || nblks > DNNL_MAX_NDIMS) {
    return false;
  }
  blk.inner_nblks = nblks;
  dnnl_wino_desc_t wino{};
  int32_t wino_format = 0;
  if (!r.get(wino_format)) return false;
  wino.wino_format = static_cast<dnnl_wino_memory_format_t>(wino_format);
  for (int* v : {&wino.r, &wino.alpha, &wino.ic, &wino.oc, &wino.ic_block, &wino.oc_block,
                 &wino.ic2_block, &wino.oc2_block}) {
    if (!r.get(*v)) return false;
  }
  uint64_t size = 0;
  if (!r.get(wino.adj_scale) || !r.get(size)) return false;
  wino.size = size;
  if (md.format_kind == dnnl_blocked) md.format_desc.blocking = blk;
  if (md.format_kind == dnnl_format_kind_wino) md.format_desc.wino_desc = wino;
  return r.get(md.extra.flags) && r.get(md.extra.compensation_mask) &&
         r.get(md.extra.scale_adjust) && r.get(md.extra.asymm_compensation_mask);
}

size_t align_up(size_t v) {
  return (v + kAlign - 1) / kAlign * kAlign;
}

constexpr uint8_t kZeros[kAlign] = {};

}  // namespace

PackScope::PackScope(PackedWeights* weights) : previous_(current_weights) {
  current_weights = weights;
}
PackScope::~PackScope() {
  current_weights = previous_;
}
PackedWeights* PackScope::current() {
  return current_weights;
}

Result<std::shared_ptr<PackedWeights>> PackedWeights::open(const LoadedSections& loaded,
                                                           std::span<const uint8_t> section) {
  auto corrupt = [&](std::string_view what) {
    return data_loss_error(fmt::format("{}: section \"{}\" is malformed ({}); {}", loaded.artifact,
                                       kPackedWeightsSection, what, loaded.recompile_hint));
  };
  auto weights = std::make_shared<PackedWeights>();
  Reader r(section);
  uint32_t version = 0;
  uint32_t count = 0;
  if (!r.get(version)) return corrupt("no version");
  if (version != kVersion) {
    log(LogLevel::kInfo,
        "{}: section \"{}\" has format version {} (this kiln reads {}); weights "
        "are packed again on load; {}",
        loaded.artifact, kPackedWeightsSection, version, kVersion, loaded.recompile_hint);
    return weights;
  }
  if (!r.get(count) || count > section.size() / 16) return corrupt("bad entry count");
  const auto base = reinterpret_cast<uintptr_t>(section.data());
  for (uint32_t i = 0; i < count; ++i) {
    Stored s;
    uint64_t offset = 0;
    uint64_t size = 0;
    if (!read_desc(r, s.src_layout) || !read_desc(r, s.layout) || !r.get(offset) || !r.get(size)) {
      return corrupt(fmt::format("entry {} is cut short", i));
    }
    if (offset > section.size() || size > section.size() - offset ||
        (base + offset) % kAlign != 0) {
      return corrupt(fmt::format("entry {} lies outside the section or is misaligned", i));
    }
    s.bytes = section.subspan(offset, size);
    weights->stored_.push_back(s);
  }
  return weights;
}

dnnl::memory PackedWeights::pack(const dnnl::engine& engine, const dnnl::memory::desc& src_layout,
                                 const void* src, const dnnl::memory::desc& layout) {
  const size_t i = packed_.size();
  sources_.push_back(src_layout);
  if (i < stored_.size()) {
    const Stored& s = stored_[i];
    // Semantic comparisons (dnnl_memory_desc_equal): the same dims, type and blocking.
    if (dnnl::memory::desc(s.src_layout) == src_layout && dnnl::memory::desc(s.layout) == layout &&
        s.bytes.size() == layout.get_size()) {
      // oneDNN only reads weights: the read-only mapping is used in place.
      packed_.emplace_back(layout, engine, const_cast<uint8_t*>(s.bytes.data()));
      served_sources_.emplace_back(static_cast<const uint8_t*>(src), src_layout.get_size());
      ++reused_;
      return packed_.back();
    }
  }
  dnnl::memory from(src_layout, engine, const_cast<void*>(src));
  dnnl::memory to(layout, engine);
  dnnl::stream stream(engine);
  dnnl::reorder(from, to).execute(stream, from, to);
  stream.wait();
  packed_.push_back(to);
  return to;
}

TargetSection PackedWeights::section(std::shared_ptr<const PackedWeights> self) {
  struct Holder {
    std::shared_ptr<const PackedWeights> weights;
    std::vector<uint8_t> table;
  };
  auto holder = std::make_shared<Holder>();
  holder->weights = std::move(self);
  const std::vector<dnnl::memory>& packed = holder->weights->packed_;
  // The table's size does not depend on the offsets it holds.
  auto table = [&](const std::vector<uint64_t>& offsets) {
    Writer w;
    w.put<uint32_t>(kVersion);
    w.put<uint32_t>(static_cast<uint32_t>(packed.size()));
    for (size_t i = 0; i < packed.size(); ++i) {
      const dnnl::memory::desc layout = packed[i].get_desc();
      write_desc(w, holder->weights->sources_[i].data);
      write_desc(w, layout.data);
      w.put<uint64_t>(offsets.empty() ? 0 : offsets[i]);
      w.put<uint64_t>(layout.get_size());
    }
    return std::move(w.bytes);
  };
  std::vector<uint64_t> offsets;
  uint64_t at = align_up(table({}).size());
  for (const dnnl::memory& m : packed) {
    offsets.push_back(at);
    at = align_up(at + m.get_desc().get_size());
  }
  holder->table = table(offsets);
  TargetSection out;
  out.name = std::string(kPackedWeightsSection);
  out.pieces.emplace_back(holder->table);
  uint64_t written = holder->table.size();
  for (size_t i = 0; i < packed.size(); ++i) {
    while (written < offsets[i]) {
      const size_t pad = std::min<uint64_t>(kAlign, offsets[i] - written);
      out.pieces.emplace_back(kZeros, pad);
      written += pad;
    }
    const size_t n = packed[i].get_desc().get_size();
    out.pieces.emplace_back(static_cast<const uint8_t*>(packed[i].get_data_handle()), n);
    written += n;
  }
  out.owner = std::move(holder);
  return out;
}

}  // namespace kiln::compiler::cpu
