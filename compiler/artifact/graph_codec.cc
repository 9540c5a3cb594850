// SPDX-License-Identifier: Apache-2.0
// Graph encoding and decoding, derived from each op's reflect() list: no per-op code.
#include "compiler/artifact/graph_codec.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>

#include "compiler/ir/verifier.h"
#include "compiler/ops/infer.h"

namespace kiln::compiler {

namespace {

// The attribute values an AttrRef can point to, by value, in the same order (the type tag written
// for an attribute is its AttrRef index).
template <class V>
struct ValueVariantOf;
template <class... Ts>
struct ValueVariantOf<std::variant<Ts...>> {
  using type = std::variant<std::remove_pointer_t<Ts>...>;
};
using AttrValue = ValueVariantOf<AttrRef>::type;

constexpr int kMaxGraphDepth = 32;
constexpr int kMaxTypeDepth = 16;
constexpr uint32_t kMaxRank = 64;
constexpr int64_t kMaxElements = int64_t{1} << 48;

template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};
template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

void write_tensor_type(ByteWriter& w, const TensorType& t) {
  w.put<uint8_t>(static_cast<uint8_t>(t.dtype));
  w.put<uint8_t>(t.dims ? 1 : 0);
  if (!t.dims) return;
  w.put<uint32_t>(static_cast<uint32_t>(t.dims->size()));
  for (const Dim& d : *t.dims) {
    w.put<int64_t>(d.value);
    w.put_string(d.symbol);
  }
}

Result<DType> read_dtype(ByteReader& r) {
  KILN_ASSIGN_OR_RETURN(uint8_t d, r.get<uint8_t>());
  if (d >= kNumDTypes) return r.error(fmt::format("dtype code {} is not a kiln dtype", d));
  return static_cast<DType>(d);
}

Result<ValueType> read_value_type_at(ByteReader& r, int depth) {
  if (depth > kMaxTypeDepth) return r.error("value types are nested too deeply");
  KILN_ASSIGN_OR_RETURN(uint8_t kind, r.get<uint8_t>());
  if (kind == static_cast<uint8_t>(ValueType::Kind::kSequence) ||
      kind == static_cast<uint8_t>(ValueType::Kind::kOptional)) {
    KILN_ASSIGN_OR_RETURN(ValueType element, read_value_type_at(r, depth + 1));
    return kind == static_cast<uint8_t>(ValueType::Kind::kSequence)
               ? ValueType::sequence(std::move(element))
               : ValueType::optional(std::move(element));
  }
  if (kind != static_cast<uint8_t>(ValueType::Kind::kTensor)) {
    return r.error(fmt::format("value kind {} is unknown", kind));
  }
  KILN_ASSIGN_OR_RETURN(DType dtype, read_dtype(r));
  KILN_ASSIGN_OR_RETURN(uint8_t has_rank, r.get<uint8_t>());
  if (has_rank == 0) return ValueType(TensorType::unranked(dtype));
  KILN_ASSIGN_OR_RETURN(uint32_t rank, r.get_count(12));
  if (rank > kMaxRank) return r.error(fmt::format("rank {} is above {}", rank, kMaxRank));
  std::vector<Dim> dims(rank);
  for (Dim& d : dims) {
    KILN_ASSIGN_OR_RETURN(d.value, r.get<int64_t>());
    KILN_ASSIGN_OR_RETURN(d.symbol, r.get_string());
    if (d.value < -1) return r.error(fmt::format("dim {} is negative", d.value));
  }
  return ValueType(TensorType(dtype, std::move(dims)));
}

class Encoder {
 public:
  Result<EncodedGraph> run(const Graph& graph) {
    KILN_RETURN_IF_ERROR(write_graph(graph));
    out_.graph = std::move(w_.bytes());
    return std::move(out_);
  }

 private:
  Status define(const Value* v) {
    ids_.emplace(v, next_id_++);
    w_.put_string(v->name());
    write_value_type(w_, v->type());
    return Status();
  }
  Status reference(const Value* v, const std::string& where) {
    if (v == nullptr) {
      w_.put<int64_t>(-1);
      return Status();
    }
    auto it = ids_.find(v);
    if (it == ids_.end()) {
      return internal_error(
          fmt::format("{}: value \"{}\" is not defined before it is used; the "
                      "graph cannot be serialized",
                      where, v->name()));
    }
    w_.put<int64_t>(it->second);
    return Status();
  }

  Status write_graph(const Graph& g) {
    w_.put_string(g.name());
    w_.put<uint32_t>(static_cast<uint32_t>(g.inputs().size()));
    for (const Value* v : g.inputs()) KILN_RETURN_IF_ERROR(define(v));
    w_.put<uint32_t>(static_cast<uint32_t>(g.num_nodes()));
    for (const auto& node : g.nodes()) KILN_RETURN_IF_ERROR(write_node(*node));
    w_.put<uint32_t>(static_cast<uint32_t>(g.outputs().size()));
    for (const Value* v : g.outputs()) {
      KILN_RETURN_IF_ERROR(reference(v, fmt::format("graph \"{}\" output", g.name())));
    }
    return Status();
  }

  Status write_node(const Node& node) {
    w_.put<uint16_t>(static_cast<uint16_t>(node.kind()));
    w_.put_string(node.name());
    struct Collector final : AttrVisitor {
      void visit(std::string_view name, AttrRef field) override {
        fields.emplace_back(name, field);
      }
      std::vector<std::pair<std::string_view, AttrRef>> fields;
    } collector;
    node.op().reflect(collector);
    w_.put<uint32_t>(static_cast<uint32_t>(collector.fields.size()));
    for (const auto& [name, field] : collector.fields) {
      w_.put_string(name);
      w_.put<uint8_t>(static_cast<uint8_t>(field.index()));
      Status s = std::visit([&](auto* p) { return write_field(*p); }, field);
      KILN_RETURN_IF_ERROR(s);
    }
    w_.put<uint32_t>(static_cast<uint32_t>(node.num_inputs()));
    for (const Value* in : node.inputs()) KILN_RETURN_IF_ERROR(reference(in, node.describe()));
    w_.put<uint32_t>(static_cast<uint32_t>(node.num_outputs()));
    for (const Value* out : node.outputs()) KILN_RETURN_IF_ERROR(define(out));
    return Status();
  }

  template <class T>
  Status write_field(const T& v) {
    if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, float>) {
      w_.put<T>(v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      w_.put_string(v);
    } else if constexpr (std::is_same_v<T, DType>) {
      w_.put<uint8_t>(static_cast<uint8_t>(v));
    } else if constexpr (std::is_same_v<T, Tensor>) {
      return write_tensor(v);
    } else if constexpr (std::is_same_v<T, GraphAttr>) {
      w_.put<uint8_t>(v ? 1 : 0);
      if (v) return write_graph(*v);
    } else if constexpr (IsOptional<T>::value) {
      w_.put<uint8_t>(v.has_value() ? 1 : 0);
      if (v) return write_field(*v);
    } else {
      static_assert(IsVector<T>::value, "an AttrRef type without an encoding");
      w_.put<uint32_t>(static_cast<uint32_t>(v.size()));
      for (const auto& e : v) KILN_RETURN_IF_ERROR(write_field(e));
    }
    return Status();
  }

  Status write_tensor(const Tensor& t) {
    w_.put<uint8_t>(t.defined() ? 1 : 0);
    if (!t.defined()) return Status();
    w_.put<uint8_t>(static_cast<uint8_t>(t.dtype()));
    w_.put<uint32_t>(static_cast<uint32_t>(t.rank()));
    for (int64_t d : t.shape().dims()) w_.put<int64_t>(d);
    if (t.dtype() == DType::kString) {
      for (const std::string& s : t.span<std::string>()) w_.put_string(s);
      return Status();
    }
    const size_t nbytes = t.nbytes();
    uint64_t offset = 0;
    if (nbytes > 0) {
      auto key = std::make_pair(static_cast<const void*>(t.raw_data()), nbytes);
      auto it = slices_.find(key);
      if (it != slices_.end()) {
        offset = it->second;
      } else {
        offset = out_.weights_size;
        out_.weights.push_back(WeightSlice{t.raw_data(), nbytes, offset});
        out_.weights_size += (nbytes + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment;
        slices_.emplace(key, offset);
      }
    }
    w_.put<uint64_t>(offset);
    w_.put<uint64_t>(nbytes);
    return Status();
  }

  ByteWriter w_;
  EncodedGraph out_;
  std::unordered_map<const Value*, int64_t> ids_;
  int64_t next_id_ = 0;
  std::map<std::pair<const void*, size_t>, uint64_t> slices_;
};

class Decoder {
 public:
  Decoder(std::span<const uint8_t> graph_section, std::span<const uint8_t> weights,
          std::shared_ptr<const void> owner, const std::string& file)
      : r_(graph_section, file + ": the graph section"),
        weights_(weights),
        owner_(std::move(owner)) {}

  Result<std::shared_ptr<Graph>> run() {
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> graph, read_graph(nullptr, 0));
    if (!r_.at_end()) return r_.error("unexpected bytes after the graph");
    return graph;
  }

 private:
  Status define(Value* v) {
    KILN_ASSIGN_OR_RETURN(std::string name, r_.get_string());
    KILN_ASSIGN_OR_RETURN(ValueType type, read_value_type(r_));
    v->set_name(std::move(name));
    v->set_type(std::move(type));
    values_.push_back(v);
    return Status();
  }
  // The value with `id`, which must be visible from `g` (defined in it or an enclosing graph).
  Result<Value*> reference(const Graph& g) {
    KILN_ASSIGN_OR_RETURN(int64_t id, r_.get<int64_t>());
    if (id == -1) return static_cast<Value*>(nullptr);
    if (id < 0 || id >= static_cast<int64_t>(values_.size())) {
      return r_.error(fmt::format("value {} is not defined before its use", id));
    }
    Value* v = values_[static_cast<size_t>(id)];
    for (const Graph* scope = &g; scope != nullptr; scope = scope->parent()) {
      if (v->graph() == scope) return v;
    }
    return r_.error(fmt::format("value \"{}\" is used outside its graph", v->name()));
  }

  Result<std::shared_ptr<Graph>> read_graph(Graph* parent, int depth) {
    if (depth > kMaxGraphDepth) return r_.error("subgraphs are nested too deeply");
    KILN_ASSIGN_OR_RETURN(std::string name, r_.get_string());
    auto graph = std::make_shared<Graph>(std::move(name), parent);
    Graph& g = *graph;
    KILN_ASSIGN_OR_RETURN(uint32_t num_inputs, r_.get_count(7));
    for (uint32_t i = 0; i < num_inputs; ++i) {
      KILN_RETURN_IF_ERROR(define(g.add_input("", ValueType())));
    }
    KILN_ASSIGN_OR_RETURN(uint32_t num_nodes, r_.get_count(18));
    for (uint32_t i = 0; i < num_nodes; ++i) KILN_RETURN_IF_ERROR(read_node(g, depth));
    KILN_ASSIGN_OR_RETURN(uint32_t num_outputs, r_.get_count(8));
    for (uint32_t i = 0; i < num_outputs; ++i) {
      KILN_ASSIGN_OR_RETURN(Value * v, reference(g));
      if (v == nullptr) return r_.error(fmt::format("graph \"{}\" has an empty output", g.name()));
      g.add_output(v);
    }
    return graph;
  }

  Status read_node(Graph& g, int depth) {
    KILN_ASSIGN_OR_RETURN(uint16_t kind, r_.get<uint16_t>());
    if (kind >= kNumOpKinds) return r_.error(fmt::format("op code {} is not a kiln op", kind));
    KILN_ASSIGN_OR_RETURN(std::string name, r_.get_string());
    const OpKind op_kind = static_cast<OpKind>(kind);
    KILN_ASSIGN_OR_RETURN(uint32_t num_attrs, r_.get_count(5));
    std::vector<std::pair<std::string, AttrValue>> attrs(num_attrs);
    for (auto& [attr_name, value] : attrs) {
      KILN_ASSIGN_OR_RETURN(attr_name, r_.get_string());
      KILN_ASSIGN_OR_RETURN(uint8_t tag, r_.get<uint8_t>());
      KILN_RETURN_IF_ERROR(read_attr(tag, value, g, depth));
    }
    KILN_ASSIGN_OR_RETURN(Op op, make_op(op_kind, name, std::move(attrs)));
    KILN_ASSIGN_OR_RETURN(uint32_t num_inputs, r_.get_count(8));
    std::vector<Value*> inputs(num_inputs);
    for (Value*& in : inputs) {
      KILN_ASSIGN_OR_RETURN(in, reference(g));
    }
    KILN_ASSIGN_OR_RETURN(uint32_t num_outputs, r_.get_count(6));
    Node* node = g.add_node(std::move(op), std::move(inputs), static_cast<int>(num_outputs),
                            std::move(name));
    for (Value* out : node->outputs()) KILN_RETURN_IF_ERROR(define(out));
    return Status();
  }

  // The op of `kind` with the decoded attributes; attributes not in the file keep their defaults.
  Result<Op> make_op(OpKind kind, const std::string& node_name,
                     std::vector<std::pair<std::string, AttrValue>> attrs) {
    struct Setter final : AttrVisitor {
      void visit(std::string_view name, AttrRef field) override {
        for (size_t i = 0; i < attrs.size(); ++i) {
          if (attrs[i].first != name) continue;
          used[i] = true;
          if (attrs[i].second.index() != field.index()) {
            mismatch = std::string(name);
            return;
          }
          std::visit(
              [&](auto* p) {
                using T = std::remove_pointer_t<decltype(p)>;
                *p = std::move(std::get<T>(attrs[i].second));
              },
              field);
          return;
        }
      }
      std::vector<std::pair<std::string, AttrValue>> attrs;
      std::vector<bool> used;
      std::string mismatch;
    } setter;
    setter.used.assign(attrs.size(), false);
    setter.attrs = std::move(attrs);
    Op op = Op::make_default(kind).with_attributes(setter);
    std::string node = fmt::format("{} \"{}\"", op_kind_name(kind), node_name);
    if (!setter.mismatch.empty()) {
      return r_.error(
          fmt::format("{}: attribute \"{}\" has the wrong type", node, setter.mismatch));
    }
    for (size_t i = 0; i < setter.used.size(); ++i) {
      if (!setter.used[i]) {
        return r_.error(
            fmt::format("{}: the op has no attribute \"{}\"", node, setter.attrs[i].first));
      }
    }
    return op;
  }

  template <size_t I = 0>
  Status read_attr(uint8_t tag, AttrValue& out, Graph& g, int depth) {
    if constexpr (I < std::variant_size_v<AttrValue>) {
      if (tag == I) return read_field(out.template emplace<I>(), g, depth);
      return read_attr<I + 1>(tag, out, g, depth);
    } else {
      return r_.error(fmt::format("attribute type tag {} is unknown", tag));
    }
  }

  template <class T>
  Status read_field(T& v, Graph& g, int depth) {
    if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, float>) {
      KILN_ASSIGN_OR_RETURN(v, r_.get<T>());
    } else if constexpr (std::is_same_v<T, std::string>) {
      KILN_ASSIGN_OR_RETURN(v, r_.get_string());
    } else if constexpr (std::is_same_v<T, DType>) {
      KILN_ASSIGN_OR_RETURN(v, read_dtype(r_));
    } else if constexpr (std::is_same_v<T, Tensor>) {
      KILN_ASSIGN_OR_RETURN(v, read_tensor());
    } else if constexpr (std::is_same_v<T, GraphAttr>) {
      KILN_ASSIGN_OR_RETURN(uint8_t present, r_.get<uint8_t>());
      if (present) {
        KILN_ASSIGN_OR_RETURN(v, read_graph(&g, depth + 1));
      }
    } else if constexpr (IsOptional<T>::value) {
      KILN_ASSIGN_OR_RETURN(uint8_t present, r_.get<uint8_t>());
      if (present) return read_field(v.emplace(), g, depth);
    } else {
      static_assert(IsVector<T>::value, "an AttrRef type without a decoding");
      KILN_ASSIGN_OR_RETURN(uint32_t n, r_.get_count(4));
      v.resize(n);
      for (auto& e : v) KILN_RETURN_IF_ERROR(read_field(e, g, depth));
    }
    return Status();
  }

  Result<Tensor> read_tensor() {
    KILN_ASSIGN_OR_RETURN(uint8_t defined, r_.get<uint8_t>());
    if (defined == 0) return Tensor();
    KILN_ASSIGN_OR_RETURN(DType dtype, read_dtype(r_));
    KILN_ASSIGN_OR_RETURN(uint32_t rank, r_.get_count(8));
    if (rank > kMaxRank) return r_.error(fmt::format("tensor rank {} is above {}", rank, kMaxRank));
    std::vector<int64_t> dims(rank);
    int64_t numel = 1;
    for (int64_t& d : dims) {
      KILN_ASSIGN_OR_RETURN(d, r_.get<int64_t>());
      if (d < 0 || d > kMaxElements || (d > 0 && numel > kMaxElements / d)) {
        return r_.error(fmt::format("tensor dim {} is out of range", d));
      }
      numel *= d;
    }
    Shape shape(std::move(dims));
    if (dtype == DType::kString) {
      if (static_cast<uint64_t>(numel) > r_.remaining() / 4) {
        return r_.error(fmt::format("{} strings cannot fit in the bytes left", numel));
      }
      KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(dtype, shape));
      for (std::string& s : t.span<std::string>()) {
        KILN_ASSIGN_OR_RETURN(s, r_.get_string());
      }
      return t;
    }
    KILN_ASSIGN_OR_RETURN(uint64_t offset, r_.get<uint64_t>());
    KILN_ASSIGN_OR_RETURN(uint64_t nbytes, r_.get<uint64_t>());
    const uint64_t expected = static_cast<uint64_t>(numel) * dtype_size(dtype);
    if (nbytes != expected) {
      return r_.error(fmt::format("a {}{} constant needs {} bytes, the file says {}",
                                  dtype_name(dtype), shape.to_string(), expected, nbytes));
    }
    if (nbytes == 0) return Tensor::allocate(dtype, shape);
    if (offset % kWeightAlignment != 0 || offset > weights_.size() ||
        nbytes > weights_.size() - offset) {
      return r_.error(
          fmt::format("a constant at weight offset {} ({} bytes) lies outside the "
                      "{}-byte weight section or is misaligned",
                      offset, nbytes, weights_.size()));
    }
    // The weight section is mapped read-only; constants are never written to.
    void* data = const_cast<uint8_t*>(weights_.data() + offset);
    return Tensor::wrap(dtype, std::move(shape), data, owner_);
  }

  ByteReader r_;
  std::span<const uint8_t> weights_;
  std::shared_ptr<const void> owner_;
  std::vector<Value*> values_;
};

// Runs every node's type inference on the decoded graph, so that a well-formed file describing
// an impossible graph (wrong input count, wrong dtypes) is refused here, not inside a kernel.
Status check_types(const Graph& g, const std::string& file) {
  for (const auto& node : g.nodes()) {
    for (const Graph* sub : node->op().subgraphs()) KILN_RETURN_IF_ERROR(check_types(*sub, file));
    std::vector<const ValueType*> types;
    std::vector<const Tensor*> values;
    for (const Value* v : node->inputs()) {
      types.push_back(v ? &v->type() : nullptr);
      values.push_back(v ? v->constant_value() : nullptr);
    }
    InferContext ctx(*node, std::move(types), std::move(values));
    Result<std::vector<ValueType>> out = infer_types(node->op(), ctx);
    if (!out.ok()) {
      return data_loss_error(fmt::format("{}: the graph section describes an invalid node: {}",
                                         file, out.status().message()));
    }
    if (static_cast<int>(out->size()) < node->num_outputs()) {
      return data_loss_error(fmt::format("{}: {} has {} outputs, its op gives {}", file,
                                         node->describe(), node->num_outputs(), out->size()));
    }
    for (int i = 0; i < node->num_outputs(); ++i) {
      const ValueType& stored = node->output(i)->type();
      const ValueType& inferred = (*out)[static_cast<size_t>(i)];
      if (stored.is_tensor() && inferred.is_tensor() &&
          stored.tensor().dtype != inferred.tensor().dtype) {
        return data_loss_error(fmt::format("{}: {} output {} is stored as {} but its op gives {}",
                                           file, node->describe(), i, stored.to_string(),
                                           inferred.to_string()));
      }
    }
  }
  return Status();
}

}  // namespace

void write_value_type(ByteWriter& w, const ValueType& type) {
  w.put<uint8_t>(static_cast<uint8_t>(type.kind()));
  if (type.is_tensor()) {
    write_tensor_type(w, type.tensor());
  } else {
    write_value_type(w, type.element());
  }
}

Result<ValueType> read_value_type(ByteReader& r) {
  return read_value_type_at(r, 0);
}

Result<EncodedGraph> encode_graph(const Graph& graph) {
  return Encoder().run(graph);
}

Result<std::shared_ptr<Graph>> decode_graph(std::span<const uint8_t> graph_section,
                                            std::span<const uint8_t> weights,
                                            std::shared_ptr<const void> owner,
                                            const std::string& file) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> graph,
                        Decoder(graph_section, weights, std::move(owner), file).run());
  Status verified = verify_graph(*graph);
  if (!verified.ok()) {
    return data_loss_error(
        fmt::format("{}: the graph section is inconsistent: {}", file, verified.message()));
  }
  KILN_RETURN_IF_ERROR(check_types(*graph, file));
  return graph;
}

}  // namespace kiln::compiler
