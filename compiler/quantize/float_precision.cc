// SPDX-License-Identifier: Apache-2.0
// fp16/bf16 conversion: selected nodes compute in the narrow type, Casts only at region edges.
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <unordered_map>
#include <unordered_set>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/passes.h"
#include "compiler/quantize/quantize.h"

namespace kiln::compiler {

namespace {

// clang-format off
constexpr OpKind kDefaultOps[] = {
    // compute
    OpKind::kConv, OpKind::kConvTranspose, OpKind::kMatMul, OpKind::kGemm,
    OpKind::kMaxPool, OpKind::kAveragePool, OpKind::kGlobalAveragePool, OpKind::kGlobalMaxPool,
    // activations and element-wise arithmetic
    OpKind::kRelu, OpKind::kLeakyRelu, OpKind::kClip, OpKind::kSigmoid, OpKind::kTanh,
    OpKind::kHardSigmoid, OpKind::kHardSwish, OpKind::kPRelu, OpKind::kAdd, OpKind::kSub,
    OpKind::kMul, OpKind::kDiv, OpKind::kMax, OpKind::kMin, OpKind::kSum, OpKind::kNeg,
    OpKind::kAbs, OpKind::kWhere,
    // data movement
    OpKind::kConcat, OpKind::kReshape, OpKind::kFlatten, OpKind::kSqueeze, OpKind::kUnsqueeze,
    OpKind::kTranspose, OpKind::kSlice, OpKind::kSplit, OpKind::kGather, OpKind::kExpand,
    OpKind::kTile, OpKind::kIdentity, OpKind::kDepthToSpace, OpKind::kSpaceToDepth,
    OpKind::kPad,
};
// clang-format on

// Ops whose dtype is fixed by an attribute or that carry no arithmetic to narrow: random ops,
// quantization (integer) ops, constants, casts, shapes and control flow.
bool never_converted(OpKind kind) {
  const std::string_view family = op_kind_family(kind);
  if (family == "random" || family == "quantize" || family == "control") return true;
  switch (kind) {
    case OpKind::kConstant:
    case OpKind::kConstantOfShape:
    case OpKind::kCast:
    case OpKind::kCastLike:
    case OpKind::kShape:
    case OpKind::kSize:
    case OpKind::kEyeLike:
    case OpKind::kRange: return true;
    default: return false;
  }
}

// Whether input `index` of an op of `kind` holds data (converted) rather than a parameter that
// ONNX requires in float32 whatever the data type (Resize's roi and scales).
bool converts_input(OpKind kind, int index) {
  switch (kind) {
    case OpKind::kResize:
    case OpKind::kUpsample: return index == 0;
    default: return true;
  }
}

bool is_f32_tensor(const Value* v) {
  return v != nullptr && v->type().is_tensor() && v->tensor_type().dtype == DType::kF32;
}

Tensor convert_constant(const Tensor& t, DType dtype) {
  Tensor out(dtype, t.shape());
  const float* src = t.data<float>();
  visit_dtype(dtype, [&]<class T>() {
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      T* dst = out.data<T>();
      for (int64_t i = 0; i < t.numel(); ++i) dst[i] = T(src[i]);
    }
  });
  return out;
}

class FloatPrecisionConversion final : public Pass {
 public:
  FloatPrecisionConversion(DType dtype, std::vector<OpKind> ops)
      : dtype_(dtype), ops_(ops.begin(), ops.end()) {
    if (ops_.empty()) ops_.insert(std::begin(kDefaultOps), std::end(kDefaultOps));
  }
  std::string_view name() const override {
    return dtype_ == DType::kBF16 ? "bf16_conversion" : "fp16_conversion";
  }

  Result<bool> run(Graph& graph) override {
    std::unordered_set<const Node*> selected;
    for (const auto& node : graph.nodes()) {
      if (selects(*node)) selected.insert(node.get());
    }
    if (selected.empty()) return false;
    // narrow[v]: the narrow-typed value that replaces f32 value `v` as input of selected nodes.
    std::unordered_map<const Value*, Value*> narrow;
    auto& nodes = graph.nodes();
    for (auto it = nodes.begin(); it != nodes.end(); ++it) {
      Node* node = it->get();
      if (selected.count(node) == 0) continue;
      for (int i = 0; i < node->num_inputs(); ++i) {
        Value* in = node->input(i);
        if (!is_f32_tensor(in) || !converts_input(node->kind(), i)) continue;
        if (in->producer() != nullptr && selected.count(in->producer()) != 0) continue;
        auto found = narrow.find(in);
        if (found == narrow.end()) found = narrow.emplace(in, narrowed(graph, in, node)).first;
        node->set_input(i, found->second);
      }
      Node* next = std::next(it) == nodes.end() ? nullptr : std::next(it)->get();
      for (Value* out : node->outputs()) {
        if (!is_f32_tensor(out)) continue;
        TensorType type = out->tensor_type();
        type.dtype = dtype_;
        out->set_type(type);
        widen_outside_uses(graph, out, selected, next);
      }
    }
    return true;
  }

 private:
  bool selects(const Node& node) const {
    if (ops_.count(node.kind()) == 0 || never_converted(node.kind())) return false;
    if (!node.op().subgraphs().empty()) return false;
    bool any = false;
    for (int i = 0; i < node.num_inputs(); ++i) {
      const Value* in = node.input(i);
      if (in == nullptr) continue;
      if (!in->type().is_tensor()) return false;
      any |= is_f32_tensor(in) && converts_input(node.kind(), i);
    }
    for (const Value* out : node.outputs()) {
      if (!out->type().is_tensor()) return false;
    }
    return any;
  }

  // `v` in the narrow type, for use by `user`: a converted constant, or a Cast before `user`.
  Value* narrowed(Graph& graph, Value* v, Node* user) {
    const std::string name = fmt::format("{}_{}", v->name(), dtype_name(dtype_));
    if (const Tensor* t = v->constant_value()) {
      return graph.add_constant(convert_constant(*t, dtype_), graph.unique_name(name), user);
    }
    ops::Cast cast;
    cast.to = dtype_;
    Node* node = graph.add_node(Op(cast), {v}, 1, name, user);
    TensorType type = v->tensor_type();
    type.dtype = dtype_;
    node->output(0)->set_type(type);
    return node->output(0);
  }

  // Uses of narrow `out` by nodes outside the region, and graph outputs, get it cast back to
  // f32 (one Cast, placed before `next`); a graph output keeps its name.
  void widen_outside_uses(Graph& graph, Value* out, const std::unordered_set<const Node*>& selected,
                          Node* next) {
    std::vector<Use> outside;
    for (const Use& use : out->uses()) {
      if (selected.count(use.node) == 0) outside.push_back(use);
    }
    const bool returned =
        std::find(graph.outputs().begin(), graph.outputs().end(), out) != graph.outputs().end();
    if (outside.empty() && !returned) return;
    ops::Cast cast;
    cast.to = DType::kF32;
    const std::string original = out->name();
    Node* node = graph.add_node(Op(cast), {out}, 1, original + "_f32", next);
    TensorType type = out->tensor_type();
    type.dtype = DType::kF32;
    Value* wide = node->output(0);
    wide->set_type(type);
    for (const Use& use : outside) use.node->set_input(use.index, wide);
    if (returned) {
      out->set_name(graph.unique_name(fmt::format("{}_{}", original, dtype_name(dtype_))));
      wide->set_name(original);
      for (size_t i = 0; i < graph.outputs().size(); ++i) {
        if (graph.outputs()[i] == out) graph.set_output(static_cast<int>(i), wide);
      }
    }
  }

  DType dtype_;
  std::unordered_set<OpKind> ops_;
};

Status quantize_float(Graph& graph, DType dtype, const std::vector<std::string>& names) {
  KILN_ASSIGN_OR_RETURN(std::vector<OpKind> ops, resolve_quantize_ops(names));
  PassManager manager(standard_passes());
  manager.add(make_float_precision_conversion(dtype, std::move(ops)));
  manager.add(make_dead_code_elimination());
  return manager.run(graph);
}

}  // namespace

std::vector<OpKind> default_float_quantize_ops() {
  return std::vector<OpKind>(std::begin(kDefaultOps), std::end(kDefaultOps));
}

Result<std::vector<OpKind>> resolve_quantize_ops(const std::vector<std::string>& names) {
  std::vector<OpKind> kinds;
  for (const std::string& name : names) {
    if (name == "all") {
      for (OpKind k : kDefaultOps) kinds.push_back(k);
      continue;
    }
    if (name == "convolution") {
      kinds.push_back(OpKind::kConv);
      continue;
    }
    if (name == "dot") {
      kinds.push_back(OpKind::kMatMul);
      kinds.push_back(OpKind::kGemm);
      continue;
    }
    std::optional<OpKind> kind = parse_op_kind(name);
    if (!kind) {
      return invalid_argument_error(fmt::format(
          "quantize: unknown op \"{}\"; give ONNX op names (Conv, MatMul, Gemm, Relu, ...), "
          "\"convolution\"/\"dot\", or \"all\" (kiln ops lists them)",
          name));
    }
    if (never_converted(*kind)) {
      return invalid_argument_error(fmt::format(
          "quantize: op \"{}\" has no arithmetic precision to change; leave it out of the list",
          name));
    }
    kinds.push_back(*kind);
  }
  return kinds;
}

std::unique_ptr<Pass> make_float_precision_conversion(DType dtype, std::vector<OpKind> ops) {
  KILN_CHECK(dtype == DType::kF16 || dtype == DType::kBF16,
             "make_float_precision_conversion: dtype must be f16 or bf16");
  return std::make_unique<FloatPrecisionConversion>(dtype, std::move(ops));
}

Status quantize_fp16(Graph& graph, const std::vector<std::string>& ops) {
  return quantize_float(graph, DType::kF16, ops);
}

Status quantize_bf16(Graph& graph, const std::vector<std::string>& ops) {
  return quantize_float(graph, DType::kBF16, ops);
}

}  // namespace kiln::compiler
