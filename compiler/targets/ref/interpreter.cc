// SPDX-License-Identifier: Apache-2.0
// The ref interpreter and the KernelContext it hands to kernels.
#include "compiler/targets/ref/interpreter.h"

#include <fmt/format.h>

#include "compiler/ops/all_ops.h"
#include "compiler/ops/infer.h"
#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

namespace {

// The type a runtime argument has, for inference: tensors are concrete, other kinds keep the
// value's static type.
ValueType runtime_type(const Argument& arg, const Value& value) {
  if (arg.is_tensor()) return TensorType(arg.tensor().dtype(), arg.tensor().shape());
  if (arg.is_sequence() && !arg.sequence().empty()) {
    const Tensor& first = arg.sequence().front();
    return ValueType::sequence(TensorType(first.dtype(), first.shape()));
  }
  return value.type();
}

bool is_graph_output(const Value* v) {
  for (const Value* o : v->graph()->outputs()) {
    if (o == v) return true;
  }
  return false;
}

}  // namespace

// ---- KernelContext ----

const Argument& KernelContext::input_arg(int i) const {
  KILN_CHECK(i >= 0 && i < num_inputs() && inputs_[static_cast<size_t>(i)] != nullptr,
             "KernelContext::input_arg of a missing input");
  return *inputs_[static_cast<size_t>(i)];
}

const Tensor& KernelContext::input(int i) const { return input_arg(i).tensor(); }

Tensor& KernelContext::output(int i) { return (*outputs_)[static_cast<size_t>(i)].tensor(); }

bool KernelContext::output_used(int i) const {
  const Value* v = node_.output(i);
  return !v->uses().empty() || is_graph_output(v);
}

Result<Tensor*> KernelContext::allocate_output(int i, DType dtype, const Shape& shape) {
  Result<Tensor> t = Tensor::allocate(dtype, shape);
  if (!t.ok()) return t.status().with_context(node_.describe());
  (*outputs_)[static_cast<size_t>(i)] = Argument(std::move(t).value());
  return &(*outputs_)[static_cast<size_t>(i)].tensor();
}

void KernelContext::set_output(int i, Argument value) {
  (*outputs_)[static_cast<size_t>(i)] = std::move(value);
}

Status KernelContext::error(std::string_view message) const {
  return invalid_argument_error(fmt::format("{}: {}", node_.describe(), message));
}

Result<std::vector<Argument>> KernelContext::run_subgraph(const Graph& graph,
                                                          std::vector<Argument> inputs) {
  return interpreter_->run_subgraph(graph, std::move(inputs));
}

std::mt19937_64& KernelContext::rng() { return interpreter_->rng(); }

Status run_node(const Node& node, KernelContext& ctx) {
  switch (node.kind()) {
#define KILN_OP(name, family) \
  case OpKind::k##name: return run_op(node.op().as<ops::name>(), ctx);
#include "compiler/ops/op_list.inc"
#undef KILN_OP
  }
  return internal_error("run_node: invalid op kind");
}

// ---- Interpreter ----

const Argument* Interpreter::lookup(const Frame& frame, const Value* value) {
  for (const Frame* f = &frame; f != nullptr; f = f->parent) {
    auto it = f->values.find(value);
    if (it != f->values.end()) return &it->second;
  }
  return nullptr;
}

Result<std::vector<Argument>> Interpreter::run(const Graph& graph, std::vector<Argument> inputs) {
  return run_frame(graph, std::move(inputs), nullptr);
}

Result<std::vector<Argument>> Interpreter::run_subgraph(const Graph& graph,
                                                        std::vector<Argument> inputs) {
  return run_frame(graph, std::move(inputs), current_);
}

Result<std::vector<Argument>> Interpreter::run_frame(const Graph& graph,
                                                     std::vector<Argument> inputs,
                                                     const Frame* parent) {
  if (inputs.size() != graph.inputs().size()) {
    return invalid_argument_error(fmt::format("graph \"{}\" takes {} inputs, got {}", graph.name(),
                                              graph.inputs().size(), inputs.size()));
  }
  Frame frame;
  frame.parent = parent;
  for (size_t i = 0; i < inputs.size(); ++i) frame.values[graph.inputs()[i]] = std::move(inputs[i]);

  const Frame* saved = current_;
  for (const auto& node : graph.nodes()) {
    current_ = &frame;
    Status s = run_node_in(*node, frame);
    current_ = saved;
    if (!s.ok()) return s;
  }

  std::vector<Argument> outputs;
  for (const Value* v : graph.outputs()) {
    const Argument* a = lookup(frame, v);
    if (a == nullptr) {
      return internal_error(fmt::format("graph \"{}\": output \"{}\" was not computed", graph.name(), v->name()));
    }
    outputs.push_back(*a);
  }
  return outputs;
}

Status Interpreter::run_node_in(const Node& node, Frame& frame) {
  std::vector<const Argument*> args;
  args.reserve(static_cast<size_t>(node.num_inputs()));
  for (const Value* v : node.inputs()) {
    const Argument* a = v ? lookup(frame, v) : nullptr;
    if (v != nullptr && a == nullptr) {
      return internal_error(fmt::format("{}: input \"{}\" has no value", node.describe(), v->name()));
    }
    args.push_back(a);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Argument> outputs, evaluate(node, std::move(args)));
  for (int i = 0; i < node.num_outputs(); ++i) {
    frame.values[node.output(i)] = std::move(outputs[static_cast<size_t>(i)]);
  }
  return Status();
}

Result<std::vector<Argument>> Interpreter::evaluate(const Node& node,
                                                    std::vector<const Argument*> args) {
  std::vector<ValueType> types;
  types.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    types.push_back(args[i] ? runtime_type(*args[i], *node.input(static_cast<int>(i)))
                            : ValueType());
  }
  std::vector<const ValueType*> type_ptrs;
  std::vector<const Tensor*> values;
  for (size_t i = 0; i < args.size(); ++i) {
    bool present = args[i] != nullptr;
    type_ptrs.push_back(present ? &types[i] : nullptr);
    values.push_back(present && args[i]->is_tensor() ? &args[i]->tensor() : nullptr);
  }
  InferContext infer_ctx(node, std::move(type_ptrs), std::move(values));
  KILN_ASSIGN_OR_RETURN(std::vector<ValueType> out_types, infer_types(node.op(), infer_ctx));

  std::vector<Argument> outputs(static_cast<size_t>(node.num_outputs()));
  for (int i = 0; i < node.num_outputs() && i < static_cast<int>(out_types.size()); ++i) {
    const ValueType& t = out_types[static_cast<size_t>(i)];
    if (t.is_tensor() && t.tensor().is_static()) {
      Result<Tensor> alloc = Tensor::allocate(t.tensor().dtype, t.tensor().shape());
      if (!alloc.ok()) return alloc.status().with_context(node.describe());
      outputs[static_cast<size_t>(i)] = Argument(std::move(alloc).value());
    }
  }
  KernelContext ctx(node, std::move(args), &outputs, this);
  const NodeKernel* kernel = nullptr;
  if (kernels_ != nullptr) {
    auto it = kernels_->find(&node);
    if (it != kernels_->end()) kernel = it->second.get();
  }
  KILN_RETURN_IF_ERROR(kernel != nullptr ? kernel->run(ctx) : run_node(node, ctx));
  for (int i = 0; i < node.num_outputs(); ++i) {
    const Argument& out = outputs[static_cast<size_t>(i)];
    if (out.is_none() && node.output(i)->type().kind() != ValueType::Kind::kOptional &&
        ctx.output_used(i)) {
      return internal_error(
          fmt::format("{}: the ref kernel did not produce output {}", node.describe(), i));
    }
  }
  return outputs;
}

}  // namespace kiln::compiler::ref
