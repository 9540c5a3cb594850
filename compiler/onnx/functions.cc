// SPDX-License-Identifier: Apache-2.0
// Inlining of model-local functions (see functions.h).
#include "compiler/onnx/functions.h"

#include <fmt/format.h>
#include <google/protobuf/unknown_field_set.h>
#include <onnx/onnx_pb.h>

#include <map>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln::compiler {
namespace {

// Calls nested deeper than this are taken for a function that calls itself.
constexpr int kMaxDepth = 64;

// FunctionProto.attribute_proto (field 11, IR version 9): the attributes' defaults. The ONNX
// schema kiln builds against (1.12) predates it, so it arrives as an unknown field.
constexpr int kAttributeProtoField = 11;

std::string domain_of(const std::string& domain) {
  return domain == "ai.onnx" ? std::string() : domain;
}

struct Function {
  const onnx::FunctionProto* proto = nullptr;
  std::map<std::string, onnx::AttributeProto> defaults;
};

using FunctionTable = std::map<std::pair<std::string, std::string>, Function>;

class Inliner {
 public:
  Inliner(const FunctionTable& functions, const std::string& name)
      : functions_(functions), name_(name) {}

  // Replaces the calls among `nodes` (and in their subgraphs) by the functions' bodies.
  Status expand(google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes, int depth) {
    google::protobuf::RepeatedPtrField<onnx::NodeProto> out;
    for (onnx::NodeProto& node : nodes) {
      KILN_RETURN_IF_ERROR(expand_subgraphs(node, depth));
      auto it = functions_.find({domain_of(node.domain()), node.op_type()});
      if (it == functions_.end()) {
        *out.Add() = std::move(node);
        continue;
      }
      if (depth >= kMaxDepth) {
        return invalid_argument_error(fmt::format(
            "{}: local function {} calls itself (nested {} deep); kiln inlines functions, so "
            "recursion cannot be imported",
            name_, node.op_type(), kMaxDepth));
      }
      KILN_ASSIGN_OR_RETURN(auto body, instantiate(node, it->second));
      KILN_RETURN_IF_ERROR(expand(body, depth + 1));
      for (onnx::NodeProto& n : body) *out.Add() = std::move(n);
    }
    nodes.Swap(&out);
    return Status();
  }

 private:
  Status expand_subgraphs(onnx::NodeProto& node, int depth) {
    for (onnx::AttributeProto& a : *node.mutable_attribute()) {
      if (a.has_g()) KILN_RETURN_IF_ERROR(expand(*a.mutable_g()->mutable_node(), depth));
      for (onnx::GraphProto& g : *a.mutable_graphs()) {
        KILN_RETURN_IF_ERROR(expand(*g.mutable_node(), depth));
      }
    }
    return Status();
  }

  // The body of `fn` for the call `call`: its values renamed, its attribute references resolved.
  Result<google::protobuf::RepeatedPtrField<onnx::NodeProto>> instantiate(
      const onnx::NodeProto& call, const Function& fn) {
    const onnx::FunctionProto& f = *fn.proto;
    const std::string what = call.name().empty()
                                 ? fmt::format("a call of local function {}", f.name())
                                 : fmt::format("node {} \"{}\"", f.name(), call.name());
    if (call.input_size() > f.input_size() || call.output_size() > f.output_size()) {
      return invalid_argument_error(fmt::format(
          "{}: {}: has {} inputs and {} outputs; the function declares {} and {}", name_, what,
          call.input_size(), call.output_size(), f.input_size(), f.output_size()));
    }
    const std::string prefix =
        fmt::format("{}/", call.name().empty() ? f.name() + std::to_string(++calls_) : call.name());
    std::unordered_map<std::string, std::string> names;
    for (int i = 0; i < f.input_size(); ++i) {
      names[f.input(i)] = i < call.input_size() ? call.input(i) : std::string();
    }
    for (int i = 0; i < f.output_size(); ++i) {
      if (i < call.output_size() && !call.output(i).empty()) names[f.output(i)] = call.output(i);
    }
    std::map<std::string, const onnx::AttributeProto*> given;
    for (const onnx::AttributeProto& a : call.attribute()) given[a.name()] = &a;

    google::protobuf::RepeatedPtrField<onnx::NodeProto> body;
    for (const onnx::NodeProto& proto : f.node()) {
      onnx::NodeProto& n = *body.Add();
      n = proto;
      if (!n.name().empty()) n.set_name(prefix + n.name());
      rename_node(n, names, prefix);
      resolve_attributes(n, given, fn.defaults);
    }
    return body;
  }

  // Renames the values `n` reads and writes (and its subgraphs read from outside them).
  static void rename_node(onnx::NodeProto& n, std::unordered_map<std::string, std::string>& names,
                          const std::string& prefix) {
    for (std::string& in : *n.mutable_input()) in = renamed(in, names, prefix);
    for (std::string& out : *n.mutable_output()) {
      if (out.empty()) continue;
      if (!names.count(out)) names[out] = prefix + out;
      out = names[out];
    }
    for (onnx::AttributeProto& a : *n.mutable_attribute()) {
      if (a.has_g()) rename_graph(*a.mutable_g(), names, prefix);
      for (onnx::GraphProto& g : *a.mutable_graphs()) rename_graph(g, names, prefix);
    }
  }

  // A subgraph in a function body: the names it defines get the prefix too (its own scope, a
  // copy of the outer names), the outer names it reads their renaming.
  static void rename_graph(onnx::GraphProto& g,
                           const std::unordered_map<std::string, std::string>& outer,
                           const std::string& prefix) {
    std::unordered_map<std::string, std::string> names = outer;
    for (onnx::ValueInfoProto& v : *g.mutable_input()) v.set_name(define(v.name(), names, prefix));
    for (onnx::TensorProto& t : *g.mutable_initializer())
      t.set_name(define(t.name(), names, prefix));
    for (onnx::NodeProto& n : *g.mutable_node()) rename_node(n, names, prefix);
    for (onnx::ValueInfoProto& v : *g.mutable_output())
      v.set_name(renamed(v.name(), names, prefix));
    for (onnx::ValueInfoProto& v : *g.mutable_value_info()) {
      v.set_name(renamed(v.name(), names, prefix));
    }
  }

  static std::string define(const std::string& name,
                            std::unordered_map<std::string, std::string>& names,
                            const std::string& prefix) {
    if (name.empty()) return name;
    names[name] = prefix + name;
    return names[name];
  }

  static std::string renamed(const std::string& name,
                             const std::unordered_map<std::string, std::string>& names,
                             const std::string& prefix) {
    if (name.empty()) return name;
    auto it = names.find(name);
    return it != names.end() ? it->second : prefix + name;
  }

  // Attributes that refer to the function's (ref_attr_name) take the call's value, else the
  // function's default, else are left out; subgraph nodes' references resolve the same way.
  static void resolve_attributes(onnx::NodeProto& n,
                                 const std::map<std::string, const onnx::AttributeProto*>& given,
                                 const std::map<std::string, onnx::AttributeProto>& defaults) {
    google::protobuf::RepeatedPtrField<onnx::AttributeProto> kept;
    for (onnx::AttributeProto& a : *n.mutable_attribute()) {
      if (!a.ref_attr_name().empty()) {
        const onnx::AttributeProto* value = nullptr;
        if (auto g = given.find(a.ref_attr_name()); g != given.end()) {
          value = g->second;
        } else if (auto d = defaults.find(a.ref_attr_name()); d != defaults.end()) {
          value = &d->second;
        }
        if (value == nullptr) continue;
        const std::string attr_name = a.name();
        a = *value;
        a.set_name(attr_name);
      }
      if (a.has_g()) resolve_graph(*a.mutable_g(), given, defaults);
      for (onnx::GraphProto& g : *a.mutable_graphs()) resolve_graph(g, given, defaults);
      *kept.Add() = std::move(a);
    }
    n.mutable_attribute()->Swap(&kept);
  }

  static void resolve_graph(onnx::GraphProto& g,
                            const std::map<std::string, const onnx::AttributeProto*>& given,
                            const std::map<std::string, onnx::AttributeProto>& defaults) {
    for (onnx::NodeProto& n : *g.mutable_node()) resolve_attributes(n, given, defaults);
  }

  const FunctionTable& functions_;
  const std::string& name_;
  int calls_ = 0;
};

std::map<std::string, onnx::AttributeProto> attribute_defaults(const onnx::FunctionProto& f) {
  std::map<std::string, onnx::AttributeProto> out;
  const google::protobuf::UnknownFieldSet& unknown = f.GetReflection()->GetUnknownFields(f);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField& field = unknown.field(i);
    if (field.number() != kAttributeProtoField ||
        field.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      continue;
    }
    onnx::AttributeProto a;
    if (a.ParseFromString(field.length_delimited()) && !a.name().empty()) out[a.name()] = a;
  }
  return out;
}

}  // namespace

Status inline_local_functions(onnx::ModelProto& model, const std::string& name) {
  if (model.functions_size() == 0) return Status();
  FunctionTable functions;
  std::map<std::string, int64_t> imported;
  for (const onnx::OperatorSetIdProto& imp : model.opset_import()) {
    imported[domain_of(imp.domain())] = imp.version();
  }
  std::map<std::string, int64_t> added;
  for (const onnx::FunctionProto& f : model.functions()) {
    Function& fn = functions[{domain_of(f.domain()), f.name()}];
    fn.proto = &f;
    fn.defaults = attribute_defaults(f);
    for (const onnx::OperatorSetIdProto& imp : f.opset_import()) {
      const std::string domain = domain_of(imp.domain());
      if (!imported.count(domain)) added.emplace(domain, imp.version());
    }
  }
  for (const auto& [domain, version] : added) {
    onnx::OperatorSetIdProto* imp = model.add_opset_import();
    imp->set_domain(domain);
    imp->set_version(version);
  }
  Inliner inliner(functions, name);
  return inliner.expand(*model.mutable_graph()->mutable_node(), 0);
}

}  // namespace kiln::compiler
