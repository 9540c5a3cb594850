// SPDX-License-Identifier: Apache-2.0
// The graph builder with MIGraphX's names: kiln.op, the main module of a kiln.program
// (add_parameter, add_literal, add_instruction, add_return) and instruction_ref. Converters (the
// PyTorch bridge) build kiln graphs with it directly, then compile and run them as any program.
#include "compiler/ir/builder.h"

#include <fmt/format.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/ir/printer.h"
#include "compiler/ops/op.h"
#include "python/src/bindings.h"
#include "python/src/shape.h"

namespace kiln::python {
namespace {

using namespace pybind11::literals;
using compiler::Op;

// Fills an op's attributes from Python keyword arguments, each converted to the field's type.
class KwargsFiller final : public compiler::AttrVisitor {
 public:
  KwargsFiller(std::string op_name, const py::dict& kwargs)
      : op_name_(std::move(op_name)), kwargs_(kwargs) {}

  void visit(std::string_view name, compiler::AttrRef field) override {
    names_.emplace_back(name);
    py::str key{std::string(name)};
    if (!kwargs_.contains(key)) return;
    ++used_;
    py::handle value = kwargs_[key];
    std::visit([&](auto* f) { fill(name, value, *f); }, field);
  }

  // Raises naming the first keyword that is not an attribute of the op.
  void check_all_used() const {
    if (used_ == kwargs_.size()) return;
    for (auto item : kwargs_) {
      auto key = py::str(item.first).cast<std::string>();
      if (std::find(names_.begin(), names_.end(), key) == names_.end()) {
        raise_status(invalid_argument_error(fmt::format(
            "op {}: unknown attribute \"{}\"; its attributes are: {}", op_name_, key,
            names_.empty() ? std::string("(none)") : fmt::format("{}", fmt::join(names_, ", ")))));
      }
    }
  }

 private:
  template <class T>
  T cast(std::string_view name, py::handle value) const {
    try {
      return value.cast<T>();
    } catch (const py::cast_error&) {
      raise_status(
          invalid_argument_error(fmt::format("op {}: attribute \"{}\" cannot take {}", op_name_,
                                             name, py::repr(value).cast<std::string>())));
    }
  }
  void fill(std::string_view name, py::handle value, int64_t& f) { f = cast<int64_t>(name, value); }
  void fill(std::string_view name, py::handle value, float& f) { f = cast<float>(name, value); }
  void fill(std::string_view name, py::handle value, std::string& f) {
    f = cast<std::string>(name, value);
  }
  void fill(std::string_view name, py::handle value, std::vector<int64_t>& f) {
    f = cast<std::vector<int64_t>>(name, value);
  }
  void fill(std::string_view name, py::handle value, std::vector<float>& f) {
    f = cast<std::vector<float>>(name, value);
  }
  void fill(std::string_view name, py::handle value, std::vector<std::string>& f) {
    f = cast<std::vector<std::string>>(name, value);
  }
  void fill(std::string_view name, py::handle value, Tensor& f) {
    f = tensor_from_numpy(py::module_::import("numpy").attr("array")(value),
                          fmt::format("op {}: attribute \"{}\"", op_name_, name))
            .clone();
  }
  void fill(std::string_view name, py::handle value, DType& f) {
    // A MIGraphX or numpy type name, or a numpy dtype.
    py::object dtype_name = py::isinstance<py::str>(value)
                                ? py::reinterpret_borrow<py::object>(value)
                                : py::str(py::module_::import("numpy").attr("dtype")(value));
    f = dtype_from_name(cast<std::string>(name, dtype_name));
  }
  void fill(std::string_view name, py::handle, compiler::GraphAttr&) {
    raise_status(unimplemented_error(fmt::format(
        "op {}: attribute \"{}\" is a subgraph; the builder has no control-flow ops yet", op_name_,
        name)));
  }
  template <class T>
  void fill(std::string_view name, py::handle value, std::optional<T>& f) {
    if (value.is_none()) {
      f.reset();
      return;
    }
    T inner{};
    fill(name, value, inner);
    f = std::move(inner);
  }

  std::string op_name_;
  const py::dict& kwargs_;
  std::vector<std::string> names_;
  size_t used_ = 0;
};

Op make_op(const std::string& name, const py::kwargs& kwargs) {
  std::optional<compiler::OpKind> kind = compiler::parse_op_kind(name);
  if (!kind) {
    raise_status(not_found_error(fmt::format(
        "op: kiln has no op \"{}\"; ops are named as in ONNX (Conv, MatMul, Relu, ...)", name)));
  }
  KwargsFiller filler(name, kwargs);
  Op op = Op::make_default(*kind).with_attributes(filler);
  filler.check_all_used();
  return op;
}

// The main module of a program being built. Holds the program object so that the graph lives as
// long as any module or instruction of it, and so that edits after compile() are refused.
class Module {
 public:
  Module(py::object program, std::shared_ptr<compiler::Graph> graph)
      : program_(std::move(program)), graph_(std::move(graph)) {}

  compiler::Graph& graph(std::string_view what) const {
    if (program_.attr("is_compiled")().cast<bool>()) {
      raise_status(failed_precondition_error(fmt::format(
          "{}: the program is compiled; build a new kiln.program() to add instructions", what)));
    }
    return *graph_;
  }
  const compiler::Graph& graph() const { return *graph_; }
  const py::object& program() const { return program_; }

 private:
  py::object program_;
  std::shared_ptr<compiler::Graph> graph_;
};

// MIGraphX's instruction_ref: one value of a module's graph.
struct Instruction {
  std::shared_ptr<Module> module;
  compiler::Value* value;

  PyShape shape() const {
    if (!value->type().is_tensor()) {
      raise_status(unimplemented_error(fmt::format("instruction \"{}\" is a {}, not a tensor",
                                                   value->name(), value->type().to_string())));
    }
    return PyShape::of(value->tensor_type());
  }
};

compiler::Value* value_of(const std::shared_ptr<Module>& module, const Instruction& ins,
                          std::string_view what) {
  if (ins.module.get() != module.get() && &ins.module->graph() != &module->graph()) {
    raise_status(invalid_argument_error(
        fmt::format("{}: instruction \"{}\" belongs to another program", what, ins.value->name())));
  }
  return ins.value;
}

Instruction add_parameter(const std::shared_ptr<Module>& m, const std::string& name,
                          const PyShape& shape) {
  compiler::Graph& graph = m->graph("add_parameter");
  for (const compiler::Value* in : graph.inputs()) {
    if (in->name() == name) {
      raise_status(already_exists_error(
          fmt::format("add_parameter: the module already has a parameter \"{}\"", name)));
    }
  }
  std::vector<compiler::Dim> dims;
  for (int64_t d : shape.lens) dims.emplace_back(d);
  compiler::GraphBuilder builder(graph);
  return {m, builder.input(name, compiler::TensorType(shape.dtype, std::move(dims)))};
}

Instruction add_literal(const std::shared_ptr<Module>& m, const py::object& value,
                        const std::string& name) {
  compiler::Graph& graph = m->graph("add_literal");
  py::object array = py::module_::import("numpy").attr("array")(value);
  Tensor tensor = tensor_from_numpy(array, "add_literal").clone();
  compiler::GraphBuilder builder(graph);
  return {m, builder.constant(std::move(tensor), name)};
}

py::object add_instruction(const std::shared_ptr<Module>& m, const Op& op,
                           const std::vector<std::optional<Instruction>>& args, int num_outputs,
                           const std::string& name) {
  compiler::Graph& graph = m->graph("add_instruction");
  if (num_outputs < 1) {
    raise_status(invalid_argument_error(
        fmt::format("add_instruction: num_outputs must be at least 1, not {}", num_outputs)));
  }
  std::vector<compiler::Value*> inputs;
  for (const std::optional<Instruction>& a : args) {
    inputs.push_back(a ? value_of(m, *a, "add_instruction") : nullptr);
  }
  compiler::GraphBuilder builder(graph);
  std::vector<compiler::Value*> outputs = builder.add(op, std::move(inputs), num_outputs, name);
  if (!builder.status().ok()) {
    // Drop the node that failed inference, so that the module stays valid.
    compiler::Node* node = outputs[0]->producer();
    Status status = builder.status();
    graph.erase(node);
    raise_status(status);
  }
  if (num_outputs == 1) return py::cast(Instruction{m, outputs[0]});
  py::list out;
  for (compiler::Value* v : outputs) out.append(py::cast(Instruction{m, v}));
  return out;
}

void add_return(const std::shared_ptr<Module>& m, const std::vector<Instruction>& values) {
  compiler::Graph& graph = m->graph("add_return");
  graph.clear_outputs();
  for (const Instruction& v : values) graph.add_output(value_of(m, v, "add_return"));
}

}  // namespace

py::object main_module(const py::object& program, std::shared_ptr<compiler::Graph> graph) {
  return py::cast(std::make_shared<Module>(program, std::move(graph)));
}

void bind_builder(py::module_& m) {
  py::class_<Op>(m, "op", "An operation of kiln's IR: kiln.op(\"Conv\", strides=[1, 1]).")
      .def(py::init(&make_op), "name"_a,
           "The op called `name` (ONNX's names) with the given attributes; the others keep "
           "their defaults.")
      .def("name", [](const Op& op) { return std::string(op.name()); })
      .def("__eq__", [](const Op& a, const Op& b) { return a == b; })
      .def("__hash__", &Op::hash)
      .def("__repr__",
           [](const Op& op) { return fmt::format("op({}{})", op.name(), op.attributes_string()); });

  py::class_<Instruction>(m, "instruction_ref", "A value of a module: what add_* return.")
      .def("shape", &Instruction::shape)
      .def("name", [](const Instruction& i) { return i.value->name(); })
      .def("op",
           [](const Instruction& i) -> py::object {
             if (i.value->producer() == nullptr) return py::str("@param");
             return py::cast(i.value->producer()->op());
           })
      .def("__repr__", [](const Instruction& i) {
        return fmt::format("instruction_ref({}: {})", i.value->name(), i.value->type().to_string());
      });

  py::class_<Module, std::shared_ptr<Module>>(
      m, "module", "A program's graph being built (MIGraphX's module): program.get_main_module().")
      .def("add_parameter", &add_parameter, "name"_a, "shape"_a,
           "A graph input called `name` of kiln.shape `shape`.")
      .def("add_literal", &add_literal, "value"_a, "name"_a = "",
           "A constant holding a copy of `value` (a numpy array or anything np.array takes).")
      .def("add_instruction", &add_instruction, "op"_a,
           "args"_a = std::vector<std::optional<Instruction>>{}, "num_outputs"_a = 1, "name"_a = "",
           "Adds `op` applied to `args` (None for an omitted optional input); returns its "
           "instruction_ref, or a list of them when num_outputs > 1. Types are inferred at once: "
           "an op that does not accept its inputs raises here.")
      .def("add_return", &add_return, "args"_a, "Sets the program's outputs.")
      .def("get_parameter_names",
           [](const Module& m) {
             std::vector<std::string> names;
             for (const compiler::Value* v : m.graph().inputs()) names.push_back(v->name());
             return names;
           })
      .def("num_instructions", [](const Module& m) { return m.graph().num_nodes(); })
      .def("__str__", [](const Module& m) { return compiler::print_graph(m.graph()); })
      .def("print",
           [](const Module& m) { py::print(compiler::print_graph(m.graph()), "end"_a = ""); });
}

}  // namespace kiln::python
