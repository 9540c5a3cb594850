// SPDX-License-Identifier: Apache-2.0
// The ONNX importer: graphs, scopes, initializers, types, and the per-node dispatch.
#include "compiler/onnx/importer.h"

#include <fmt/format.h>
#include <google/protobuf/io/zero_copy_stream.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <limits>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "compiler/onnx/functions.h"
#include "compiler/onnx/node_importer.h"
#include "compiler/onnx/tensor_proto.h"
#include "compiler/ops/infer.h"
#include "core/mapped_file.h"

namespace kiln::compiler {

namespace {

// The newest default-domain opset kiln's ops follow; newer models are refused with a clear error.
constexpr int64_t kMaxOpset = 28;

std::string normalize_domain(const std::string& domain) {
  return domain == "ai.onnx" ? std::string() : domain;
}

// Adds to `names` every value name the nodes of `graph` (and of their subgraphs) read from outside
// `graph`: names no node, input or initializer of that graph defines.
void outer_names(const onnx::GraphProto& graph, std::unordered_set<std::string>& names) {
  std::unordered_set<std::string> defined;
  for (const auto& v : graph.input()) defined.insert(v.name());
  for (const auto& t : graph.initializer()) defined.insert(t.name());
  for (const auto& n : graph.node()) defined.insert(n.output().begin(), n.output().end());
  std::unordered_set<std::string> read;
  for (const auto& n : graph.node()) {
    read.insert(n.input().begin(), n.input().end());
    for (const auto& a : n.attribute()) {
      if (a.has_g()) outer_names(a.g(), read);
      for (const auto& g : a.graphs()) outer_names(g, read);
    }
  }
  for (const std::string& name : read) {
    if (!name.empty() && defined.count(name) == 0) names.insert(name);
  }
}

// The nodes of `graph` in an order where each comes after the nodes whose outputs it reads
// (directly or from a subgraph): the file's order when it already is one, else the stable
// topological order (converters such as onnxconverter-common's float16 append the Casts of the
// graph inputs last). Names no node produces are left for the importer to resolve or report.
// Fails naming a node on a cycle.
Result<std::vector<const onnx::NodeProto*>> topological_order(const onnx::GraphProto& graph) {
  const int n = graph.node_size();
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < n; ++i) {
    for (const std::string& out : graph.node(i).output()) {
      if (!out.empty()) producer.emplace(out, i);
    }
  }
  std::vector<std::vector<int>> deps(static_cast<size_t>(n));
  bool ordered = true;
  for (int i = 0; i < n; ++i) {
    const onnx::NodeProto& node = graph.node(i);
    std::unordered_set<std::string> reads(node.input().begin(), node.input().end());
    for (const auto& a : node.attribute()) {
      if (a.has_g()) outer_names(a.g(), reads);
      for (const auto& g : a.graphs()) outer_names(g, reads);
    }
    for (const std::string& name : reads) {
      auto it = producer.find(name);
      if (name.empty() || it == producer.end()) continue;
      deps[static_cast<size_t>(i)].push_back(it->second);
      ordered &= it->second < i;
    }
  }
  std::vector<const onnx::NodeProto*> order;
  order.reserve(static_cast<size_t>(n));
  if (ordered) {
    for (const auto& node : graph.node()) order.push_back(&node);
    return order;
  }
  // Kahn's algorithm, always taking the earliest ready node in file order.
  std::vector<int> waiting(static_cast<size_t>(n), 0);
  std::vector<std::vector<int>> users(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    for (int d : deps[static_cast<size_t>(i)]) {
      ++waiting[static_cast<size_t>(i)];
      users[static_cast<size_t>(d)].push_back(i);
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (int i = 0; i < n; ++i) {
    if (waiting[static_cast<size_t>(i)] == 0) ready.push(i);
  }
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(&graph.node(i));
    for (int u : users[static_cast<size_t>(i)]) {
      if (--waiting[static_cast<size_t>(u)] == 0) ready.push(u);
    }
  }
  if (static_cast<int>(order.size()) == n) return order;
  for (int i = 0; i < n; ++i) {
    if (waiting[static_cast<size_t>(i)] == 0) continue;
    const onnx::NodeProto& node = graph.node(i);
    const std::string who = node.name().empty()
                                ? fmt::format("node {} (unnamed)", node.op_type())
                                : fmt::format("node {} \"{}\"", node.op_type(), node.name());
    std::string through;
    for (int d : deps[static_cast<size_t>(i)]) {
      if (waiting[static_cast<size_t>(d)] == 0) continue;
      for (const std::string& out : graph.node(d).output()) {
        if (std::find(node.input().begin(), node.input().end(), out) != node.input().end()) {
          through = out;
        }
      }
    }
    return invalid_argument_error(fmt::format(
        "{}: the graph has a cycle through this node{}; ONNX graphs must be acyclic", who,
        through.empty() ? std::string() : fmt::format(" (its input \"{}\")", through)));
  }
  return order;
}

}  // namespace

// Imports one ONNX graph into one kiln Graph; subgraphs get a child importer whose name lookups
// fall back to the parent's scope.
class GraphImporter {
 public:
  GraphImporter(const Model& model, const ImportOptions& options, Graph& graph,
                GraphImporter* parent, std::string external_dir)
      : model_(model),
        options_(options),
        graph_(graph),
        parent_(parent),
        external_dir_(std::move(external_dir)) {}

  Graph& graph() { return graph_; }
  const std::string& external_dir() const { return external_dir_; }
  // Whether this graph is (inside) an If branch, where nodes that do not type-check are left to
  // fail at run time, if the branch runs (keep_branch_types).
  bool in_if_branch() const { return in_if_branch_; }

  Value* lookup(const std::string& name) const {
    for (const GraphImporter* g = this; g != nullptr; g = g->parent_) {
      auto it = g->scope_.find(name);
      if (it != g->scope_.end()) return it->second;
    }
    return nullptr;
  }
  void bind(const std::string& name, Value* value) {
    if (!name.empty()) scope_[name] = value;
  }

  int64_t opset_for(const std::string& domain) const {
    if (domain.empty()) return model_.opset;
    auto it = model_.domain_opsets.find(domain);
    return it == model_.domain_opsets.end() ? -1 : it->second;
  }

  // `input_types` types the subgraph inputs the proto leaves untyped, by position.
  Status import(const onnx::GraphProto& proto, bool is_main,
                std::span<const ValueType> input_types = {});
  Result<GraphAttr> import_subgraph(const onnx::GraphProto& proto,
                                    std::span<const ValueType> input_types = {},
                                    bool if_branch = false);
  // import(*owned) frees each initializer's bytes in `owned` once it is a tensor, so the proto
  // and the graph do not hold the weights twice.
  void release_initializers_of(onnx::GraphProto* owned) { owned_ = owned; }

 private:
  // `input_name` is set for main-graph inputs, whose dims ImportOptions may override.
  Result<ValueType> value_type(const onnx::TypeProto& type, const std::string& what,
                               const std::string* input_name) const;
  Status import_node(const onnx::NodeProto& node);

  const Model& model_;
  const ImportOptions& options_;
  Graph& graph_;
  GraphImporter* parent_;
  std::string external_dir_;
  std::unordered_map<std::string, Value*> scope_;
  onnx::GraphProto* owned_ = nullptr;
  bool in_if_branch_ = false;
};

Result<ValueType> GraphImporter::value_type(const onnx::TypeProto& type, const std::string& what,
                                            const std::string* input_name) const {
  const bool apply_options = input_name != nullptr;
  switch (type.value_case()) {
    case onnx::TypeProto::kTensorType: {
      const auto& tt = type.tensor_type();
      std::optional<DType> dtype = dtype_from_onnx(tt.elem_type());
      if (!dtype) {
        return unimplemented_error(
            fmt::format("{}: ONNX element type {} is not supported", what, tt.elem_type()));
      }
      TensorType out = TensorType::unranked(*dtype);
      auto given = apply_options ? options_.input_shapes.find(*input_name)
                                 : options_.input_shapes.end();
      if (apply_options && given != options_.input_shapes.end()) {
        out.dims.emplace(given->second.begin(), given->second.end());
        return ValueType(out);
      }
      if (!tt.has_shape()) return ValueType(out);
      std::vector<Dim> dims;
      for (const auto& d : tt.shape().dim()) {
        if (d.has_dim_value() && d.dim_value() >= 0) {
          dims.emplace_back(d.dim_value());
        } else if (apply_options && options_.default_dim_value >= 0) {
          dims.emplace_back(options_.default_dim_value);
        } else if (d.has_dim_param()) {
          dims.push_back(Dim::symbolic(d.dim_param()));
        } else {
          dims.emplace_back();
        }
      }
      out.dims = std::move(dims);
      return ValueType(out);
    }
    case onnx::TypeProto::kSequenceType: {
      KILN_ASSIGN_OR_RETURN(ValueType elem,
                            value_type(type.sequence_type().elem_type(), what, nullptr));
      return ValueType::sequence(std::move(elem));
    }
    case onnx::TypeProto::kOptionalType: {
      KILN_ASSIGN_OR_RETURN(ValueType elem,
                            value_type(type.optional_type().elem_type(), what, nullptr));
      return ValueType::optional(std::move(elem));
    }
    default:
      return unimplemented_error(fmt::format("{}: this kind of ONNX type (maps, sparse tensors) is not supported", what));
  }
}

Status GraphImporter::import(const onnx::GraphProto& proto, bool is_main,
                             std::span<const ValueType> input_types) {
  // Initializers become Constant nodes.
  for (int i = 0; i < proto.initializer_size(); ++i) {
    const onnx::TensorProto& init = proto.initializer(i);
    std::string what = fmt::format("initializer \"{}\"", init.name());
    KILN_ASSIGN_OR_RETURN(Tensor value, tensor_from_proto(init, external_dir_, what));
    bind(init.name(), graph_.add_constant(std::move(value), init.name()));
    if (owned_ == &proto) std::string().swap(*owned_->mutable_initializer(i)->mutable_raw_data());
  }
  if (proto.sparse_initializer_size() > 0) {
    return unimplemented_error("sparse initializers are not supported");
  }
  for (const onnx::ValueInfoProto& input : proto.input()) {
    if (is_main && scope_.count(input.name())) continue;  // an initializer listed as an input
    std::string what = fmt::format("input \"{}\"", input.name());
    const size_t position = graph_.inputs().size();
    const bool untyped =
        !input.has_type() || input.type().value_case() == onnx::TypeProto::VALUE_NOT_SET;
    if (untyped && !is_main && position < input_types.size()) {
      bind(input.name(), graph_.add_input(input.name(), input_types[position]));
      continue;
    }
    if (!input.has_type()) return invalid_argument_error(fmt::format("{} has no type", what));
    KILN_ASSIGN_OR_RETURN(ValueType type, value_type(input.type(), what, is_main ? &input.name() : nullptr));
    bind(input.name(), graph_.add_input(input.name(), std::move(type)));
  }
  if (is_main) {
    for (const auto& [name, dims] : options_.input_shapes) {
      bool found = false;
      for (Value* v : graph_.inputs()) found |= v->name() == name;
      if (!found) {
        std::string names;
        for (Value* v : graph_.inputs()) names += (names.empty() ? "" : ", ") + v->name();
        return invalid_argument_error(fmt::format(
            "a shape was given for input \"{}\", but the model's inputs are: {}", name, names));
      }
    }
  }
  KILN_ASSIGN_OR_RETURN(std::vector<const onnx::NodeProto*> order, topological_order(proto));
  for (const onnx::NodeProto* node : order) KILN_RETURN_IF_ERROR(import_node(*node));
  for (const onnx::ValueInfoProto& output : proto.output()) {
    Value* v = lookup(output.name());
    if (v == nullptr) {
      return invalid_argument_error(
          fmt::format("graph output \"{}\" is not produced by any node", output.name()));
    }
    graph_.add_output(v);
  }
  return Status();
}

Result<GraphAttr> GraphImporter::import_subgraph(const onnx::GraphProto& proto,
                                                 std::span<const ValueType> input_types,
                                                 bool if_branch) {
  auto sub = std::make_shared<Graph>(proto.name().empty() ? "subgraph" : proto.name(), &graph_);
  GraphImporter child(model_, options_, *sub, this, external_dir_);
  child.in_if_branch_ = in_if_branch_ || if_branch;
  KILN_RETURN_IF_ERROR(child.import(proto, /*is_main=*/false, input_types));
  return sub;
}

Status GraphImporter::import_node(const onnx::NodeProto& node) {
  const std::string domain = normalize_domain(node.domain());
  const int64_t opset = opset_for(domain);
  auto describe = [&] {
    return node.name().empty() ? fmt::format("node {} (unnamed)", node.op_type())
                               : fmt::format("node {} \"{}\"", node.op_type(), node.name());
  };
  if (opset < 0) {
    return invalid_argument_error(
        fmt::format("{}: the model does not import the domain \"{}\"", describe(), domain));
  }
  NodeImporter ni(*this, node, opset);
  for (int i = 0; i < node.input_size(); ++i) {
    const std::string& name = node.input(i);
    if (!name.empty() && ni.input(i) == nullptr) {
      return invalid_argument_error(
          fmt::format("{}: input \"{}\" is not defined before the node", describe(), name));
    }
  }
  for (const OpsetImporter& row : all_importers()) {
    if (row.op_type == node.op_type() && row.domain == domain && row.since <= opset &&
        opset <= row.until) {
      return row.fn(ni);
    }
  }
  std::optional<OpKind> kind = parse_op_kind(node.op_type());
  bool known_domain = domain.empty() || domain == "ai.onnx.preview.training";
  if (!kind || !known_domain) {
    return unimplemented_error(fmt::format("{}: op {}{} is not supported by kiln (see `kiln ops`)",
                                           describe(), domain.empty() ? "" : domain + ":",
                                           node.op_type()));
  }
  KILN_ASSIGN_OR_RETURN(Op op, ni.make_op(*kind));
  return ni.emit(std::move(op), ni.inputs()).status();
}

// ---- NodeImporter ----

namespace {

// Fills op attributes from ONNX attributes of the same name.
class AttributeFiller final : public AttrVisitor {
 public:
  // Attributes named in `ignore` are neither filled nor reported as unknown.
  AttributeFiller(const NodeImporter& ni, GraphImporter& gi,
                  const SubgraphInputTypes& subgraph_inputs,
                  std::span<const std::string_view> ignore)
      : ni_(ni), gi_(gi), subgraph_inputs_(subgraph_inputs), ignore_(ignore) {}

  void visit(std::string_view name, AttrRef field) override {
    known_.emplace_back(name);
    if (!status_.ok()) return;
    if (std::find(ignore_.begin(), ignore_.end(), name) != ignore_.end()) return;
    const onnx::AttributeProto* a = ni_.attr(name);
    if (a == nullptr) return;
    status_ = std::visit([&](auto* p) { return fill(*a, *p); }, field);
  }

  const Status& status() const { return status_; }
  const std::vector<std::string>& known() const { return known_; }

 private:
  Status type_error(const onnx::AttributeProto& a, std::string_view expected) const {
    return ni_.errorf("attribute \"{}\" must be {}, got type {}", a.name(), expected,
                      onnx::AttributeProto_AttributeType_Name(a.type()));
  }
  Status fill(const onnx::AttributeProto& a, int64_t& v) {
    if (a.type() != onnx::AttributeProto::INT) return type_error(a, "an int");
    v = a.i();
    return Status();
  }
  Status fill(const onnx::AttributeProto& a, float& v) {
    if (a.type() != onnx::AttributeProto::FLOAT) return type_error(a, "a float");
    v = a.f();
    return Status();
  }
  Status fill(const onnx::AttributeProto& a, std::string& v) {
    if (a.type() != onnx::AttributeProto::STRING) return type_error(a, "a string");
    v = a.s();
    return Status();
  }
  Status fill(const onnx::AttributeProto& a, std::vector<int64_t>& v) {
    if (a.type() != onnx::AttributeProto::INTS) return type_error(a, "a list of ints");
    v.assign(a.ints().begin(), a.ints().end());
    return Status();
  }
  Status fill(const onnx::AttributeProto& a, std::vector<float>& v) {
    if (a.type() != onnx::AttributeProto::FLOATS) return type_error(a, "a list of floats");
    v.assign(a.floats().begin(), a.floats().end());
    return Status();
  }
  Status fill(const onnx::AttributeProto& a, std::vector<std::string>& v) {
    if (a.type() != onnx::AttributeProto::STRINGS) return type_error(a, "a list of strings");
    v.assign(a.strings().begin(), a.strings().end());
    return Status();
  }
  Status fill(const onnx::AttributeProto& a, Tensor& v) {
    if (a.type() != onnx::AttributeProto::TENSOR) return type_error(a, "a tensor");
    KILN_ASSIGN_OR_RETURN(v, tensor_from_proto(a.t(), gi_.external_dir(),
                                               fmt::format("attribute \"{}\"", a.name())));
    return Status();
  }
  Status fill(const onnx::AttributeProto& a, DType& v) {
    if (a.type() != onnx::AttributeProto::INT) return type_error(a, "an element type");
    std::optional<DType> d = dtype_from_onnx(static_cast<int32_t>(a.i()));
    if (!d) return ni_.errorf("attribute \"{}\": element type {} is not supported", a.name(), a.i());
    v = *d;
    return Status();
  }
  Status fill(const onnx::AttributeProto& a, GraphAttr& v) {
    if (a.type() != onnx::AttributeProto::GRAPH) return type_error(a, "a graph");
    std::span<const ValueType> input_types;
    for (const auto& [name, types] : subgraph_inputs_) {
      if (name == a.name()) input_types = types;
    }
    KILN_ASSIGN_OR_RETURN(v, gi_.import_subgraph(a.g(), input_types, ni_.op_type() == "If"));
    return Status();
  }
  template <class T>
  Status fill(const onnx::AttributeProto& a, std::optional<T>& v) {
    T value{};
    KILN_RETURN_IF_ERROR(fill(a, value));
    v = std::move(value);
    return Status();
  }

  const NodeImporter& ni_;
  GraphImporter& gi_;
  const SubgraphInputTypes& subgraph_inputs_;
  std::span<const std::string_view> ignore_;
  Status status_;
  std::vector<std::string> known_;
};

}  // namespace

NodeImporter::NodeImporter(GraphImporter& graph_importer, const onnx::NodeProto& proto,
                           int64_t opset)
    : gi_(graph_importer), proto_(proto), opset_(opset) {
  for (const std::string& name : proto.input()) {
    inputs_.push_back(name.empty() ? nullptr : gi_.lookup(name));
  }
  while (!inputs_.empty() && inputs_.back() == nullptr && proto.input(static_cast<int>(inputs_.size()) - 1).empty()) {
    inputs_.pop_back();  // trailing omitted optional inputs
  }
}

Graph& NodeImporter::graph() { return gi_.graph(); }
const std::string& NodeImporter::node_name() const { return proto_.name(); }
const std::string& NodeImporter::op_type() const { return proto_.op_type(); }
int NodeImporter::num_inputs() const { return static_cast<int>(inputs_.size()); }
int NodeImporter::num_outputs() const { return proto_.output_size(); }

const onnx::AttributeProto* NodeImporter::attr(std::string_view name) const {
  for (const onnx::AttributeProto& a : proto_.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}
bool NodeImporter::has_attr(std::string_view name) const { return attr(name) != nullptr; }

std::optional<int64_t> NodeImporter::int_attr(std::string_view name) const {
  const auto* a = attr(name);
  if (a == nullptr || a->type() != onnx::AttributeProto::INT) return std::nullopt;
  return a->i();
}
std::optional<float> NodeImporter::float_attr(std::string_view name) const {
  const auto* a = attr(name);
  if (a == nullptr || a->type() != onnx::AttributeProto::FLOAT) return std::nullopt;
  return a->f();
}
std::optional<std::string> NodeImporter::string_attr(std::string_view name) const {
  const auto* a = attr(name);
  if (a == nullptr || a->type() != onnx::AttributeProto::STRING) return std::nullopt;
  return a->s();
}
std::optional<std::vector<int64_t>> NodeImporter::ints_attr(std::string_view name) const {
  const auto* a = attr(name);
  if (a == nullptr || a->type() != onnx::AttributeProto::INTS) return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}
std::optional<std::vector<float>> NodeImporter::floats_attr(std::string_view name) const {
  const auto* a = attr(name);
  if (a == nullptr || a->type() != onnx::AttributeProto::FLOATS) return std::nullopt;
  return std::vector<float>(a->floats().begin(), a->floats().end());
}

Result<Op> NodeImporter::make_op(OpKind kind, std::span<const std::string_view> ignore,
                                 const SubgraphInputTypes& subgraph_inputs) const {
  AttributeFiller filler(*this, gi_, subgraph_inputs, ignore);
  Op op = Op::make_default(kind).with_attributes(filler);
  KILN_RETURN_IF_ERROR(filler.status());
  for (const onnx::AttributeProto& a : proto_.attribute()) {
    bool known = std::find(filler.known().begin(), filler.known().end(), a.name()) != filler.known().end() ||
                 std::find(ignore.begin(), ignore.end(), a.name()) != ignore.end();
    if (!known) {
      return errorf("attribute \"{}\" is not supported for {} at opset {}", a.name(),
                    proto_.op_type(), opset_);
    }
  }
  return op;
}

Result<Node*> NodeImporter::emit(Op op, std::vector<Value*> inputs) {
  Node* node = graph().add_node(std::move(op), std::move(inputs), num_outputs(), proto_.name());
  for (int i = 0; i < num_outputs(); ++i) {
    const std::string& name = proto_.output(i);
    if (!name.empty()) node->output(i)->set_name(name);
    gi_.bind(name, node->output(i));
  }
  KILN_RETURN_IF_ERROR(infer_in_scope(*node));
  return node;
}

Result<Node*> NodeImporter::emit_internal(Op op, std::vector<Value*> inputs, int num_outputs) {
  Node* node = graph().add_node(std::move(op), std::move(inputs), num_outputs, proto_.name());
  KILN_RETURN_IF_ERROR(infer_in_scope(*node));
  return node;
}

Status NodeImporter::infer_in_scope(Node& node) const {
  Status inferred = infer_node(node);
  if (inferred.ok() || !gi_.in_if_branch()) return inferred;
  // Exporters write `if x.shape[-1] == 1: x = x.squeeze(-1)` as an If whose then-branch does not
  // type-check for other shapes: the node's outputs get its first input's element type, rank
  // unknown, and its kernel reports the error if the branch runs.
  for (Value* out : node.outputs()) {
    const Value* first = node.num_inputs() > 0 ? node.input(0) : nullptr;
    const bool typed = first != nullptr && first->type().is_tensor();
    out->set_type(TensorType::unranked(typed ? first->tensor_type().dtype : DType::kF32));
  }
  return Status();
}

Value* NodeImporter::constant(Tensor value) {
  return graph().add_constant(std::move(value), graph().unique_name(proto_.name() + "_const"));
}

void NodeImporter::bind_output(int i, Value* value) { gi_.bind(proto_.output(i), value); }

Value* NodeImporter::lookup(const std::string& name) const {
  return gi_.lookup(name);
}

Status NodeImporter::error(std::string_view message) const {
  std::string who = proto_.name().empty()
                        ? fmt::format("node {} (unnamed)", proto_.op_type())
                        : fmt::format("node {} \"{}\"", proto_.op_type(), proto_.name());
  return invalid_argument_error(fmt::format("{}: {}", who, message));
}

// ---- entry points ----

namespace {

// The bytes of a file mapping handed to the protobuf parser in chunks; with `release`, the pages
// more than a chunk behind the parser leave resident memory, so the file does not add a copy of
// the weights to the peak RSS while the parsed proto holds one.
class ChunkedInput final : public google::protobuf::io::ZeroCopyInputStream {
 public:
  ChunkedInput(std::span<const uint8_t> bytes, bool release) : bytes_(bytes), release_(release) {}

  bool Next(const void** data, int* size) override {
    if (pos_ >= bytes_.size()) return false;
    if (release_ && pos_ >= released_ + 2 * kChunk) {
      release_file_pages(bytes_.subspan(released_, pos_ - kChunk - released_));
      released_ = pos_ - kChunk;
    }
    const size_t n = std::min(kChunk, bytes_.size() - pos_);
    *data = bytes_.data() + pos_;
    *size = static_cast<int>(n);
    pos_ += n;
    return true;
  }
  void BackUp(int count) override { pos_ -= static_cast<size_t>(count); }
  bool Skip(int count) override {
    const bool whole = static_cast<size_t>(count) <= bytes_.size() - pos_;
    pos_ = whole ? pos_ + static_cast<size_t>(count) : bytes_.size();
    return whole;
  }
  int64_t ByteCount() const override { return static_cast<int64_t>(pos_); }

 private:
  static constexpr size_t kChunk = size_t{1} << 20;
  std::span<const uint8_t> bytes_;
  bool release_;
  size_t pos_ = 0;
  size_t released_ = 0;
};

// `mapped`: `bytes` is a read-only file mapping (a MappedFile), released as it is parsed.
Result<onnx::ModelProto> parse_model(std::span<const uint8_t> bytes, const std::string& name,
                                     bool mapped = false) {
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return invalid_argument_error(
        fmt::format("{}: larger than 2 GiB; store the weights as ONNX external data", name));
  }
  onnx::ModelProto proto;
  ChunkedInput input(bytes, mapped);
  if (!proto.ParseFromZeroCopyStream(&input)) {
    return invalid_argument_error(fmt::format(
        "{}: not a valid ONNX model (the protobuf does not parse: truncated or not ONNX)", name));
  }
  return proto;
}

// The proto's initializers lose their bytes as they are imported.
Result<std::unique_ptr<Model>> import_model(onnx::ModelProto& proto, const ImportOptions& options,
                                            const std::string& name) {
  auto with_name = [&](const Status& s) { return s.with_context(name); };
  if (!proto.has_graph()) {
    return invalid_argument_error(fmt::format("{}: not a valid ONNX model (it has no graph)", name));
  }
  KILN_RETURN_IF_ERROR(inline_local_functions(proto, name));
  auto model = std::make_unique<Model>();
  model->producer = proto.producer_name();
  model->source_path = name;
  for (const auto& imp : proto.opset_import()) {
    std::string domain = normalize_domain(imp.domain());
    if (domain.empty()) {
      model->opset = imp.version();
    } else {
      model->domain_opsets[domain] = imp.version();
    }
  }
  if (proto.opset_import_size() == 0) model->opset = 1;  // IR version 1-2 models
  if (model->opset > kMaxOpset) {
    return unimplemented_error(fmt::format(
        "{}: uses opset {}; kiln imports opsets 1 to {} (convert it with onnx.version_converter)",
        name, model->opset, kMaxOpset));
  }
  model->graph = std::make_unique<Graph>(proto.graph().name().empty() ? "main" : proto.graph().name());
  std::string dir = options.external_data_dir;
  if (dir.empty()) dir = std::filesystem::path(name).parent_path().string();
  if (dir.empty()) dir = ".";
  GraphImporter importer(*model, options, *model->graph, nullptr, dir);
  importer.release_initializers_of(proto.mutable_graph());
  Status status = importer.import(proto.graph(), /*is_main=*/true);
  if (!status.ok()) return with_name(status);
  return model;
}

}  // namespace

Result<std::unique_ptr<Model>> import_onnx_bytes(std::span<const uint8_t> bytes,
                                                 const ImportOptions& options,
                                                 const std::string& name) {
  KILN_ASSIGN_OR_RETURN(onnx::ModelProto proto, parse_model(bytes, name));
  return import_model(proto, options, name);
}

Result<std::unique_ptr<Model>> import_onnx_file(const std::string& path,
                                                const ImportOptions& options) {
  onnx::ModelProto proto;
  {
    // The parsed proto holds every byte it needs: the file's pages leave resident memory as they
    // are parsed, and the mapping goes before the graph is built.
    KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
    KILN_ASSIGN_OR_RETURN(proto, parse_model(file->bytes(), path, /*mapped=*/true));
  }
  return import_model(proto, options, path);
}

namespace {

// The default-domain ops newer than the ONNX schema library kiln builds against (Debian's
// libonnx 1.12 knows opsets up to 17), with the opset each first appeared in.
struct NewerOp {
  std::string_view op_type;
  int64_t since;
};
constexpr NewerOp kNewerOps[] = {
    {"BitwiseAnd", 18},
    {"BitwiseOr", 18},
    {"BitwiseXor", 18},
    {"BitwiseNot", 18},
    {"CenterCropPad", 18},
    {"Col2Im", 18},
    {"GroupNormalization", 18},
    {"Mish", 18},
    {"DeformConv", 19},
    {"AffineGrid", 20},
    {"Gelu", 20},
    {"ImageDecoder", 20},
    {"RegexFullMatch", 20},
    {"StringConcat", 20},
    {"StringSplit", 20},
    {"Attention", 23},
    {"RMSNormalization", 23},
    {"RotaryEmbedding", 23},
    {"Swish", 24},
    {"TensorScatter", 24},
    {"BitCast", 26},
    {"CumProd", 26},
    {"CausalConvWithState", 27},
    {"LinearAttention", 27},
    {"SwiGLU", 28},
};

}  // namespace

std::vector<SupportedOnnxOp> supported_onnx_ops() {
  std::vector<SupportedOnnxOp> out;
  for (int k = 0; k < kNumOpKinds; ++k) {
    auto kind = static_cast<OpKind>(k);
    std::string op_type(op_kind_name(kind));
    for (const NewerOp& newer : kNewerOps) {
      if (newer.op_type == op_type) out.push_back({"", op_type, newer.since, kMaxOpset});
    }
    for (const char* domain : {"", "ai.onnx.preview.training"}) {
      const onnx::OpSchema* newest = onnx::OpSchemaRegistry::Schema(op_type, kMaxOpset, domain);
      if (newest == nullptr) continue;
      int64_t first = newest->SinceVersion();
      for (int v = static_cast<int>(first) - 1; v >= 1; --v) {
        const onnx::OpSchema* s = onnx::OpSchemaRegistry::Schema(op_type, v, domain);
        if (s == nullptr) break;
        first = s->SinceVersion();
        v = static_cast<int>(first);
      }
      out.push_back({domain, op_type, first, kMaxOpset});
    }
  }
  // Ops that import as other ops (no kiln op of their own), e.g. Gradient.
  for (const OpsetImporter& row : all_importers()) {
    bool listed_above = (row.domain.empty() || row.domain == "ai.onnx.preview.training") &&
                        parse_op_kind(row.op_type).has_value();
    if (listed_above) continue;
    out.push_back({std::string(row.domain), std::string(row.op_type), row.since, row.until});
  }
  return out;
}

}  // namespace kiln::compiler
