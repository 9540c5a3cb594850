// SPDX-License-Identifier: Apache-2.0
// NodeRewriter: builds the standard ops that replace one ONNX node (contrib ops, Gradient).
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <type_traits>
#include <vector>

#include "compiler/onnx/node_importer.h"
#include "compiler/ops/elementwise.h"

namespace kiln::compiler {

class NodeRewriter {
 public:
  explicit NodeRewriter(NodeImporter& ni) : ni_(ni) {}

  NodeImporter& ni() { return ni_; }

  // Adds one intermediate node (types inferred) and returns its first output.
  Result<Value*> op(Op op, std::vector<Value*> inputs) {
    KILN_ASSIGN_OR_RETURN(Node * node, ni_.emit_internal(std::move(op), std::move(inputs)));
    return node->output(0);
  }
  template <class T>
  Result<Value*> op(std::vector<Value*> inputs) {
    return op(Op(T{}), std::move(inputs));
  }

  // A scalar constant of `like`'s element type.
  Value* scalar(const Value* like, double v) {
    Tensor t(like->tensor_type().dtype, Shape{});
    visit_dtype(t.dtype(), [&]<class T>() {
      if constexpr (!std::is_same_v<T, std::string>) {
        *t.data<T>() = static_cast<T>(static_cast<float>(v));
      }
    });
    return ni_.constant(std::move(t));
  }

  // Binds ONNX output `i` to `value` through an Identity that carries the ONNX name, so that two
  // outputs sharing one value keep their own names. Unnamed (omitted) outputs are skipped.
  Status output(int i, Value* value) {
    if (i >= ni_.num_outputs() || ni_.proto().output(i).empty()) return Status();
    KILN_ASSIGN_OR_RETURN(Value * named, op<ops::Identity>({value}));
    named->set_name(ni_.proto().output(i));
    ni_.bind_output(i, named);
    return Status();
  }

 private:
  NodeImporter& ni_;
};

}  // namespace kiln::compiler
