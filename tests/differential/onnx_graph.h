// SPDX-License-Identifier: Apache-2.0
// A small ONNX model writer for the differential tester: random inputs and weights, nodes, and the
// shapes ONNX's own shape inference gives each value.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace kiln::differential {

// Reproducible random numbers (splitmix64): the same sequence on every platform and library, so a
// seed names the same case everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  // Uniform in [lo, hi] (inclusive).
  int64_t range(int64_t lo, int64_t hi);
  bool chance(double p);
  float uniform(float lo, float hi);
  // Standard normal (Box-Muller).
  float normal();
  template <class T>
  T pick(std::initializer_list<T> values) {
    return *(values.begin() + range(0, static_cast<int64_t>(values.size()) - 1));
  }
  template <class T>
  const T& pick(const std::vector<T>& values) {
    return values[static_cast<size_t>(range(0, static_cast<int64_t>(values.size()) - 1))];
  }

 private:
  uint64_t state_;
};

// One node attribute.
struct Attr {
  std::string name;
  std::variant<int64_t, float, std::vector<int64_t>, std::vector<float>, std::string,
               onnx::GraphProto>
      value;
};
inline Attr ai(std::string name, int64_t v) {
  return {std::move(name), v};
}
inline Attr af(std::string name, float v) {
  return {std::move(name), v};
}
inline Attr ais(std::string name, std::vector<int64_t> v) {
  return {std::move(name), std::move(v)};
}
inline Attr afs(std::string name, std::vector<float> v) {
  return {std::move(name), std::move(v)};
}
inline Attr as(std::string name, std::string v) {
  return {std::move(name), std::move(v)};
}
inline Attr ag(std::string name, onnx::GraphProto v) {
  return {std::move(name), std::move(v)};
}

using Dims = std::vector<int64_t>;

// Builds one ONNX model: graph inputs with random values, random weights as initializers, nodes
// with generated output names ("t1", "t2", ...), and graph outputs. Values are named as ONNX
// names them; dims() asks ONNX shape inference for any value's shape.
class OnnxGraph {
 public:
  // `prefix` starts every name it makes: a subgraph's names must not meet its parent's.
  explicit OnnxGraph(Rng& rng, int64_t opset = 13, std::string prefix = "");

  // The default-domain opset the model imports (13 unless changed).
  void set_opset(int64_t opset) { opset_ = opset; }
  int64_t opset() const { return opset_; }
  // Declares dims of the graph inputs symbolic ("N" for dim 0, "d<i>" for others): by default the
  // batch, dim 0, of every input. The target then compiles the model for the shapes it runs with.
  void set_dynamic_dims(std::vector<int> dims) { dynamic_dims_ = std::move(dims); }

  // A graph input of `dims` with values uniform in [-scale, scale] (and other such values for the
  // second run).
  std::string input(const Dims& dims, float scale = 1.0f);
  // The same with the second run's values of other dims `second` (a model with dynamic dims runs
  // a second shape).
  std::string input(const Dims& dims, const Dims& second, float scale = 1.0f);
  // A graph input holding `value` (its dtype and shape) in both runs, or `second` in the second.
  std::string input(Tensor value);
  std::string input(Tensor value, Tensor second);
  // An f32 initializer with values uniform in [-scale, scale].
  std::string weight(const Dims& dims, float scale);
  // An f32 initializer with values uniform in [lo, hi].
  std::string weight_in(const Dims& dims, float lo, float hi);
  // Initializers of the given values.
  std::string floats(const Dims& dims, const std::vector<float>& values);
  std::string scalar(float value) { return floats({}, {value}); }
  std::string ints(const std::vector<int64_t>& values);
  std::string tensor(const Tensor& value);

  // Adds a node; returns its (first) output.
  std::string node(const std::string& op, const std::vector<std::string>& inputs,
                   const std::vector<Attr>& attrs = {});
  // Adds a node with `outputs` outputs.
  std::vector<std::string> node_n(const std::string& op, const std::vector<std::string>& inputs,
                                  int outputs, const std::vector<Attr>& attrs = {});
  void output(const std::string& name);
  // An output of another element type than f32 (onnx::TensorProto::BOOL, ...).
  void output(const std::string& name, int32_t elem_type);

  // A subgraph's input (a Loop body's iteration number, condition and carried values), declared
  // with its type and no value.
  std::string formal_input(int32_t elem_type, const Dims& dims);
  // This graph as a subgraph (an If branch, a Loop body): its nodes, initializers, formal inputs
  // and outputs. Its nodes may read the parent's values by name.
  onnx::GraphProto subgraph() const;

  // The shape ONNX shape inference gives `name` (an error when it gives none).
  Result<Dims> dims(const std::string& name) const;
  // dims(), for generator code that built the value itself: aborts with the model printed when
  // shape inference fails (a bug in the generator, not in kiln).
  Dims shape(const std::string& name) const;

  // The model as built.
  onnx::ModelProto model() const;
  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<Tensor>& input_values() const { return input_values_; }
  // The inputs of a second run of the same executable: a run after the first must not see what
  // the first left in its buffers.
  const std::vector<Tensor>& second_input_values() const { return second_values_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  Rng& rng() { return rng_; }

 private:
  std::string fresh(const std::string& kind);
  onnx::ModelProto build(bool dynamic, bool outputs) const;

  Rng& rng_;
  int64_t opset_;
  std::vector<int> dynamic_dims_;
  std::string prefix_;
  int next_ = 0;
  onnx::GraphProto graph_;
  std::vector<std::string> input_names_;
  std::vector<Tensor> input_values_;
  std::vector<Tensor> second_values_;
  std::vector<std::string> output_names_;
  std::vector<int32_t> output_types_;
  std::vector<onnx::ValueInfoProto> formal_inputs_;
};

}  // namespace kiln::differential
