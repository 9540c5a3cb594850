// SPDX-License-Identifier: Apache-2.0
// The differential tester's ONNX model writer.
#include "tests/differential/onnx_graph.h"

#include <fmt/format.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cmath>

#include "compiler/onnx/tensor_proto.h"
#include "core/check.h"

namespace kiln::differential {

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

int64_t Rng::range(int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
}

bool Rng::chance(double p) {
  return static_cast<double>(next() >> 11) * 0x1.0p-53 < p;
}

float Rng::uniform(float lo, float hi) {
  const double u = static_cast<double>(next() >> 11) * 0x1.0p-53;
  return static_cast<float>(lo + (hi - lo) * u);
}

float Rng::normal() {
  const double u1 = (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53;
  const double u2 = static_cast<double>(next() >> 11) * 0x1.0p-53;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

namespace {

Tensor random_f32(Rng& rng, const Dims& dims, float lo, float hi) {
  Tensor t(DType::kF32, Shape(dims));
  for (float& v : t.span<float>()) v = rng.uniform(lo, hi);
  return t;
}

void set_type(onnx::ValueInfoProto* info, const std::string& name, const Tensor* value,
              const std::vector<int>& dynamic) {
  info->set_name(name);
  auto* t = info->mutable_type()->mutable_tensor_type();
  t->set_elem_type(value != nullptr ? compiler::dtype_to_onnx(value->dtype())
                                    : onnx::TensorProto::FLOAT);
  if (value == nullptr) return;
  auto* shape = t->mutable_shape();
  for (int i = 0; i < value->rank(); ++i) {
    auto* d = shape->add_dim();
    if (std::find(dynamic.begin(), dynamic.end(), i) != dynamic.end()) {
      d->set_dim_param(i == 0 ? std::string("N") : fmt::format("d{}", i));
    } else {
      d->set_dim_value(value->shape()[i]);
    }
  }
}

}  // namespace

OnnxGraph::OnnxGraph(Rng& rng, int64_t opset, std::string prefix)
    : rng_(rng), opset_(opset), prefix_(std::move(prefix)) {
  graph_.set_name(prefix_.empty() ? "differential" : prefix_ + "graph");
}

std::string OnnxGraph::fresh(const std::string& kind) {
  return fmt::format("{}{}{}", prefix_, kind, ++next_);
}

std::string OnnxGraph::input(const Dims& dims, float scale) {
  return input(dims, dims, scale);
}

std::string OnnxGraph::input(const Dims& dims, const Dims& second, float scale) {
  const std::string name = input(random_f32(rng_, dims, -scale, scale));
  second_values_.back() = random_f32(rng_, second, -scale, scale);
  return name;
}

std::string OnnxGraph::input(Tensor value) {
  Tensor second = value.clone();
  return input(std::move(value), std::move(second));
}

std::string OnnxGraph::input(Tensor value, Tensor second) {
  const std::string name = fresh("x");
  input_names_.push_back(name);
  second_values_.push_back(std::move(second));
  input_values_.push_back(std::move(value));
  return name;
}

std::string OnnxGraph::weight(const Dims& dims, float scale) {
  return tensor(random_f32(rng_, dims, -scale, scale));
}

std::string OnnxGraph::weight_in(const Dims& dims, float lo, float hi) {
  return tensor(random_f32(rng_, dims, lo, hi));
}

std::string OnnxGraph::floats(const Dims& dims, const std::vector<float>& values) {
  Tensor t(DType::kF32, Shape(dims));
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.data<float>()[i] = static_cast<size_t>(i) < values.size() ? values[i] : 0.0f;
  }
  return tensor(t);
}

std::string OnnxGraph::ints(const std::vector<int64_t>& values) {
  Tensor t(DType::kI64, Shape{static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.data<int64_t>()[i] = values[i];
  return tensor(t);
}

std::string OnnxGraph::tensor(const Tensor& value) {
  const std::string name = fresh("w");
  onnx::TensorProto* proto = graph_.add_initializer();
  compiler::tensor_to_proto(value, proto);
  proto->set_name(name);
  return name;
}

std::string OnnxGraph::node(const std::string& op, const std::vector<std::string>& inputs,
                            const std::vector<Attr>& attrs) {
  return node_n(op, inputs, 1, attrs)[0];
}

std::vector<std::string> OnnxGraph::node_n(const std::string& op,
                                           const std::vector<std::string>& inputs, int outputs,
                                           const std::vector<Attr>& attrs) {
  onnx::NodeProto* n = graph_.add_node();
  n->set_op_type(op);
  n->set_name(fmt::format("{}{}_{}", prefix_, op, ++next_));
  for (const std::string& in : inputs) n->add_input(in);
  std::vector<std::string> names;
  for (int i = 0; i < outputs; ++i) {
    names.push_back(fresh("t"));
    n->add_output(names.back());
  }
  for (const Attr& a : attrs) {
    onnx::AttributeProto* p = n->add_attribute();
    p->set_name(a.name);
    if (const auto* i = std::get_if<int64_t>(&a.value)) {
      p->set_type(onnx::AttributeProto::INT);
      p->set_i(*i);
    } else if (const auto* f = std::get_if<float>(&a.value)) {
      p->set_type(onnx::AttributeProto::FLOAT);
      p->set_f(*f);
    } else if (const auto* is = std::get_if<std::vector<int64_t>>(&a.value)) {
      p->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : *is) p->add_ints(v);
    } else if (const auto* fs = std::get_if<std::vector<float>>(&a.value)) {
      p->set_type(onnx::AttributeProto::FLOATS);
      for (float v : *fs) p->add_floats(v);
    } else if (const auto* s = std::get_if<std::string>(&a.value)) {
      p->set_type(onnx::AttributeProto::STRING);
      p->set_s(*s);
    } else {
      p->set_type(onnx::AttributeProto::GRAPH);
      *p->mutable_g() = std::get<onnx::GraphProto>(a.value);
    }
  }
  return names;
}

void OnnxGraph::output(const std::string& name) {
  output(name, onnx::TensorProto::FLOAT);
}

void OnnxGraph::output(const std::string& name, int32_t elem_type) {
  for (const std::string& o : output_names_) {
    if (o == name) return;
  }
  output_names_.push_back(name);
  output_types_.push_back(elem_type);
}

std::string OnnxGraph::formal_input(int32_t elem_type, const Dims& dims) {
  onnx::ValueInfoProto info;
  info.set_name(fresh("i"));
  auto* t = info.mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  auto* shape = t->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  formal_inputs_.push_back(info);
  return info.name();
}

onnx::GraphProto OnnxGraph::subgraph() const {
  onnx::GraphProto g = graph_;
  for (const onnx::ValueInfoProto& info : formal_inputs_) *g.add_input() = info;
  for (size_t i = 0; i < output_names_.size(); ++i) {
    onnx::ValueInfoProto* out = g.add_output();
    out->set_name(output_names_[i]);
    out->mutable_type()->mutable_tensor_type()->set_elem_type(output_types_[i]);
  }
  return g;
}

onnx::ModelProto OnnxGraph::model() const {
  return build(/*dynamic=*/true, /*outputs=*/true);
}

onnx::ModelProto OnnxGraph::build(bool dynamic, bool outputs) const {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("kiln differential tester");
  m.add_opset_import()->set_version(opset_);
  onnx::GraphProto* g = m.mutable_graph();
  *g = graph_;
  for (size_t i = 0; i < input_names_.size(); ++i) {
    set_type(g->add_input(), input_names_[i], &input_values_[i],
             dynamic ? dynamic_dims_ : std::vector<int>{});
  }
  if (outputs) {
    for (size_t i = 0; i < output_names_.size(); ++i) {
      onnx::ValueInfoProto* out = g->add_output();
      set_type(out, output_names_[i], nullptr, {});
      out->mutable_type()->mutable_tensor_type()->set_elem_type(output_types_[i]);
    }
  }
  return m;
}

Result<Dims> OnnxGraph::dims(const std::string& name) const {
  for (size_t i = 0; i < input_names_.size(); ++i) {
    if (input_names_[i] == name) return input_values_[i].shape().dims();
  }
  // Without the outputs' declared types (element type only), which would hide inferred shapes.
  onnx::ModelProto m = build(/*dynamic=*/false, /*outputs=*/false);
  try {
    // Data propagation follows Shape -> Gather -> Concat chains into Reshape targets.
    onnx::ShapeInferenceOptions options(/*check_type_val=*/false, /*strict_mode_val=*/1,
                                        /*data_prop_val=*/true);
    onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    return invalid_argument_error(fmt::format("onnx shape inference failed: {}", e.what()));
  }
  auto from = [&](const onnx::ValueInfoProto& v) -> Result<Dims> {
    if (!v.type().tensor_type().has_shape()) {
      return invalid_argument_error(
          fmt::format("onnx shape inference gives \"{}\" no shape", name));
    }
    Dims dims;
    for (const auto& d : v.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value()) {
        return invalid_argument_error(fmt::format("\"{}\" has a dynamic dim", name));
      }
      dims.push_back(d.dim_value());
    }
    return dims;
  };
  for (const auto& v : m.graph().value_info()) {
    if (v.name() == name) return from(v);
  }
  for (const auto& t : m.graph().initializer()) {
    if (t.name() == name) return Dims(t.dims().begin(), t.dims().end());
  }
  return not_found_error(fmt::format("no value \"{}\" in the model", name));
}

Dims OnnxGraph::shape(const std::string& name) const {
  Result<Dims> d = dims(name);
  // A generator asked for a value it built wrongly: a bug of the tester, not of kiln.
  KILN_CHECK(d.ok(), d.status().to_string() + "\n" + model().graph().DebugString());
  return *d;
}

}  // namespace kiln::differential
