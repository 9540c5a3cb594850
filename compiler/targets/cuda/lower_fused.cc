// SPDX-License-Identifier: Apache-2.0
// Lowering to kernels generated at compile time and compiled through NVRTC (KILN_CUDA_NVRTC=0
// turns them off): elementwise chains, chains read by a row op (LayerNorm, Softmax, LogSoftmax,
// trailing-axis reductions) or a Transpose, and row ops or Transposes with a chain after them.
#include <fmt/format.h>

#include <algorithm>

#include "compiler/ops/all_ops.h"
#include "compiler/targets/cuda/builder.h"
#include "compiler/targets/cuda/fused_elementwise.h"
#include "compiler/targets/cuda/fused_rows.h"
#include "compiler/targets/cuda/lower_util.h"
#include "compiler/targets/cuda/lowering.h"
#include "core/env.h"
#include "core/logging.h"

namespace kiln::compiler::cuda {

namespace {

std::vector<int64_t> plain_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size());
  int64_t stride = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= dims[d];
  }
  return strides;
}

// `v` read at each element of a result of shape `out` (right-aligned broadcast); contiguous when
// it is `out`'s shape.
TensorAccess broadcast_access(const Shape& in, const Shape& out) {
  if (in == out) return {};
  TensorAccess a;
  a.dims.assign(out.dims().begin(), out.dims().end());
  a.strides.resize(a.dims.size());
  broadcast_strides(in, out, a.strides.data());
  return a;
}

// The access read at the elements of `dims` transposed by `perm` (result dim d is dim perm[d]).
TensorAccess permuted(const TensorAccess& a, const std::vector<int64_t>& dims,
                      const std::vector<int64_t>& perm) {
  const std::vector<int64_t> strides = a.contiguous() ? plain_strides(dims) : a.strides;
  TensorAccess p;
  for (int64_t d : perm) {
    p.dims.push_back(dims[static_cast<size_t>(d)]);
    p.strides.push_back(strides[static_cast<size_t>(d)]);
  }
  if (p.strides == plain_strides(p.dims)) return {};
  return p;
}

// A chain being gathered: its ops, the outside tensors it reads (its inputs), how it reads them,
// and their layout.
struct ChainBuild {
  ElementwiseChain chain;
  Shape shape;
  std::vector<const Value*> inputs;
  std::optional<bool> nhwc;
};

// `v` as an operand of a chain op, `running` being the chain's last value (nullptr before the
// first op): that value, a scalar constant, or an outside tensor computed already, of the chain's
// type, of its shape and layout or (plain) broadcast to its shape (else std::nullopt).
std::optional<ChainOperand> chain_operand(const Builder& b, ChainBuild& cb, const Value* v,
                                          const Value* running) {
  if (v == running) return ChainOperand::value(static_cast<int>(cb.chain.ops.size()) - 1);
  if (auto k = constant_floats(v); k && k->size() == 1) return ChainOperand::constant((*k)[0]);
  if (elem_of(v) != cb.chain.elem || !b.has_buffer(v)) return std::nullopt;
  const Shape s = shape_of(v);
  const bool nhwc = b.is_nhwc(v);
  if (s != cb.shape) {
    // Broadcast: read plain, through strides.
    if (s.rank() > cb.shape.rank() || nhwc || cb.nhwc.value_or(false)) return std::nullopt;
    for (int d = 1; d <= s.rank(); ++d) {
      const int64_t n = s[s.rank() - d];
      if (n != 1 && n != cb.shape[cb.shape.rank() - d]) return std::nullopt;
    }
  } else if (cb.nhwc && *cb.nhwc != nhwc) {
    return std::nullopt;
  }
  cb.nhwc = nhwc;
  auto at = std::find(cb.inputs.begin(), cb.inputs.end(), v);
  if (at == cb.inputs.end()) {
    cb.inputs.push_back(v);
    cb.chain.access.resize(cb.inputs.size() - 1);
    cb.chain.access.push_back(broadcast_access(s, cb.shape));
    at = cb.inputs.end() - 1;
  }
  cb.chain.inputs = static_cast<int>(cb.inputs.size());
  return ChainOperand::input(static_cast<int>(at - cb.inputs.begin()));
}

// Appends `node` (a Unary or Binary op reading the chain's value `running`) to the chain; false,
// the chain unchanged, when it does not fit.
bool append_chain_op(const Builder& b, ChainBuild& cb, const Node& node, const Value* running) {
  if (b.is_fused(&node) || node.num_outputs() != 1 || shape_of(node.output(0)) != cb.shape ||
      elem_of(node.output(0)) != cb.chain.elem) {
    return false;
  }
  ChainBuild next = cb;
  if (const auto op = binary_of(node.kind())) {
    if (node.num_inputs() != 2) return false;
    const auto x = chain_operand(b, next, node.input(0), running);
    const auto y = x ? chain_operand(b, next, node.input(1), running) : std::nullopt;
    if (!y) return false;
    next.chain.ops.push_back(ChainOp::of(*op, *x, *y));
  } else {
    const auto u = unary_of(node);
    const auto x = u ? chain_operand(b, next, node.input(0), running) : std::nullopt;
    if (!x) return false;
    next.chain.ops.push_back(ChainOp::of(u->first, *x, u->second.first, u->second.second));
  }
  cb = std::move(next);
  return true;
}

// The chain's nodes after `running`, each the only reader of the one before, appended to `cb`.
std::vector<const Node*> extend_chain(const Builder& b, ChainBuild& cb, const Value* running) {
  std::vector<const Node*> nodes;
  while (const Node* next = b.only_consumer(running)) {
    if (!append_chain_op(b, cb, *next, running)) break;
    nodes.push_back(next);
    running = next->output(0);
  }
  return nodes;
}

// A chain over `shape` whose input 0 is `v` (not read through chain_operand: a row op's result or
// a transposed tensor), its one op the identity.
ChainBuild seeded_chain(Elem e, const Shape& shape, const Value* v, TensorAccess access = {}) {
  ChainBuild cb;
  cb.chain.elem = e;
  cb.chain.inputs = 1;
  cb.chain.ops = {ChainOp::of(Unary::kIdentity, ChainOperand::input(0))};
  cb.chain.access = {std::move(access)};
  cb.shape = shape;
  cb.inputs = {v};
  cb.nhwc = false;
  return cb;
}

// "Add+Mul+..": the op names of `nodes`.
std::string names_of(const std::vector<const Node*>& nodes) {
  std::string s;
  for (const Node* n : nodes) s += (s.empty() ? "" : "+") + std::string(n->op().name());
  return s;
}

void add_step(Builder& b, const Node& node, std::string kind, std::vector<int> in,
              std::vector<int> out, FunctionStep::Fn fn) {
  b.add_step(std::make_unique<FunctionStep>(node, std::move(kind), std::move(in), std::move(out),
                                            std::move(fn)));
}

std::vector<const void*> pointers_of(const Session& s, const std::vector<int>& buffers) {
  std::vector<const void*> p;
  for (int i : buffers) p.push_back(i < 0 ? nullptr : s.device[static_cast<size_t>(i)]);
  return p;
}

// Marks every node of `nodes` but the one being lowered fused.
void mark_fused(Builder& b, const std::vector<const Node*>& nodes) {
  for (const Node* n : nodes) {
    if (n != &b.current()) b.mark_fused(n);
  }
}

// The elementwise chain of `cb` (inputs plain or all NHWC) writing `out`, as one step named `kind`.
bool add_chain_step(Builder& b, const ChainBuild& cb, const std::vector<const Node*>& nodes,
                    const Value* out, std::string kind) {
  auto created = FusedElementwiseKernel::create(cb.chain);
  if (!created.ok()) {
    log(LogLevel::kWarning, "target cuda: {} ({} ops from \"{}\") runs unfused: {}", kind,
        nodes.size(), nodes.front()->name(), created.status().message());
    return false;
  }
  const std::shared_ptr<const FusedElementwiseKernel> kernel = std::move(*created);
  const bool nhwc = cb.nhwc.value_or(false);
  std::vector<int> in;
  for (const Value* v : cb.inputs) in.push_back(nhwc ? b.stored_buffer(v) : b.buffer_of(v));
  mark_fused(b, nodes);
  const int y = b.define(out, nhwc);
  const int64_t n = shape_of(out).numel();
  add_step(b, b.current(), std::move(kind), in, {y}, [=](Session& s) {
    return kernel->launch(pointers_of(s, in), s.device[static_cast<size_t>(y)], n, s.stream);
  });
  return true;
}

// ---- row ops ----

// A row op reading `x` (a chain's value, or a Cast's input), how it reads it, and what it writes.
struct RowTarget {
  RowKernelSpec spec;
  std::vector<const Node*> nodes;  // the op, with the Casts around it
  const Value* out = nullptr;      // after the Cast back
  std::vector<float> scale, bias;  // LayerNorm's, in f32
};

// The trailing axis reduced by Reduce `node` (axes as an attribute or a constant input), if so.
bool reduces_last_axis(const Node& node, int rank) {
  std::optional<std::vector<int64_t>> axes;
  switch (node.kind()) {
    case OpKind::kReduceSum: axes = node.attrs<ops::ReduceSum>().axes; break;
    case OpKind::kReduceMean: axes = node.attrs<ops::ReduceMean>().axes; break;
    case OpKind::kReduceMax: axes = node.attrs<ops::ReduceMax>().axes; break;
    default: return false;
  }
  if (!axes && node.has_input(1)) axes = constant_ints(node.input(1));
  if (!axes) return rank == 1 && !node.has_input(1);
  return axes->size() == 1 && ((*axes)[0] == rank - 1 || (*axes)[0] == -1);
}

// Row op `node` reading value `x` as its data input, from `in` (x itself, or the half tensor of a
// Cast to f32 before it) to `out` (its output, or the Cast back's).
std::optional<RowTarget> row_target(const Builder& b, const Node& node, const Value* in,
                                    const Value* out) {
  if (b.is_fused(&node) || node.num_outputs() != 1 || !node.has_input(0)) return std::nullopt;
  const std::optional<Elem> e = elem_of(in);
  // `in` is a chain's value not computed yet (its layout the chain's), or a computed tensor.
  if (!e || elem_of(out) != e || (b.has_buffer(in) && b.is_nhwc(in))) return std::nullopt;
  const Shape x = shape_of(node.input(0));
  if (x.rank() == 0 || x.numel() == 0) return std::nullopt;
  RowTarget t;
  t.spec.elem = *e;
  t.out = out;
  int64_t axis = x.rank() - 1;
  switch (node.kind()) {
    case OpKind::kLayerNormalization: {
      const auto& op = node.attrs<ops::LayerNormalization>();
      axis = op.axis < 0 ? op.axis + x.rank() : op.axis;
      if (axis < 0 || axis >= x.rank()) return std::nullopt;
      t.spec.op = RowOp::kLayerNorm;
      t.spec.epsilon = op.epsilon;
      break;
    }
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax: {
      const bool log = node.kind() == OpKind::kLogSoftmax;
      const int64_t a = log ? node.attrs<ops::LogSoftmax>().axis : node.attrs<ops::Softmax>().axis;
      if ((a < 0 ? a + x.rank() : a) != x.rank() - 1) return std::nullopt;
      t.spec.op = log ? RowOp::kLogSoftmax : RowOp::kSoftmax;
      break;
    }
    case OpKind::kReduceSum:
    case OpKind::kReduceMean:
    case OpKind::kReduceMax:
      if (!reduces_last_axis(node, x.rank())) return std::nullopt;
      t.spec.op = node.kind() == OpKind::kReduceSum    ? RowOp::kReduceSum
                  : node.kind() == OpKind::kReduceMean ? RowOp::kReduceMean
                                                       : RowOp::kReduceMax;
      break;
    default: return std::nullopt;
  }
  t.spec.cols = 1;
  for (int d = static_cast<int>(axis); d < x.rank(); ++d) t.spec.cols *= x[d];
  t.spec.rows = x.numel() / t.spec.cols;
  if (t.spec.cols > kMaxGeneratedRow) return std::nullopt;
  if (t.spec.op == RowOp::kLayerNorm) {
    std::optional<std::vector<float>> scale = constant_floats(node.input(1));
    if (!scale || static_cast<int64_t>(scale->size()) != t.spec.cols) return std::nullopt;
    t.scale = std::move(*scale);
    if (node.has_input(2)) {
      std::optional<std::vector<float>> bias = constant_floats(node.input(2));
      if (!bias || static_cast<int64_t>(bias->size()) != t.spec.cols) return std::nullopt;
      t.bias = std::move(*bias);
      t.spec.has_bias = true;
    }
  }
  return t;
}

// Node `n` reading `x` as its data input, when it is a row op or a Cast from half to f32 between
// `x` and one (and a Cast back), as lower_in_half takes them.
std::optional<RowTarget> row_at(const Builder& b, const Node& n, const Value* x) {
  if (n.num_outputs() != 1 || !n.has_input(0) || n.input(0) != x) return std::nullopt;
  if (n.kind() != OpKind::kCast) {
    auto t = row_target(b, n, x, n.output(0));
    if (t) t->nodes = {&n};
    return t;
  }
  if (b.is_fused(&n) || elem_of(x) == Elem::kF32 || elem_of(n.output(0)) != Elem::kF32) {
    return std::nullopt;
  }
  const Node* op = b.only_consumer(n.output(0));
  if (op == nullptr || op->num_outputs() != 1 || op->input(0) != n.output(0)) return std::nullopt;
  const Node* back = b.only_consumer(op->output(0));
  if (back == nullptr || back->kind() != OpKind::kCast || b.is_fused(back)) return std::nullopt;
  auto t = row_target(b, *op, x, back->output(0));
  if (t) t->nodes = {&n, op, back};
  return t;
}

// The row op reading `x` (as row_at), if any.
std::optional<RowTarget> row_reading(const Builder& b, const Value* x) {
  for (const auto& use : x->uses()) {
    if (auto t = row_at(b, *use.node, x)) return t;
  }
  return std::nullopt;
}

// Row op `t` reading the chain `prologue` (its nodes `pro_nodes`; none: the row op's input as it
// is), with the elementwise chain after it, as one generated kernel. Only when a prologue or an
// epilogue exists, or for a reduction (which has no other device kernel).
bool lower_row(Builder& b, const ChainBuild& prologue, const std::vector<const Node*>& pro_nodes,
               RowTarget t) {
  ChainBuild epi = seeded_chain(t.spec.elem, shape_of(t.out), t.out);
  const std::vector<const Node*> epi_nodes = extend_chain(b, epi, t.out);
  if (pro_nodes.empty() && epi_nodes.empty() && !row_op_reduces(t.spec.op)) return false;
  if (prologue.nhwc.value_or(false)) return false;
  t.spec.prologue = prologue.chain;
  t.spec.epilogue = epi.chain;
  t.spec.epilogue.ops.erase(t.spec.epilogue.ops.begin());  // the identity seed
  if (t.spec.epilogue.ops.empty()) t.spec.epilogue.inputs = 1;
  for (ChainOp& op : t.spec.epilogue.ops) {
    for (ChainOperand* o : {&op.a, &op.b}) {
      if (o->kind == ChainOperand::Kind::kValue) --o->index;
      if (o->kind == ChainOperand::Kind::kValue && o->index < 0) *o = ChainOperand::input(0);
    }
  }
  // The prologue's value is also read elsewhere: the kernel writes it too.
  const Value* mid = nullptr;
  if (!pro_nodes.empty()) {
    mid = pro_nodes.back()->output(0);
    if (b.only_consumer(mid) != nullptr) mid = nullptr;
  }
  t.spec.write_prologue = mid != nullptr;
  // Writing the prologue's value too, the kernel moves four row tensors; measured on an H200 (ViT-B
  // f16's residual Add + LayerNorm, bench/gpu_vs_torch/rows_bench.py) it beats the separate Add and
  // LayerNorm only while launches dominate: at batch 1 (0.3 MB a tensor), not at 64 (19 MB) or
  // 256 (77 MB). Above kFusedRowWriteBytes the ops run unfused.
  constexpr int64_t kFusedRowWriteBytes = int64_t{4} << 20;
  if (mid != nullptr &&
      t.spec.rows * t.spec.cols * (t.spec.elem == Elem::kF32 ? 4 : 2) > kFusedRowWriteBytes) {
    return false;
  }
  std::vector<const Node*> named = pro_nodes;
  for (const Node* n : t.nodes) {
    if (n->kind() != OpKind::kCast) named.push_back(n);
  }
  named.insert(named.end(), epi_nodes.begin(), epi_nodes.end());
  const std::string kind = names_of(named);
  auto created = FusedRowKernel::create(t.spec);
  if (!created.ok()) {
    log(LogLevel::kWarning, "target cuda: {} ({} ops from \"{}\"{}) runs unfused: {}", kind,
        named.size(), named.front()->name(), mid != nullptr ? ", its prologue also written" : "",
        created.status().message());
    return false;
  }
  const std::shared_ptr<const FusedRowKernel> kernel = std::move(*created);
  std::vector<int> reads;
  for (const Value* v : prologue.inputs) reads.push_back(b.buffer_of(v));
  std::vector<int> pointers = reads;
  if (t.spec.op == RowOp::kLayerNorm) {
    const int si = b.constant(std::move(t.scale));
    const int bi = t.spec.has_bias ? b.constant(std::move(t.bias)) : -1;
    reads.push_back(si);
    if (bi >= 0) reads.push_back(bi);
    pointers.insert(pointers.end(), {si, bi});
  }
  std::vector<int> epi_inputs;
  for (size_t i = 1; i < epi.inputs.size(); ++i) epi_inputs.push_back(b.buffer_of(epi.inputs[i]));
  reads.insert(reads.end(), epi_inputs.begin(), epi_inputs.end());
  std::vector<const Node*> all = pro_nodes;
  all.insert(all.end(), t.nodes.begin(), t.nodes.end());
  all.insert(all.end(), epi_nodes.begin(), epi_nodes.end());
  mark_fused(b, all);
  const Value* out = epi_nodes.empty() ? t.out : epi_nodes.back()->output(0);
  std::vector<int> writes = {b.define(out)};
  if (mid != nullptr) writes.push_back(b.define(mid));
  pointers.insert(pointers.end(), writes.begin(), writes.end());
  pointers.insert(pointers.end(), epi_inputs.begin(), epi_inputs.end());
  add_step(b, b.current(), kind, reads, writes,
           [=](Session& s) { return kernel->launch(pointers_of(s, pointers), s.stream); });
  return true;
}

// ---- transposes ----

// Transpose `node`'s permutation, if it is a plain one of at most kMaxRank dims.
std::optional<std::vector<int64_t>> perm_of(const Node& node) {
  const int rank = shape_of(node.input(0)).rank();
  std::vector<int64_t> perm = node.attrs<ops::Transpose>().perm.value_or(std::vector<int64_t>{});
  if (perm.empty()) {
    for (int d = rank - 1; d >= 0; --d) perm.push_back(d);
  }
  if (rank == 0 || rank > kMaxRank || static_cast<int>(perm.size()) != rank) return std::nullopt;
  for (int64_t& d : perm) d = d < 0 ? d + rank : d;
  return perm;
}

// The chain `cb` (its nodes `nodes`) read by a Transpose that alone reads its value: one kernel
// writing the transposed result.
bool lower_chain_transpose(Builder& b, ChainBuild cb, std::vector<const Node*> nodes) {
  const Node* t = b.only_consumer(nodes.back()->output(0));
  if (t == nullptr || t->kind() != OpKind::kTranspose || b.is_fused(t) || cb.nhwc.value_or(false)) {
    return false;
  }
  const std::optional<std::vector<int64_t>> perm = perm_of(*t);
  if (!perm) return false;
  const std::vector<int64_t> dims(cb.shape.dims().begin(), cb.shape.dims().end());
  cb.chain.access.resize(cb.inputs.size());
  for (TensorAccess& a : cb.chain.access) a = permuted(a, dims, *perm);
  cb.shape = shape_of(t->output(0));
  nodes.push_back(t);
  return add_chain_step(b, cb, nodes, t->output(0), names_of(nodes));
}

// Transpose `t` and the elementwise chain after it: one kernel reading the transposed input.
bool lower_transpose_chain(Builder& b, const Node& t) {
  const std::optional<Elem> e = elem_of(t.output(0));
  const std::optional<std::vector<int64_t>> perm = perm_of(t);
  if (!e || !perm || b.is_nhwc(t.input(0))) return false;
  const Shape x = shape_of(t.input(0));
  const std::vector<int64_t> dims(x.dims().begin(), x.dims().end());
  ChainBuild cb = seeded_chain(*e, shape_of(t.output(0)), t.input(0), permuted({}, dims, *perm));
  std::vector<const Node*> nodes = extend_chain(b, cb, t.output(0));
  if (nodes.empty()) return false;
  const Value* out = nodes.back()->output(0);
  nodes.insert(nodes.begin(), &t);
  return add_chain_step(b, cb, nodes, out, names_of(nodes));
}

// ---- elementwise chains ----

// `first` and the elementwise ops after it, each the only reader of the one before: with the row
// op or Transpose reading the chain's value, else (two ops or more) alone, as one step.
bool lower_chain_from(Builder& b, const Node& first) {
  if (first.num_outputs() != 1) return false;
  const std::optional<Elem> e = elem_of(first.output(0));
  if (!e) return false;
  ChainBuild cb;
  cb.chain.elem = *e;
  cb.chain.inputs = 0;
  cb.shape = shape_of(first.output(0));
  if (!append_chain_op(b, cb, first, nullptr) || cb.inputs.empty()) return false;
  std::vector<const Node*> nodes = {&first};
  const std::vector<const Node*> more = extend_chain(b, cb, first.output(0));
  nodes.insert(nodes.end(), more.begin(), more.end());
  if (!cb.nhwc.value_or(false)) {
    if (auto row = row_reading(b, nodes.back()->output(0))) {
      if (lower_row(b, cb, nodes, std::move(*row))) return true;
    }
    if (lower_chain_transpose(b, cb, nodes)) return true;
  }
  if (nodes.size() < 2) return false;
  // A Binary op and the ReLU after it are one kernel already (lower_binary), with broadcasting.
  if (nodes.size() == 2 && binary_of(first.kind()) && nodes[1]->kind() == OpKind::kRelu) {
    return false;
  }
  return add_chain_step(b, cb, nodes, nodes.back()->output(0), "Fused elementwise");
}

}  // namespace

bool lower_fused(Builder& b, const Node& node) {
  if (!env_flag_bool(EnvFlag::kCudaNvrtc) || node.num_outputs() != 1) return false;
  switch (node.kind()) {
    case OpKind::kTranspose: return lower_transpose_chain(b, node);
    case OpKind::kCast:
    case OpKind::kLayerNormalization:
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax:
    case OpKind::kReduceSum:
    case OpKind::kReduceMean:
    case OpKind::kReduceMax: {
      // The row op (or the Cast before it) reading a tensor as it is.
      const Value* x = node.input(0);
      std::optional<RowTarget> t = row_at(b, node, x);
      if (!t) return false;
      ChainBuild none = seeded_chain(t->spec.elem, shape_of(x), x);
      none.chain.ops.clear();
      return lower_row(b, none, {}, std::move(*t));
    }
    default: return lower_chain_from(b, node);
  }
}

}  // namespace kiln::compiler::cuda
