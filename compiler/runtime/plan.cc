// SPDX-License-Identifier: Apache-2.0
// The planned-program core's functions: plannability and the ref fallback step.
#include "compiler/runtime/plan.h"

#include <fmt/format.h>

#include <cstring>

#include "compiler/ir/argument.h"
#include "compiler/targets/ref/interpreter.h"
#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::runtime {

size_t byte_size(DType dtype, const Shape& shape) {
  return static_cast<size_t>(shape.numel()) * dtype_size(dtype);
}

std::string why_not_plannable(const Graph& graph, bool if_nodes) {
  auto check = [](const Value* v) -> std::string {
    if (!v->type().is_tensor()) {
      return fmt::format("\"{}\" is a {}", v->name(), v->type().to_string());
    }
    const TensorType& t = v->tensor_type();
    if (!t.is_static())
      return fmt::format("\"{}\" has the dynamic type {}", v->name(), t.to_string());
    if (t.dtype == DType::kString) return fmt::format("\"{}\" holds strings", v->name());
    return "";
  };
  for (const Value* v : graph.inputs()) {
    if (std::string why = check(v); !why.empty()) return "input " + why;
  }
  for (const auto& node : graph.nodes()) {
    if (!node->op().subgraphs().empty() && !(if_nodes && node->kind() == OpKind::kIf)) {
      return node->describe() + " has subgraphs";
    }
    for (const Value* v : node->outputs()) {
      if (std::string why = check(v); !why.empty()) return node->describe() + ": output " + why;
    }
  }
  return "";
}

Status run_ref_step(const Node& node, const ref::NodeKernel* kernel, ref::Interpreter* interpreter,
                    std::span<const RefSlot> inputs, std::span<void* const> in,
                    std::span<const RefSlot> outputs, std::span<void* const> out) {
  std::vector<Argument> in_args(inputs.size());
  std::vector<const Argument*> in_ptrs(inputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const RefSlot& s = inputs[i];
    if (s.buffer < 0) continue;
    in_args[i] = Argument(Tensor::wrap(s.dtype, s.shape, in[i], nullptr));
    in_ptrs[i] = &in_args[i];
  }
  std::vector<Argument> out_args(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const RefSlot& s = outputs[i];
    // Ref kernels may count on zeroed outputs; the table's kernels write every element.
    if (kernel == nullptr && s.bytes != 0) std::memset(out[i], 0, s.bytes);
    out_args[i] = Argument(Tensor::wrap(s.dtype, s.shape, out[i], nullptr));
  }
  ref::KernelContext ctx(node, std::move(in_ptrs), &out_args, interpreter);
  KILN_RETURN_IF_ERROR(kernel != nullptr ? kernel->run(ctx) : ref::run_node(node, ctx));
  for (size_t i = 0; i < outputs.size(); ++i) {
    const RefSlot& s = outputs[i];
    const Argument& a = out_args[i];
    if (a.is_tensor() && a.tensor().raw_data() == out[i]) continue;
    if (!a.is_tensor() || a.tensor().dtype() != s.dtype || a.tensor().shape() != s.shape) {
      return internal_error(fmt::format("{}: output {} is {}, but compilation inferred {}{}",
                                        node.describe(), i, a.to_string(), dtype_name(s.dtype),
                                        s.shape.to_string()));
    }
    if (s.bytes != 0) std::memcpy(out[i], a.tensor().raw_data(), s.bytes);
  }
  return Status();
}

}  // namespace kiln::compiler::runtime
