// SPDX-License-Identifier: Apache-2.0
// int8 post-training quantization: calibrate activation ranges on a target, then rewrite the graph
// into standard ONNX QDQ form (per-tensor activations, per-channel weights) the way ONNX Runtime's
// quantize_static places it: every value an int8 op reads gets one QuantizeLinear ->
// DequantizeLinear pair, so that the targets' QDQ fusion finds int8 regions end to end.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "compiler/ir/clone.h"
#include "compiler/ops/all_ops.h"
#include "compiler/ops/infer.h"
#include "compiler/passes/passes.h"
#include "compiler/passes/rewrite.h"
#include "compiler/quantize/calibration.h"
#include "compiler/quantize/quantize.h"

namespace kiln::compiler {

namespace {

// A node to quantize: its activation input 0 and its constant weight, per-channel along `axis`.
struct Site {
  Node* node;
  int64_t axis;
};

// One input of a node that reads the int8 form of a value (through its DequantizeLinear).
struct Reader {
  Node* node;
  int input;
};

// Where the QDQ pairs go: the weight sites, every value an int8 op reads (in order of first
// read) with those reads, and the values whose scale is another's (a MaxPool's output is its
// input's: max commutes with quantization, so the pool runs on the 8-bit data).
struct Placement {
  std::vector<Site> sites;
  std::vector<Value*> values;
  std::unordered_map<const Value*, std::vector<Reader>> readers;
  std::unordered_map<const Value*, const Value*> shares;

  void read(Node* node, int input) {
    Value* v = node->input(input);
    auto [it, added] = readers.try_emplace(v);
    if (added) values.push_back(v);
    it->second.push_back(Reader{node, input});
  }
};

bool is_f32(const Value* v) {
  return v != nullptr && v->type().is_tensor() && v->tensor_type().dtype == DType::kF32;
}

// The weight's output-channel axis when `node` has a constant f32 weight and a computed f32
// activation; nullopt when it cannot be quantized this way.
std::optional<int64_t> weight_axis(const Node& node) {
  if (!node.has_input(0) || !node.has_input(1) || !is_f32(node.input(0)) ||
      node.input(0)->constant_value() != nullptr || !is_f32(node.output(0))) {
    return std::nullopt;
  }
  const Tensor* w = node.input(1)->constant_value();
  if (w == nullptr || w->dtype() != DType::kF32) return std::nullopt;
  switch (node.kind()) {
    case OpKind::kConv:
      if (w->rank() < 3) return std::nullopt;
      return 0;
    case OpKind::kMatMul:
      if (w->rank() != 2) return std::nullopt;
      return 1;
    case OpKind::kGemm: {
      if (w->rank() != 2) return std::nullopt;
      return node.attrs<ops::Gemm>().transB != 0 ? 0 : 1;
    }
    default: return std::nullopt;
  }
}

// A computed f32 tensor whose every dim is a number or named (a dynamic batch): an activation a
// residual Add or a pool may read in int8.
bool is_activation(const Value* v) {
  if (!is_f32(v) || v->constant_value() != nullptr || !v->tensor_type().has_rank()) return false;
  for (const Dim& d : *v->tensor_type().dims) {
    if (!d.known() && d.symbol.empty()) return false;
  }
  return true;
}

// Whether `node` was asked to stay in float (--int8-exclude: its name or its op's).
bool excluded(const Node& node, const std::vector<std::string>& exclude) {
  for (const std::string& e : exclude) {
    if (e == node.name() || e == op_kind_name(node.kind())) return true;
  }
  return false;
}

// Whether `node` is a residual Add (two activations of one shape), a MaxPool with no indices
// output or an op that moves elements (Reshape, Flatten, Transpose, Squeeze, Unsqueeze) -- ops
// that run on 8-bit data when what they make is read in int8 too -- or a GlobalAveragePool, which
// reads int8 (a network's last block then runs int8) and writes f32.
bool is_int8_passage(const Node& node) {
  switch (node.kind()) {
    case OpKind::kAdd:
      return node.num_inputs() == 2 && is_activation(node.input(0)) &&
             is_activation(node.input(1)) &&
             node.input(0)->tensor_type() == node.input(1)->tensor_type();
    case OpKind::kGlobalAveragePool: return is_activation(node.input(0));
    case OpKind::kReshape:
    case OpKind::kFlatten:
    case OpKind::kTranspose:
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze: return node.num_outputs() == 1 && is_activation(node.input(0));
    case OpKind::kMaxPool:
      return is_activation(node.input(0)) &&
             (node.num_outputs() == 1 ||
              (node.output(1)->uses().empty() && !is_graph_output(node.output(1))));
    default: return false;
  }
}

// Places the QDQ pairs: the input of Conv, MatMul and Gemm with constant weights (those in
// `kinds`) and of a GlobalAveragePool, and both inputs of a residual Add and the input of a
// MaxPool or element-moving op whose output (after a Relu, for the Add) an int8 op reads -- a pair
// where nothing after reads int8 would only add a DequantizeLinear. The output of a MaxPool or of
// an op moving elements takes its input's scale, so the targets run it on the 8-bit data.
Placement place(Graph& graph, const std::unordered_set<OpKind>& kinds,
                const std::vector<std::string>& exclude) {
  std::unordered_set<const Node*> int8;
  std::vector<Node*> order;
  for (const auto& owned : graph.nodes()) order.push_back(owned.get());
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* node = *it;
    if (excluded(*node, exclude)) continue;
    if (kinds.count(node->kind()) != 0) {
      if (weight_axis(*node)) int8.insert(node);
      continue;
    }
    if (!is_int8_passage(*node)) continue;
    if (node->kind() == OpKind::kGlobalAveragePool) {
      int8.insert(node);
      continue;
    }
    const Value* out = node->output(0);
    if (out->uses().size() == 1 && out->uses()[0].node->kind() == OpKind::kRelu) {
      out = out->uses()[0].node->output(0);
    }
    for (const Use& u : out->uses()) {
      if (int8.count(u.node) != 0) {
        int8.insert(node);
        break;
      }
    }
  }
  Placement p;
  for (Node* node : order) {
    if (int8.count(node) == 0) continue;
    if (node->kind() == OpKind::kAdd) {
      p.read(node, 0);
      p.read(node, 1);
    } else if (node->kind() == OpKind::kGlobalAveragePool) {
      p.read(node, 0);
    } else if (node->kind() != OpKind::kAdd && is_int8_passage(*node)) {
      p.read(node, 0);
      p.shares[node->output(0)] = node->input(0);
    } else {
      p.sites.push_back(Site{node, *weight_axis(*node)});
      p.read(node, 0);
    }
  }
  return p;
}

Result<std::unordered_set<OpKind>> int8_ops(const std::vector<std::string>& names) {
  std::unordered_set<OpKind> kinds;
  if (names.empty())
    return std::unordered_set<OpKind>{OpKind::kConv, OpKind::kMatMul, OpKind::kGemm};
  KILN_ASSIGN_OR_RETURN(std::vector<OpKind> resolved, resolve_quantize_ops(names));
  for (OpKind kind : resolved) {
    if (kind != OpKind::kConv && kind != OpKind::kMatMul && kind != OpKind::kGemm) {
      if (std::find(names.begin(), names.end(), "all") != names.end()) continue;
      return invalid_argument_error(fmt::format(
          "quantize_int8: op \"{}\" has no int8 form; choose among Conv, MatMul and Gemm "
          "(\"convolution\", \"dot\")",
          op_kind_name(kind)));
    }
    kinds.insert(kind);
  }
  return kinds;
}

// Symmetric per-channel int8 weights: q = round(w / s_c) in [-127, 127], s_c = max|w_c| / 127.
struct QuantizedWeight {
  Tensor values;       // i8, the weight's shape
  Tensor scales;       // f32 [channels]
  Tensor zero_points;  // i8 [channels], zeros
};

QuantizedWeight quantize_weight(const Tensor& w, int64_t axis) {
  const int64_t channels = w.shape()[static_cast<int>(axis)];
  const int64_t inner = w.shape().numel(static_cast<int>(axis) + 1, w.rank());
  const float* src = w.data<float>();
  std::vector<float> scales(static_cast<size_t>(channels), 0.0f);
  for (int64_t i = 0; i < w.numel(); ++i) {
    float& s = scales[static_cast<size_t>((i / inner) % channels)];
    s = std::max(s, std::abs(src[i]));
  }
  for (float& s : scales) s = s > 0 ? s / 127.0f : 1.0f;
  QuantizedWeight q{Tensor(DType::kI8, w.shape()),
                    Tensor::from_vector(std::span<const float>(scales), Shape({channels})),
                    Tensor(DType::kI8, Shape({channels}))};
  int8_t* dst = q.values.data<int8_t>();
  for (int64_t i = 0; i < w.numel(); ++i) {
    const float s = scales[static_cast<size_t>((i / inner) % channels)];
    dst[i] = static_cast<int8_t>(std::clamp(std::nearbyint(src[i] / s), -127.0f, 127.0f));
  }
  std::fill_n(q.zero_points.data<int8_t>(), channels, int8_t{0});
  return q;
}

// Inserts QuantizeLinear -> DequantizeLinear of `x` before `before` and returns the DQ output.
Result<Value*> add_qdq(Graph& graph, Value* x, const ActivationScale& a, Node* before) {
  Value* scale = graph.add_constant(Tensor::scalar<float>(a.scale),
                                    graph.unique_name(x->name() + "_scale"), before);
  Tensor zp = a.is_unsigned ? Tensor::scalar<uint8_t>(0) : Tensor::scalar<int8_t>(0);
  Value* zero =
      graph.add_constant(std::move(zp), graph.unique_name(x->name() + "_zero_point"), before);
  Node* q = graph.add_node(Op(ops::QuantizeLinear{}), {x, scale, zero}, 1,
                           x->name() + "_QuantizeLinear", before);
  KILN_RETURN_IF_ERROR(infer_node(*q));
  Node* dq = graph.add_node(Op(ops::DequantizeLinear{}), {q->output(0), scale, zero}, 1,
                            x->name() + "_DequantizeLinear", before);
  KILN_RETURN_IF_ERROR(infer_node(*dq));
  return dq->output(0);
}

Result<Value*> add_weight_dq(Graph& graph, Value* w, int64_t axis, Node* before) {
  QuantizedWeight q = quantize_weight(*w->constant_value(), axis);
  Value* values =
      graph.add_constant(std::move(q.values), graph.unique_name(w->name() + "_quantized"), before);
  Value* scales =
      graph.add_constant(std::move(q.scales), graph.unique_name(w->name() + "_scale"), before);
  Value* zero = graph.add_constant(std::move(q.zero_points),
                                   graph.unique_name(w->name() + "_zero_point"), before);
  ops::DequantizeLinear op;
  op.axis = axis;
  Node* dq =
      graph.add_node(Op(op), {values, scales, zero}, 1, w->name() + "_DequantizeLinear", before);
  KILN_RETURN_IF_ERROR(infer_node(*dq));
  return dq->output(0);
}

// Arranges one batch in graph input order, checking names and dtypes.
Result<std::vector<Argument>> batch_arguments(const Graph& graph, const CalibrationBatch& batch,
                                              int64_t index) {
  std::vector<Argument> args;
  for (const Value* in : graph.inputs()) {
    auto found = batch.find(in->name());
    if (found == batch.end()) {
      std::string given;
      for (const auto& [name, t] : batch) given += (given.empty() ? "" : ", ") + name;
      return invalid_argument_error(fmt::format(
          "calibration batch {}: no tensor for input \"{}\" (the batch has: {}); give one array "
          "per model input, by name",
          index, in->name(), given.empty() ? "nothing" : given));
    }
    args.emplace_back(found->second);
  }
  return args;
}

}  // namespace

Result<CalibrationMethod> parse_calibration_method(std::string_view name) {
  if (name == "max") return CalibrationMethod::kMax;
  if (name == "percentile") return CalibrationMethod::kPercentile;
  if (name == "entropy") return CalibrationMethod::kEntropy;
  return invalid_argument_error(
      fmt::format("unknown calibration method \"{}\"; use max, percentile or entropy", name));
}

std::string_view calibration_method_name(CalibrationMethod method) {
  switch (method) {
    case CalibrationMethod::kMax: return "max";
    case CalibrationMethod::kPercentile: return "percentile";
    case CalibrationMethod::kEntropy: return "entropy";
  }
  return "max";
}

Result<Int8Report> quantize_int8(Graph& graph, const Target& target, int64_t count,
                                 const CalibrationReader& read, const Int8Options& options) {
  KILN_ASSIGN_OR_RETURN(std::unordered_set<OpKind> kinds, int8_ops(options.ops));
  if (options.method == CalibrationMethod::kPercentile &&
      !(options.percentile > 0 && options.percentile <= 100)) {
    return invalid_argument_error(
        fmt::format("quantize_int8: percentile {} is outside (0, 100]", options.percentile));
  }
  KILN_RETURN_IF_ERROR(PassManager(standard_passes()).run(graph));

  Placement placement = place(graph, kinds, options.exclude);
  Int8Report report;
  report.batches = count;
  if (placement.sites.empty()) return report;

  // Calibration: a copy of the graph that also returns every value to observe (the placed ones
  // that options.observed does not hold; those taking another's scale too, below).
  std::vector<Value*> activations;
  std::vector<RangeObserver> observers;
  std::vector<Value*> known;
  for (Value* v : placement.values) {
    const ObservedRanges* before = options.observed.get();
    auto found =
        before ? before->values.find(v->name()) : decltype(before->values)::const_iterator();
    if (before && found != before->values.end()) {
      known.push_back(v);
      observers.push_back(found->second);
    } else {
      activations.push_back(v);
    }
  }
  for (const Site& site : placement.sites) report.quantized_names.push_back(site.node->name());
  if (!activations.empty() && count <= 0) {
    return failed_precondition_error(
        "quantize_int8: no calibration data; give at least one batch of representative inputs");
  }
  if (activations.empty()) report.batches = 0;
  std::unordered_map<const Value*, Value*> copies;
  std::shared_ptr<Graph> probe = clone_graph(graph, &copies);
  std::vector<int> input_index(activations.size(), -1);
  std::vector<int64_t> output_index(activations.size(), -1);
  for (size_t a = 0; a < activations.size(); ++a) {
    const auto& inputs = graph.inputs();
    auto is_input = std::find(inputs.begin(), inputs.end(), activations[a]);
    if (is_input != inputs.end()) {
      input_index[a] = static_cast<int>(is_input - inputs.begin());
    } else {
      output_index[a] = static_cast<int64_t>(probe->outputs().size());
      probe->add_output(copies.at(activations[a]));
    }
  }
  std::shared_ptr<Executable> exe;
  if (!activations.empty()) {
    KILN_ASSIGN_OR_RETURN(exe, compile(std::move(probe), target, options.compile));
  }
  observers.insert(observers.begin(), activations.size(), RangeObserver(options.bins));
  for (int64_t b = 0; b < count && !activations.empty(); ++b) {
    KILN_ASSIGN_OR_RETURN(CalibrationBatch batch, read(b));
    KILN_ASSIGN_OR_RETURN(std::vector<Argument> args, batch_arguments(graph, batch, b));
    for (size_t a = 0; a < activations.size(); ++a) {
      if (input_index[a] >= 0) {
        observers[a].observe(args[static_cast<size_t>(input_index[a])].tensor());
      }
    }
    auto failed = [b](const Status& s) {
      return Status(s.code(), fmt::format("calibration batch {}: {}", b, s.message()));
    };
    if (options.method == CalibrationMethod::kMax) {
      // Only the ranges: the target reduces each value where it ran (the GPU keeps the
      // activations, gigabytes at batch 256, and returns two numbers each).
      Result<std::vector<OutputRange>> ranges = exe->run_ranges(std::move(args));
      if (!ranges.ok()) return failed(ranges.status());
      for (size_t a = 0; a < activations.size(); ++a) {
        if (output_index[a] < 0) continue;
        const OutputRange& r = (*ranges)[static_cast<size_t>(output_index[a])];
        observers[a].observe_range(r.min, r.max, r.count);
      }
    } else {
      Result<std::vector<Argument>> results = exe->run(std::move(args));
      if (!results.ok()) return failed(results.status());
      for (size_t a = 0; a < activations.size(); ++a) {
        if (output_index[a] >= 0) {
          observers[a].observe((*results)[static_cast<size_t>(output_index[a])].tensor());
        }
      }
    }
    if (options.progress) options.progress(b + 1, count);
  }

  // The scales: observed (now or before), or the scale of the value shared.
  activations.insert(activations.end(), known.begin(), known.end());
  auto observed = std::make_shared<ObservedRanges>();
  for (size_t a = 0; a < activations.size(); ++a) {
    observed->values.emplace(activations[a]->name(), observers[a]);
  }
  report.observed = std::move(observed);
  // A value and those taking its scale (a MaxPool's output, a Flatten of it) form a group with
  // one scale. Its threshold is the largest its members' observations choose: a pool's output is
  // its input's tail, so a clip chosen on the input alone (entropy, percentile) would cut what the
  // next layer reads; with the max method the input's range holds every member's.
  const bool symmetric = options.symmetric_activations.value_or(target.name() == "cuda");
  std::unordered_map<const Value*, const RangeObserver*> observer_of;
  for (size_t a = 0; a < activations.size(); ++a) observer_of[activations[a]] = &observers[a];
  auto source_of = [&](const Value* v) {
    while (placement.shares.count(v) != 0) v = placement.shares.at(v);
    return v;
  };
  std::unordered_map<const Value*, ActivationScale> scales;
  for (Value* v : placement.values) {
    if (placement.shares.count(v) != 0) continue;
    const RangeObserver& o = *observer_of.at(v);
    ActivationScale s;
    s.min = o.min();
    s.max = o.max();
    s.is_unsigned = !symmetric && o.min() >= 0;
    scales.emplace(v, s);
  }
  for (Value* v : placement.values) {
    ActivationScale& s = scales.at(source_of(v));
    s.threshold =
        std::max(s.threshold, observer_of.at(v)->threshold(options.method, options.percentile,
                                                           s.is_unsigned ? 256 : 128));
  }
  for (auto& [v, s] : scales) {
    s.scale =
        s.threshold > 0 ? static_cast<float>(s.threshold / (s.is_unsigned ? 255.0 : 127.0)) : 1.0f;
  }
  for (Value* v : placement.values) {
    ActivationScale s = scales.at(source_of(v));
    s.value = v->name();
    report.activations.push_back(s);
  }
  for (Value* v : placement.values) {
    if (placement.shares.count(v) != 0) scales.emplace(v, scales.at(source_of(v)));
  }

  // Rewrite into QDQ form: one pair per value, before its first int8 reader, which every int8
  // reader then reads (every reader of this graph, with dequantize_every_reader: the pair then
  // goes before the first of them).
  const bool every_reader = options.dequantize_every_reader.value_or(target.name() == "cuda");
  std::unordered_map<const Node*, size_t> position;
  for (const auto& owned : graph.nodes()) position.emplace(owned.get(), position.size());
  std::unordered_set<const Node*> int8_nodes;
  for (Value* v : placement.values) {
    const std::vector<Reader>& int8_readers = placement.readers.at(v);
    std::vector<Reader> readers = int8_readers;
    Node* before = int8_readers.front().node;
    if (every_reader) {
      for (const Use& u : std::vector<Use>(v->uses())) {
        if (u.node->graph() != &graph || position.count(u.node) == 0) continue;
        const Reader r{u.node, u.index};
        auto same = [&](const Reader& o) { return o.node == r.node && o.input == r.input; };
        if (std::find_if(readers.begin(), readers.end(), same) != readers.end()) continue;
        readers.push_back(r);
        if (position.at(u.node) < position.at(before)) before = u.node;
      }
    }
    KILN_ASSIGN_OR_RETURN(Value * dq, add_qdq(graph, v, scales.at(v), before));
    for (const Reader& r : readers) r.node->set_input(r.input, dq);
    for (const Reader& r : int8_readers) int8_nodes.insert(r.node);
  }
  std::unordered_map<const Value*, Value*> weights;
  for (const Site& site : placement.sites) {
    Node* node = site.node;
    Value* w = node->input(1);
    auto wfound = weights.find(w);
    if (wfound == weights.end()) {
      KILN_ASSIGN_OR_RETURN(Value * dq, add_weight_dq(graph, w, site.axis, node));
      wfound = weights.emplace(w, dq).first;
    }
    node->set_input(1, wfound->second);
  }
  report.quantized_nodes = static_cast<int>(int8_nodes.size());
  KILN_ASSIGN_OR_RETURN(bool removed, make_dead_code_elimination()->run(graph));
  (void)removed;
  return report;
}

Result<Int8Report> quantize_int8(Graph& graph, const Target& target,
                                 const std::vector<CalibrationBatch>& calibration,
                                 const Int8Options& options) {
  std::vector<CalibrationBatch> batches;
  if (!calibration.empty() || !options.observed) {
    KILN_ASSIGN_OR_RETURN(batches, rebatch_calibration(graph, calibration));
  }
  return quantize_int8(
      graph, target, static_cast<int64_t>(batches.size()),
      [&](int64_t i) -> Result<CalibrationBatch> { return batches[static_cast<size_t>(i)]; },
      options);
}

}  // namespace kiln::compiler
