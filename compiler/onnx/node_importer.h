// SPDX-License-Identifier: Apache-2.0
// How one ONNX node becomes IR: the generic path (attributes filled by name through reflect) and
// per-version importers, listed as data (op, domain, opset range) in onnx/<family>.cc.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/ir/graph.h"
#include "core/status.h"

namespace onnx {
class NodeProto;
class AttributeProto;
}  // namespace onnx

namespace kiln::compiler {

class GraphImporter;

// Input types for subgraph attributes, by attribute name; see NodeImporter::make_op.
using SubgraphInputTypes = std::vector<std::pair<std::string_view, std::vector<ValueType>>>;

// The view a per-op importer gets of the node it translates.
class NodeImporter {
 public:
  NodeImporter(GraphImporter& graph_importer, const onnx::NodeProto& proto, int64_t opset);

  const onnx::NodeProto& proto() const { return proto_; }
  // The opset of the node's domain that the model imports.
  int64_t opset() const { return opset_; }
  Graph& graph();
  const std::string& node_name() const;
  const std::string& op_type() const;

  int num_inputs() const;
  int num_outputs() const;
  // Input i, or nullptr when it is absent (past the node's inputs: a malformed node an importer
  // reads before the op's arity is checked) or given as "".
  Value* input(int i) const {
    return i >= 0 && static_cast<size_t>(i) < inputs_.size() ? inputs_[static_cast<size_t>(i)]
                                                             : nullptr;
  }
  bool has_input(int i) const { return i < num_inputs() && input(i) != nullptr; }
  const std::vector<Value*>& inputs() const { return inputs_; }

  bool has_attr(std::string_view name) const;
  const onnx::AttributeProto* attr(std::string_view name) const;
  std::optional<int64_t> int_attr(std::string_view name) const;
  std::optional<float> float_attr(std::string_view name) const;
  std::optional<std::string> string_attr(std::string_view name) const;
  std::optional<std::vector<int64_t>> ints_attr(std::string_view name) const;
  std::optional<std::vector<float>> floats_attr(std::string_view name) const;

  // The op of `kind` with every ONNX attribute whose name matches a field filled in. Attributes
  // listed in `ignore` are skipped; any other unknown attribute is an error naming it.
  // `subgraph_inputs` gives, for a subgraph attribute (by name), the types of its inputs by
  // position, used where the ONNX graph leaves an input untyped (ONNX lets Loop and Scan bodies
  // omit types the node's inputs imply).
  Result<Op> make_op(OpKind kind, std::span<const std::string_view> ignore = {},
                     const SubgraphInputTypes& subgraph_inputs = {}) const;

  // Adds a node for `op` with the given inputs whose outputs become the ONNX node's outputs (by
  // name, in order). Types are inferred afterwards, by the graph importer.
  // Infers the new node's types at once; an inference failure is returned.
  Result<Node*> emit(Op op, std::vector<Value*> inputs);
  // Adds an intermediate node (not bound to the ONNX outputs) with `num_outputs` outputs.
  Result<Node*> emit_internal(Op op, std::vector<Value*> inputs, int num_outputs = 1);
  // A constant value, e.g. an attribute turned into an input.
  Value* constant(Tensor value);
  // Binds ONNX output i to an existing value (for ops that import as nothing, like Identity).
  void bind_output(int i, Value* value);
  // The value a name refers to in the node's scope (this graph or an enclosing one), or nullptr.
  Value* lookup(const std::string& name) const;

  // An error naming the node: `node Conv "c1": <message>`.
  Status error(std::string_view message) const;
  template <class... Args>
  Status errorf(fmt::format_string<Args...> format, Args&&... args) const {
    return error(fmt::format(format, std::forward<Args>(args)...));
  }

 private:
  // infer_node, except that inside an If branch a failure leaves the node's outputs typed
  // loosely (its kernel reports the error if the branch runs).
  Status infer_in_scope(Node& node) const;

  GraphImporter& gi_;
  const onnx::NodeProto& proto_;
  int64_t opset_;
  std::vector<Value*> inputs_;
};

using ImportFn = std::function<Status(NodeImporter&)>;

// The `until` of a row that holds up to the newest opset.
inline constexpr int64_t kLatestOpset = std::numeric_limits<int64_t>::max();

// One row of the version table: ONNX nodes of `op_type` in `domain` whose model opset lies in
// [since, until] are imported by `fn`. Ops without a row import through the generic path.
struct OpsetImporter {
  std::string_view domain;  // "" is the default ONNX domain
  std::string_view op_type;
  int64_t since;
  int64_t until;
  ImportFn fn;
};

// Each family's rows (onnx/<family>.cc). importers.cc joins them; nothing registers statically.
std::vector<OpsetImporter> elementwise_importers();
std::vector<OpsetImporter> nn_importers();
std::vector<OpsetImporter> linalg_importers();
std::vector<OpsetImporter> reduce_importers();
std::vector<OpsetImporter> shape_importers();
std::vector<OpsetImporter> indexing_importers();
std::vector<OpsetImporter> rnn_importers();
std::vector<OpsetImporter> control_importers();
std::vector<OpsetImporter> quantize_importers();
std::vector<OpsetImporter> image_importers();
std::vector<OpsetImporter> signal_importers();
std::vector<OpsetImporter> random_importers();
std::vector<OpsetImporter> misc_importers();
std::vector<OpsetImporter> ml_importers();
std::vector<OpsetImporter> attention_importers();
// com.microsoft and ai.onnx.ml ops rewritten into standard ops (onnx/contrib_ops.cc).
std::vector<OpsetImporter> contrib_importers();

// The whole table.
const std::vector<OpsetImporter>& all_importers();

}  // namespace kiln::compiler
