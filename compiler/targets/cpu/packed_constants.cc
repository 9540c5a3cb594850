// SPDX-License-Identifier: Apache-2.0
// Dropping the plain copies of packed weights from a graph, and unpacking them for an artifact.
#include "compiler/targets/cpu/packed_constants.h"

#include <fmt/format.h>
#include <malloc.h>

#include <unordered_map>

#include "compiler/ir/clone.h"
#include "compiler/ops/all_ops.h"
#include "core/byte_io.h"

namespace kiln::compiler::cpu {

namespace {

constexpr uint32_t kPackedSectionVersion = 1;

// Whether a file can describe `layout` (write_layout): a blocked layout with no extra data.
bool describable(const dnnl::memory::desc& layout) {
  const dnnl_memory_desc_t& d = layout.data;
  return d.format_kind == dnnl_blocked && d.extra.flags == 0 && d.offset0 == 0 && d.ndims > 0 &&
         d.ndims <= DNNL_MAX_NDIMS;
}

void write_dims(ByteWriter& w, const dnnl_dims_t& dims, int n) {
  for (int i = 0; i < n; ++i) w.put<int64_t>(dims[i]);
}

Status read_dims(ByteReader& r, dnnl_dims_t& dims, int n) {
  for (int i = 0; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(dims[i], r.get<int64_t>());
  }
  return Status();
}

// The fields of a blocked oneDNN layout (oneDNN's version is in the artifact's fingerprint).
void write_layout(ByteWriter& w, const dnnl::memory::desc& layout) {
  const dnnl_memory_desc_t& d = layout.data;
  w.put<int32_t>(d.ndims);
  w.put<int32_t>(static_cast<int32_t>(d.data_type));
  write_dims(w, d.dims, d.ndims);
  write_dims(w, d.padded_dims, d.ndims);
  write_dims(w, d.padded_offsets, d.ndims);
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  write_dims(w, b.strides, d.ndims);
  w.put<int32_t>(b.inner_nblks);
  write_dims(w, b.inner_blks, b.inner_nblks);
  write_dims(w, b.inner_idxs, b.inner_nblks);
}

Result<dnnl::memory::desc> read_layout(ByteReader& r) {
  dnnl_memory_desc_t d{};
  KILN_ASSIGN_OR_RETURN(d.ndims, r.get<int32_t>());
  if (d.ndims < 1 || d.ndims > DNNL_MAX_NDIMS) {
    return r.error(fmt::format("a packed layout of {} dims", d.ndims));
  }
  KILN_ASSIGN_OR_RETURN(int32_t type, r.get<int32_t>());
  if (type <= dnnl_data_type_undef || type > dnnl_u8) {
    return r.error(fmt::format("a packed layout of element type {}", type));
  }
  d.data_type = static_cast<dnnl_data_type_t>(type);
  d.format_kind = dnnl_blocked;
  KILN_RETURN_IF_ERROR(read_dims(r, d.dims, d.ndims));
  KILN_RETURN_IF_ERROR(read_dims(r, d.padded_dims, d.ndims));
  KILN_RETURN_IF_ERROR(read_dims(r, d.padded_offsets, d.ndims));
  dnnl_blocking_desc_t& b = d.format_desc.blocking;
  KILN_RETURN_IF_ERROR(read_dims(r, b.strides, d.ndims));
  KILN_ASSIGN_OR_RETURN(b.inner_nblks, r.get<int32_t>());
  if (b.inner_nblks < 0 || b.inner_nblks > DNNL_MAX_NDIMS) {
    return r.error(fmt::format("a packed layout of {} inner blocks", b.inner_nblks));
  }
  KILN_RETURN_IF_ERROR(read_dims(r, b.inner_blks, b.inner_nblks));
  KILN_RETURN_IF_ERROR(read_dims(r, b.inner_idxs, b.inner_nblks));
  for (int i = 0; i < d.ndims; ++i) {
    if (d.dims[i] < 1 || d.padded_dims[i] < d.dims[i] || d.padded_offsets[i] != 0 ||
        b.strides[i] < 0) {
      return r.error(fmt::format("packed layout dim {} is malformed", i));
    }
  }
  dnnl_dims_t blocked;  // each dim's inner blocks multiplied
  for (int i = 0; i < d.ndims; ++i) blocked[i] = 1;
  for (int i = 0; i < b.inner_nblks; ++i) {
    if (b.inner_blks[i] < 1 || b.inner_blks[i] > 1024 || b.inner_idxs[i] < 0 ||
        b.inner_idxs[i] >= d.ndims) {
      return r.error(fmt::format("packed layout block {} is malformed", i));
    }
    blocked[b.inner_idxs[i]] *= b.inner_blks[i];
  }
  for (int i = 0; i < d.ndims; ++i) {
    if (d.padded_dims[i] % blocked[i] != 0) {
      return r.error(fmt::format("packed layout dim {} is no whole number of its blocks", i));
    }
  }
  return dnnl::memory::desc(d);
}

// `packed` reordered into a new tensor of `value`'s type, in the row-major layout `plain`, which
// becomes `node`'s value.
Status unpack_into(const dnnl::engine& engine, dnnl::memory packed, const dnnl::memory::desc& plain,
                   const Value& value, Node& node) {
  const TensorType& type = value.tensor_type();
  Result<Tensor> t = Tensor::allocate(type.dtype, type.shape());
  if (!t.ok()) {
    return t.status().with_context(
        fmt::format("cpu target: unpacking constant \"{}\"", value.name()));
  }
  try {
    dnnl::stream stream(engine);
    dnnl::memory to(plain, engine, t->raw_data());
    dnnl::reorder(packed, to).execute(stream, packed, to);
    stream.wait();
  } catch (const dnnl::error& e) {
    return internal_error(
        fmt::format("cpu target: oneDNN failed unpacking the packed weights of constant \"{}\": {}",
                    value.name(), e.what()));
  }
  ops::Constant c;
  c.value = std::move(t).value();
  node.set_op(Op(std::move(c)));
  return Status();
}

}  // namespace

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

Status DroppedConstants::unpack(
    const dnnl::engine& engine, const std::function<Node*(const Value*)>& node_of,
    const std::function<bool(const Value*, const Packing&)>& keep_packed) const {
  for (const Dropped& d : dropped_) {
    if (keep_packed && keep_packed(d.value, d.packing)) continue;
    KILN_RETURN_IF_ERROR(
        unpack_into(engine, d.packing.packed, d.packing.plain, *d.value, *node_of(d.value)));
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

Result<DroppedConstants::ArtifactForm> DroppedConstants::artifact_form(
    const Graph& graph, const dnnl::engine& engine) const {
  std::unordered_map<const Value*, Value*> values;
  std::shared_ptr<Graph> copy = clone_graph(graph, &values);
  std::unordered_map<const Node*, uint32_t> index;
  for (const auto& node : copy->nodes())
    index.emplace(node.get(), static_cast<uint32_t>(index.size()));
  ArtifactForm form;
  ByteWriter w;
  w.put<uint32_t>(kPackedSectionVersion);
  ByteWriter entries;
  auto keep_packed = [&](const Value* v, const Packing& packing) {
    const dnnl::memory::desc layout = packing.packed.get_desc();
    const TensorType& type = v->tensor_type();
    const size_t nbytes = static_cast<size_t>(type.shape().numel()) * dtype_size(type.dtype);
    // Unpacking reorders into the row-major layout of the packed one's dims.
    if (!describable(layout) || layout.get_size() != nbytes ||
        packing.plain != plain_desc(layout.dims(), type.dtype)) {
      return false;
    }
    Node* node = values.at(v)->producer();
    ops::Constant c;
    // The packed bytes, as long as the plain ones, stand in for the values in the file.
    c.value = Tensor::wrap(type.dtype, type.shape(), packing.packed.get_data_handle(),
                           std::make_shared<const dnnl::memory>(packing.packed));
    node->set_op(Op(std::move(c)));
    entries.put<uint32_t>(index.at(node));
    entries.put_string(v->name());
    entries.put<uint64_t>(nbytes);
    write_layout(entries, layout);
    ++form.stored;
    return true;
  };
  KILN_RETURN_IF_ERROR(unpack(
      engine, [&values](const Value* v) { return values.at(v)->producer(); }, keep_packed));
  if (form.stored > 0) {
    w.put<uint32_t>(static_cast<uint32_t>(form.stored));
    w.put_bytes(entries.bytes());
    form.section = std::move(w.bytes());
  }
  form.graph = std::move(copy);
  return form;
}

Result<StoredPackings> StoredPackings::read(std::span<const uint8_t> section, const Graph& graph,
                                            const std::string& artifact, const std::string& hint,
                                            ReleaseAfterPacking* scope) {
  std::vector<Node*> nodes;
  for (const auto& node : graph.nodes()) nodes.push_back(node.get());
  ByteReader r(section, fmt::format("{}: section \"{}\"", artifact, kPackedSection));
  KILN_ASSIGN_OR_RETURN(uint32_t version, r.get<uint32_t>());
  if (version != kPackedSectionVersion) {
    return failed_precondition_error(
        fmt::format("{}: section \"{}\" has version {}; this kiln reads version {}; {}", artifact,
                    kPackedSection, version, kPackedSectionVersion, hint));
  }
  KILN_ASSIGN_OR_RETURN(uint32_t n, r.get_count(32));
  StoredPackings stored;
  for (uint32_t i = 0; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(uint32_t at, r.get<uint32_t>());
    KILN_ASSIGN_OR_RETURN(std::string name, r.get_string());
    KILN_ASSIGN_OR_RETURN(uint64_t nbytes, r.get<uint64_t>());
    KILN_ASSIGN_OR_RETURN(dnnl::memory::desc layout, read_layout(r));
    Node* node = at < nodes.size() ? nodes[at] : nullptr;
    const Tensor* t = node != nullptr && node->kind() == OpKind::kConstant
                          ? node->output(0)->constant_value()
                          : nullptr;
    if (t == nullptr || node->output(0)->name() != name || t->nbytes() != nbytes ||
        layout.get_size() != nbytes || !find_dnnl_type(t->dtype()) ||
        dnnl_type(t->dtype()) != layout.data_type()) {
      return r.error(fmt::format(
          "packed constant \"{}\" (node {}, {} bytes) is no constant of the graph with that "
          "size and type; {}",
          name, at, nbytes, hint));
    }
    if (scope != nullptr) scope->add_stored(t->raw_data(), layout);
    stored.entries_.push_back({node, t->raw_data(), layout});
    stored.bytes_ += nbytes;
  }
  if (!r.at_end()) return r.error("unexpected bytes after the packed constants");
  return stored;
}

size_t StoredPackings::in_place_bytes(const ReleaseAfterPacking& scope) const {
  size_t n = 0;
  for (const Entry& e : entries_) {
    if (scope.taken_in_place(e.bytes)) n += e.layout.get_size();
  }
  return n;
}

Result<bool> StoredPackings::settle(const dnnl::engine& engine,
                                    const std::function<bool(const Value*)>& unread) const {
  for (const Entry& e : entries_) {
    if (e.node->output(0)->constant_value() == nullptr) continue;  // held packed
    if (!unread(e.node->output(0))) return false;
    KILN_RETURN_IF_ERROR(unpack(engine, e));
  }
  return true;
}

Status StoredPackings::unpack(const dnnl::engine& engine) const {
  for (const Entry& e : entries_) {
    const Tensor* t = e.node->output(0)->constant_value();
    if (t != nullptr && t->raw_data() == e.bytes) KILN_RETURN_IF_ERROR(unpack(engine, e));
  }
  return Status();
}

Status StoredPackings::unpack(const dnnl::engine& engine, const Entry& e) const {
  const TensorType& type = e.node->output(0)->tensor_type();
  return unpack_into(engine, dnnl::memory(e.layout, engine, const_cast<void*>(e.bytes)),
                     plain_desc(e.layout.dims(), type.dtype), *e.node->output(0), *e.node);
}

Status DroppedConstants::undo(const dnnl::engine& engine) {
  KILN_RETURN_IF_ERROR(unpack(engine, [](const Value* v) { return v->producer(); }));
  dropped_.clear();
  bytes_ = 0;
  return Status();
}

}  // namespace kiln::compiler::cpu
