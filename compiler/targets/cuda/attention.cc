// SPDX-License-Identifier: Apache-2.0
// Attention subgraphs as exported (head splits, scalings, MatMul, Softmax, MatMul, head merge) as
// one fused attention step (kernels/attention.cu) reading q, k and v through strides straight from
// the projection's output and writing the heads already merged.
#include "compiler/targets/cuda/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <unordered_set>
#include <vector>

#include "compiler/ops/all_ops.h"
#include "compiler/targets/cuda/builder.h"
#include "compiler/targets/cuda/lower_util.h"
#include "compiler/targets/cuda/lowering.h"
#include "core/env.h"
#include "core/logging.h"

namespace kiln::compiler::cuda {
namespace {

// A tensor as a strided view of a buffer where each dim is a list of (size, stride) factors, major
// first: head splits merge dims that no single stride describes (B and H of [S, B, 3E] into
// [S, B * H, D]) and split them again later.
struct Factor {
  int64_t size;
  int64_t stride;
};
struct FineView {
  std::vector<std::vector<Factor>> dims;
  int64_t offset = 0;
};

FineView contiguous(const Shape& s) {
  FineView f;
  f.dims.resize(static_cast<size_t>(s.rank()));
  int64_t stride = 1;
  for (int d = s.rank() - 1; d >= 0; --d) {
    if (s[d] != 1) f.dims[static_cast<size_t>(d)].push_back({s[d], stride});
    stride *= s[d];
  }
  return f;
}

// Adjacent factors where the outer steps over the whole inner one, as one.
std::vector<Factor> merged(const std::vector<Factor>& fs) {
  std::vector<Factor> out;
  for (const Factor& f : fs) {
    if (!out.empty() && out.back().stride == f.stride * f.size) {
      out.back() = {out.back().size * f.size, f.stride};
    } else {
      out.push_back(f);
    }
  }
  return out;
}

std::optional<FineView> reshape(const FineView& f, const Shape& shape) {
  std::vector<Factor> fs;
  for (const auto& d : f.dims) fs.insert(fs.end(), d.begin(), d.end());
  FineView out;
  out.offset = f.offset;
  out.dims.resize(static_cast<size_t>(shape.rank()));
  size_t i = 0;
  for (int d = 0; d < shape.rank(); ++d) {
    const int64_t want = shape[d];
    if (want <= 0) return std::nullopt;
    int64_t have = 1;
    while (have < want) {
      if (i == fs.size()) return std::nullopt;
      const Factor x = fs[i];
      if (have * x.size <= want) {
        out.dims[static_cast<size_t>(d)].push_back(x);
        have *= x.size;
        ++i;
      } else {
        if (want % have != 0 || x.size % (want / have) != 0) return std::nullopt;
        const int64_t k = want / have;
        out.dims[static_cast<size_t>(d)].push_back({k, x.stride * (x.size / k)});
        fs[i] = {x.size / k, x.stride};
        have = want;
      }
    }
    if (have != want) return std::nullopt;
  }
  if (i != fs.size()) return std::nullopt;
  return out;
}

FineView permute(const FineView& f, const std::vector<int64_t>& perm) {
  FineView out;
  out.offset = f.offset;
  for (int64_t p : perm) out.dims.push_back(f.dims[static_cast<size_t>(p)]);
  return out;
}

// Elements [start, start + size) of dim `axis`: only a dim of one factor (or untouched) narrows.
std::optional<FineView> narrow(FineView f, size_t axis, int64_t start, int64_t size) {
  std::vector<Factor> fs = merged(f.dims[axis]);
  int64_t dim = 1;
  for (const Factor& x : fs) dim *= x.size;
  if (start == 0 && size == dim) return f;
  if (fs.size() != 1 || start < 0 || start + size > dim) return std::nullopt;
  f.offset += start * fs[0].stride;
  f.dims[axis].clear();
  if (size != 1) f.dims[axis].push_back({size, fs[0].stride});
  return f;
}

std::vector<int64_t> transpose_perm(const Node& node) {
  std::vector<int64_t> perm = node.attrs<ops::Transpose>().perm.value_or(std::vector<int64_t>{});
  if (perm.empty()) {
    for (int d = node.input(0)->tensor_type().rank() - 1; d >= 0; --d) perm.push_back(d);
  }
  return perm;
}

bool is_reshape(OpKind kind) {
  return kind == OpKind::kReshape || kind == OpKind::kFlatten || kind == OpKind::kSqueeze ||
         kind == OpKind::kUnsqueeze || kind == OpKind::kIdentity;
}

// The scalar of a constant float operand of `node`, if input `i` is one.
std::optional<float> scalar(const Node& node, int i) {
  std::optional<std::vector<float>> c = constant_floats(node.input(i));
  if (!c || c->size() != 1) return std::nullopt;
  return (*c)[0];
}

// The input a view step of `node` reads (its data input), or nullptr when `node` is no view step:
// reshapes, Transpose, Gather of one constant index, Split, Slice of step 1, and Mul/Div by a
// constant scalar (a scaling the kernel applies to the scores).
const Value* view_input(const Node& node) {
  switch (node.kind()) {
    case OpKind::kReshape:
    case OpKind::kFlatten:
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze:
    case OpKind::kIdentity:
    case OpKind::kTranspose:
    case OpKind::kSplit:
    case OpKind::kSlice: return node.input(0);
    case OpKind::kGather:
      return node.input(1)->constant_value() != nullptr ? node.input(0) : nullptr;
    case OpKind::kMul:
      if (node.num_inputs() != 2) return nullptr;
      if (scalar(node, 1)) return node.input(0);
      if (scalar(node, 0)) return node.input(1);
      return nullptr;
    case OpKind::kDiv: return node.num_inputs() == 2 && scalar(node, 1) ? node.input(0) : nullptr;
    default: return nullptr;
  }
}

// `f` (the view of `node`'s data input) as the view of `out`, one of its outputs; `scale` takes a
// scaling's factor.
std::optional<FineView> apply(const Node& node, const Value* out, FineView f, float& scale) {
  const Shape x = shape_of(view_input(node));
  const Shape y = shape_of(out);
  auto axis_of = [&](int64_t a) { return static_cast<size_t>(a < 0 ? a + x.rank() : a); };
  switch (node.kind()) {
    case OpKind::kTranspose: return permute(f, transpose_perm(node));
    case OpKind::kGather: {
      auto index = constant_ints(node.input(1));
      if (!index || index->size() != 1 || node.input(1)->tensor_type().rank() != 0) {
        return std::nullopt;
      }
      const size_t axis = axis_of(node.attrs<ops::Gather>().axis);
      if (axis >= f.dims.size()) return std::nullopt;
      int64_t i = (*index)[0] < 0 ? (*index)[0] + x[static_cast<int>(axis)] : (*index)[0];
      if (i < 0 || i >= x[static_cast<int>(axis)]) return std::nullopt;
      const std::vector<Factor>& fs = f.dims[axis];
      for (size_t k = fs.size(); k-- > 0;) {
        f.offset += (i % fs[k].size) * fs[k].stride;
        i /= fs[k].size;
      }
      f.dims.erase(f.dims.begin() + static_cast<std::ptrdiff_t>(axis));
      return f;
    }
    case OpKind::kSplit: {
      const size_t axis = axis_of(node.attrs<ops::Split>().axis);
      if (axis >= f.dims.size()) return std::nullopt;
      int64_t start = 0;
      for (const Value* o : node.outputs()) {
        if (o == out) break;
        start += shape_of(o)[static_cast<int>(axis)];
      }
      return narrow(std::move(f), axis, start, y[static_cast<int>(axis)]);
    }
    case OpKind::kSlice: {
      auto starts = constant_ints(node.input(1));
      if (!starts || x.rank() != y.rank()) return std::nullopt;
      std::vector<int64_t> axes;
      if (node.has_input(3)) {
        auto a = constant_ints(node.input(3));
        if (!a) return std::nullopt;
        axes = *a;
      } else {
        for (size_t i = 0; i < starts->size(); ++i) axes.push_back(static_cast<int64_t>(i));
      }
      if (node.has_input(4)) {
        auto steps = constant_ints(node.input(4));
        if (!steps || std::any_of(steps->begin(), steps->end(), [](int64_t s) { return s != 1; })) {
          return std::nullopt;
        }
      }
      if (axes.size() != starts->size()) return std::nullopt;
      for (size_t i = 0; i < axes.size(); ++i) {
        const size_t axis = axis_of(axes[i]);
        if (axis >= f.dims.size()) return std::nullopt;
        const int64_t dim = x[static_cast<int>(axis)];
        const int64_t start =
            std::clamp<int64_t>((*starts)[i] < 0 ? (*starts)[i] + dim : (*starts)[i], 0, dim);
        auto n = narrow(std::move(f), axis, start, y[static_cast<int>(axis)]);
        if (!n) return std::nullopt;
        f = std::move(*n);
      }
      return f;
    }
    case OpKind::kMul: scale *= scalar(node, 1) ? *scalar(node, 1) : *scalar(node, 0); return f;
    case OpKind::kDiv: scale /= *scalar(node, 1); return f;
    default: return is_reshape(node.kind()) ? reshape(f, y) : std::nullopt;
  }
}

// The value `v`'s view steps start from.
const Value* source_of(const Value* v) {
  while (v->producer() != nullptr && view_input(*v->producer()) != nullptr) {
    v = view_input(*v->producer());
  }
  return v;
}

// `v` as a view of its source (source_of), which is `start` (a view of its buffer); the steps'
// nodes are added to `nodes` and their scalings to `scale`.
std::optional<FineView> view_of(const Value* v, const FineView& start,
                                std::vector<const Node*>& nodes, float& scale) {
  std::vector<const Value*> chain;  // v, then each step's input, back to the source
  while (v->producer() != nullptr && view_input(*v->producer()) != nullptr) {
    chain.push_back(v);
    v = view_input(*v->producer());
  }
  FineView f = start;
  for (size_t i = chain.size(); i-- > 0;) {
    const Node& node = *chain[i]->producer();
    auto next = apply(node, chain[i], std::move(f), scale);
    if (!next) return std::nullopt;
    f = std::move(*next);
    nodes.push_back(&node);
  }
  return f;
}

// The Transpose before `v` when `v` is a row-wise projection of it: MatMul by a 2-D matrix (plus
// a vector along the last dim) of a Transpose that keeps the last dim and that only the MatMul
// reads (MultiheadAttention's batch-first transpose before its in_proj). The projection can run on
// the Transpose's input instead (rows in that order: the Transpose becomes an alias), with `v` read
// through the permutation. Else nullptr.
const Node* row_transpose(const Builder& b, const Value* v) {
  const Node* p = v->producer();
  if (p != nullptr && p->kind() == OpKind::kAdd && p->num_inputs() == 2) {
    for (int i = 0; i < 2; ++i) {
      const Value* m = p->input(i);
      if (m->producer() != nullptr && m->producer()->kind() == OpKind::kMatMul &&
          p->input(1 - i)->tensor_type().rank() == 1 && b.only_consumer(m) == p) {
        p = m->producer();
        break;
      }
    }
  }
  if (p == nullptr || p->kind() != OpKind::kMatMul || p->input(1)->tensor_type().rank() != 2) {
    return nullptr;
  }
  const Node* t = p->input(0)->producer();
  if (t == nullptr || t->kind() != OpKind::kTranspose || b.only_consumer(p->input(0)) != p) {
    return nullptr;
  }
  const std::vector<int64_t> perm = transpose_perm(*t);
  return perm.back() == static_cast<int64_t>(perm.size()) - 1 ? t : nullptr;
}

// One operand as the kernel reads it: [batch factors..., rows, head dim].
struct Operand {
  const Value* source = nullptr;
  int64_t offset = 0;
  std::vector<Factor> batch;  // merged, major first
  int64_t row = 0;
};

std::optional<Operand> operand_of(const FineView& f, const Value* source) {
  const size_t r = f.dims.size();
  if (r < 3) return std::nullopt;
  const std::vector<Factor> d = merged(f.dims[r - 1]);
  const std::vector<Factor> s = merged(f.dims[r - 2]);
  if (d.size() != 1 || d[0].stride != 1 || s.size() > 1) return std::nullopt;
  Operand o;
  o.source = source;
  o.offset = f.offset;
  o.row = s.empty() ? 0 : s[0].stride;
  std::vector<Factor> batch;
  for (size_t i = 0; i + 2 < r; ++i) batch.insert(batch.end(), f.dims[i].begin(), f.dims[i].end());
  o.batch = merged(batch);
  return o;
}

// The stride of batch element `at` (a product of the more minor factors) along `batch`.
int64_t stride_at(const std::vector<Factor>& batch, int64_t at) {
  int64_t below = 1;
  for (size_t k = batch.size(); k-- > 0;) {
    if (at < below * batch[k].size) return batch[k].stride * (at / below);
    below *= batch[k].size;
  }
  return 0;
}

// The view of chain[0]'s input, given `f`, the view of chain[length - 1]'s output: each reshape or
// Transpose undone, last first.
std::optional<FineView> undo(const std::vector<const Node*>& chain, size_t length, FineView f) {
  for (size_t i = length; i-- > 0;) {
    const Node& n = *chain[i];
    if (n.kind() == OpKind::kTranspose) {
      const std::vector<int64_t> perm = transpose_perm(n);
      std::vector<int64_t> inverse(perm.size());
      for (size_t d = 0; d < perm.size(); ++d) inverse[static_cast<size_t>(perm[d])] = d;
      f = permute(f, inverse);
    } else {
      std::optional<FineView> r = reshape(f, shape_of(n.input(0)));
      if (!r) return std::nullopt;
      f = std::move(*r);
    }
  }
  return f;
}

// The Transposes after the attention's merged heads `f` ([rows, E]) that become aliases when the
// rows are stored in the order they want: a row-wise projection that alone reads `f` (Gemm without
// transA or MatMul, by a 2-D matrix, bias at most a vector), then reshapes and Transposes that keep
// the last dim, each alone reading the one before (MultiheadAttention's out_proj, its view to
// [S, B, E] and its batch-first transpose back). `start` gets `f` as a view of the buffer the step
// then writes. Empty when there are none.
std::vector<const Node*> row_transposes_after(const Builder& b, const Value* f, FineView& start) {
  const Node* p = b.only_consumer(f);
  if (f->tensor_type().rank() != 2 || p == nullptr || p->num_inputs() < 2 || p->input(0) != f ||
      p->input(1)->tensor_type().rank() != 2) {
    return {};
  }
  if (p->kind() == OpKind::kGemm) {
    if (p->attrs<ops::Gemm>().transA != 0) return {};
    if (p->has_input(2)) {
      const Shape c = shape_of(p->input(2));
      if (c.rank() > 2 || (c.rank() == 2 && c[0] != 1)) return {};
    }
  } else if (p->kind() != OpKind::kMatMul) {
    return {};
  }
  const Value* g = p->output(0);
  std::vector<const Node*> chain, transposes;
  for (const Node* n = b.only_consumer(g);
       n != nullptr && (is_reshape(n->kind()) || n->kind() == OpKind::kTranspose);
       n = b.only_consumer(n->output(0))) {
    chain.push_back(n);
    if (n->kind() == OpKind::kTranspose) transposes.push_back(n);
  }
  if (transposes.empty()) return {};
  // The projection's result as a view of the last value's contiguous buffer: rows permuted, each
  // row whole.
  const Shape gs = shape_of(g);
  std::optional<FineView> v =
      undo(chain, chain.size(), contiguous(shape_of(chain.back()->output(0))));
  if (!v) return {};
  const std::vector<Factor> cols = merged(v->dims[1]);
  if (cols.size() != 1 || cols[0].stride != 1 || v->offset != 0) return {};
  const int64_t width = shape_of(f)[1];
  start = FineView{};
  start.dims.resize(2);
  for (const Factor& x : v->dims[0]) {
    if (x.stride % gs[1] != 0) return {};
    start.dims[0].push_back({x.size, x.stride / gs[1] * width});
  }
  start.dims[1].push_back({width, 1});
  return transposes;
}

// An attention subgraph the fused step takes.
struct Attention {
  std::vector<const Node*> nodes;  // every node it replaces, `anchor` last
  const Node* anchor = nullptr;
  const Value* out = nullptr;  // what the step writes: the merged heads
  Operand q, k, v, o;
  int64_t batches = 1, heads = 1, queries = 0, keys = 0;
  int64_t batch_stride[4] = {}, head_stride[4] = {};  // q, k, v, o
  float scale = 1.0f;
  Elem elem = Elem::kF16;
  const Node* elided = nullptr;           // row_transpose of the source, an alias now
  std::vector<const Node*> elided_after;  // row_transposes_after the output, aliases now
};

bool enabled() {
  const char* env = env_flag_c_str(EnvFlag::kCudaAttention);
  return env == nullptr || std::strcmp(env, "0") != 0;
}

// The fused attention of `softmax` when its subgraph is one the kernel runs exactly: f16/bf16
// operands, head dim kAttentionHeadDim, no mask, softmax over the keys, each operand a strided view
// of the value its head split starts from, every intermediate value read only inside the subgraph.
std::optional<Attention> match(const Builder& b, const Node& softmax) {
  if (softmax.kind() != OpKind::kSoftmax || softmax.num_inputs() != 1) return std::nullopt;
  const int rank = softmax.input(0)->tensor_type().rank();
  const int64_t axis = softmax.attrs<ops::Softmax>().axis;
  if (rank < 3 || (axis != -1 && axis != rank - 1)) return std::nullopt;
  Attention a;
  // Back from the scores to the first MatMul: scalings and the fp16 conversion's Casts.
  const Value* x = softmax.input(0);
  std::vector<const Node*> between = {&softmax};
  const Node* qk = nullptr;
  while (x->producer() != nullptr) {
    const Node* p = x->producer();
    if (p->kind() == OpKind::kMatMul) {
      qk = p;
      break;
    }
    const bool cast = p->kind() == OpKind::kCast && elem_of(p->input(0)) && elem_of(p->output(0));
    if (cast ||
        ((p->kind() == OpKind::kMul || p->kind() == OpKind::kDiv) && view_input(*p) != nullptr)) {
      if (p->kind() != OpKind::kCast) apply(*p, x, FineView{}, a.scale);
      between.push_back(p);
      x = p->kind() == OpKind::kCast ? p->input(0) : view_input(*p);
      continue;
    }
    return std::nullopt;
  }
  if (qk == nullptr) return std::nullopt;
  // Forward from the probabilities to the second MatMul, through a Cast back.
  const Node* pv = b.only_consumer(softmax.output(0));
  if (pv != nullptr && pv->kind() == OpKind::kCast && elem_of(pv->output(0))) {
    between.push_back(pv);
    pv = b.only_consumer(pv->output(0));
  }
  if (pv == nullptr || pv->kind() != OpKind::kMatMul || pv->input(0)->producer() == nullptr ||
      b.only_consumer(pv->input(0)) != pv) {
    return std::nullopt;
  }
  const std::optional<Elem> e = elem_of(qk->input(0));
  if (!e || *e == Elem::kF32) return std::nullopt;
  for (const Value* v : {qk->input(1), qk->output(0), pv->input(0), pv->input(1), pv->output(0)}) {
    if (elem_of(v) != e) return std::nullopt;
  }
  a.elem = *e;
  const Shape sq = shape_of(qk->input(0));
  const Shape sk = shape_of(qk->input(1));
  const Shape sv = shape_of(pv->input(1));
  const int r = sq.rank();
  if (r != rank || sk.rank() != r || sv.rank() != r) return std::nullopt;
  for (int d = 0; d + 2 < r; ++d) {
    if (sk[d] != sq[d] || sv[d] != sq[d]) return std::nullopt;
  }
  a.queries = sq[r - 2];
  a.keys = sk[r - 1];
  if (sq[r - 1] != kAttentionHeadDim || sk[r - 2] != kAttentionHeadDim || sv[r - 2] != a.keys ||
      sv[r - 1] != kAttentionHeadDim) {
    return std::nullopt;
  }
  // One source for all three (a QKV projection) whose rows may come in its input's order.
  const Value* sq_src = source_of(qk->input(0));
  const Value* sk_src = source_of(qk->input(1));
  const Value* sv_src = source_of(pv->input(1));
  if (sq_src == sk_src && sk_src == sv_src) a.elided = row_transpose(b, sq_src);
  auto start = [&](const Value* src) {
    if (a.elided == nullptr) return contiguous(shape_of(src));
    Shape rows = shape_of(a.elided->input(0));  // the source's rows in the Transpose's input order
    std::vector<int64_t> dims(rows.dims().begin(), rows.dims().end());
    dims.back() = shape_of(src)[shape_of(src).rank() - 1];
    return permute(contiguous(Shape(dims)), transpose_perm(*a.elided));
  };
  std::vector<const Node*> nodes;
  auto fq = view_of(qk->input(0), start(sq_src), nodes, a.scale);
  std::optional<Operand> q = fq ? operand_of(*fq, sq_src) : std::nullopt;
  auto fk = view_of(qk->input(1), start(sk_src), nodes, a.scale);
  std::vector<int64_t> swap(static_cast<size_t>(r));
  for (int d = 0; d < r; ++d) swap[static_cast<size_t>(d)] = d;
  std::swap(swap[static_cast<size_t>(r - 1)], swap[static_cast<size_t>(r - 2)]);
  std::optional<Operand> k = fk ? operand_of(permute(*fk, swap), sk_src) : std::nullopt;
  float unscaled = 1.0f;
  auto fv = view_of(pv->input(1), start(sv_src), nodes, unscaled);
  std::optional<Operand> v = fv ? operand_of(*fv, sv_src) : std::nullopt;
  if (!q || !k || !v || unscaled != 1.0f || !(a.scale > 0.0f) || !std::isfinite(a.scale)) {
    return std::nullopt;
  }
  nodes.insert(nodes.end(), between.begin(), between.end());
  nodes.push_back(qk);
  nodes.push_back(pv);
  // The output: the longest chain of reshapes and Transposes after the second MatMul that the
  // kernel's strided store can write.
  std::vector<const Node*> chain;
  for (const Node* n = b.only_consumer(pv->output(0));
       n != nullptr && (is_reshape(n->kind()) || n->kind() == OpKind::kTranspose) &&
       n->num_outputs() == 1;
       n = b.only_consumer(n->output(0))) {
    chain.push_back(n);
  }
  std::optional<Operand> o;
  size_t length = chain.size() + 1;
  while (!o && length-- > 0) {
    const Value* end = length == 0 ? pv->output(0) : chain[length - 1]->output(0);
    std::optional<FineView> f = undo(chain, length, contiguous(shape_of(end)));
    if (f) o = operand_of(*f, end);
    if (o) a.out = end;
  }
  // The rows stored in the order the Transposes after the output projection want, where the
  // strided store can.
  FineView rows;
  if (o) a.elided_after = row_transposes_after(b, a.out, rows);
  if (!a.elided_after.empty()) {
    std::optional<FineView> f = undo(chain, length, rows);
    std::optional<Operand> reordered = f ? operand_of(*f, a.out) : std::nullopt;
    if (reordered) {
      o = reordered;
    } else {
      a.elided_after.clear();
    }
  }
  if (!o) return std::nullopt;
  nodes.insert(nodes.end(), chain.begin(), chain.begin() + static_cast<std::ptrdiff_t>(length));
  a.anchor = nodes.back();
  // One split of the batch into (batches, heads) every operand's strides follow.
  const Operand* ops[4] = {&*q, &*k, &*v, &*o};
  std::vector<int64_t> cuts;  // products of the minor factors where some operand's factor ends
  for (const Operand* p : ops) {
    int64_t c = 1;
    for (size_t i = p->batch.size(); i-- > 0;) {
      c *= p->batch[i].size;
      cuts.push_back(c);
    }
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  for (size_t i = 1; i < cuts.size(); ++i) {
    if (cuts[i] % cuts[i - 1] != 0) return std::nullopt;
  }
  if (cuts.size() > 2) return std::nullopt;
  a.heads = cuts.empty() ? 1 : cuts[0];
  a.batches = cuts.size() == 2 ? cuts[1] / cuts[0] : 1;
  for (int i = 0; i < 4; ++i) {
    a.head_stride[i] = a.heads > 1 ? stride_at(ops[i]->batch, 1) : 0;
    a.batch_stride[i] = a.batches > 1 ? stride_at(ops[i]->batch, a.heads) : 0;
    for (int64_t s : {ops[i]->offset, ops[i]->row, a.head_stride[i], a.batch_stride[i]}) {
      if (s % kAttentionAlign != 0) return std::nullopt;
    }
  }
  a.q = *q;
  a.k = *k;
  a.v = *v;
  a.o = *o;
  // Every value made inside is read only inside (the merged heads, the anchor's, may go on).
  std::unordered_set<const Node*> inside(nodes.begin(), nodes.end());
  std::unordered_set<const Value*> outputs(b.graph().outputs().begin(), b.graph().outputs().end());
  for (const Node* n : nodes) {
    if (n == a.anchor) continue;
    for (const Value* out : n->outputs()) {
      if (out == nullptr) continue;
      if (outputs.count(out) != 0) return std::nullopt;
      for (const auto& use : out->uses()) {
        if (inside.count(use.node) == 0) return std::nullopt;
      }
    }
  }
  for (const Operand* p : {&a.q, &a.k, &a.v}) {
    if (inside.count(p->source->producer()) != 0) return std::nullopt;
  }
  // A source stored in another row order is read by nothing else.
  if (a.elided != nullptr) {
    if (outputs.count(a.q.source) != 0) return std::nullopt;
    for (const auto& use : a.q.source->uses()) {
      if (inside.count(use.node) == 0) return std::nullopt;
    }
  }
  a.nodes = std::move(nodes);
  return a;
}

// `n`, or the first producer before it that is no reshape or Transpose.
const Node* producer_past_views(const Node* n) {
  while (n != nullptr && (is_reshape(n->kind()) || n->kind() == OpKind::kTranspose)) {
    n = n->input(0)->producer();
  }
  return n;
}

// The Softmax whose probabilities MatMul `pv` multiplies (through a Cast), else nullptr.
const Node* softmax_before(const Node* pv) {
  if (pv == nullptr || pv->kind() != OpKind::kMatMul) return nullptr;
  const Node* n = pv->input(0)->producer();
  if (n != nullptr && n->kind() == OpKind::kCast) n = n->input(0)->producer();
  return n != nullptr && n->kind() == OpKind::kSoftmax ? n : nullptr;
}

// The Softmax of the attention whose q, k and v come from the projection of Transpose `t` (see
// row_transpose), else nullptr.
const Node* softmax_reading(const Builder& b, const Node& t) {
  const Node* m = b.only_consumer(t.output(0));
  if (m == nullptr || m->kind() != OpKind::kMatMul) return nullptr;
  const Value* v = m->output(0);
  if (const Node* add = b.only_consumer(v); add != nullptr && add->kind() == OpKind::kAdd) {
    v = add->output(0);
  }
  if (v->uses().empty()) return nullptr;
  // Through the head split to the first MatMul it reaches.
  const Node* n = v->uses()[0].node;
  while (n != nullptr && n->kind() != OpKind::kMatMul && view_input(*n) != nullptr) {
    n = n->num_outputs() > 0 && n->output(0) != nullptr && !n->output(0)->uses().empty()
            ? n->output(0)->uses()[0].node
            : nullptr;
  }
  if (n == nullptr || n->kind() != OpKind::kMatMul) return nullptr;
  // The scores' MatMul: forward through scalings and Casts; the output's: back through a Cast.
  for (const Node* s = b.only_consumer(n->output(0)); s != nullptr;
       s = b.only_consumer(s->output(0))) {
    if (s->kind() == OpKind::kSoftmax) return s;
    if (s->kind() != OpKind::kCast && s->kind() != OpKind::kMul && s->kind() != OpKind::kDiv) break;
  }
  return softmax_before(n);
}

}  // namespace

int plan_attention(Builder& b) {
  if (!enabled()) return 0;
  int found = 0;
  for (const auto& node : b.graph().nodes()) {
    if (node->kind() != OpKind::kSoftmax) continue;
    std::optional<Attention> a = match(b, *node);
    if (!a) continue;
    for (const Node* n : a->nodes) {
      if (n != a->anchor) b.mark_fused(n);
    }
    log(LogLevel::kDebug,
        "cuda: attention at \"{}\" fused: {} x {} heads, {} queries, {} keys; Transposes "
        "aliased: {} before, {} after",
        node->name(), a->batches, a->heads, a->queries, a->keys, a->elided != nullptr ? 1 : 0,
        a->elided_after.size());
    ++found;
  }
  return found;
}

bool lower_attention(Builder& b, const Node& node) {
  if (!enabled()) return false;
  if (node.kind() == OpKind::kTranspose) {
    // A Transpose before the QKV projection or after the output projection whose rows the
    // attention step reorders: an alias.
    const Node* softmax = softmax_reading(b, node);
    std::optional<Attention> a = softmax != nullptr ? match(b, *softmax) : std::nullopt;
    if (!a || a->elided != &node) {
      const Node* p = producer_past_views(&node);
      if (p != nullptr && (p->kind() == OpKind::kGemm || p->kind() == OpKind::kMatMul)) {
        softmax = softmax_before(producer_past_views(p->input(0)->producer()));
        a = softmax != nullptr ? match(b, *softmax) : std::nullopt;
      }
    }
    if (a && (a->elided == &node || std::find(a->elided_after.begin(), a->elided_after.end(),
                                              &node) != a->elided_after.end())) {
      b.alias(node.output(0), node.input(0));
      return true;
    }
  }
  // Back from the anchor through the head merge to the second MatMul and the Softmax.
  const Node* softmax = softmax_before(producer_past_views(&node));
  if (softmax == nullptr) return false;
  std::optional<Attention> a = match(b, *softmax);
  if (!a || a->anchor != &node) return false;
  const int qi = b.buffer_of(a->q.source);
  const int ki = b.buffer_of(a->k.source);
  const int vi = b.buffer_of(a->v.source);
  const int oi = b.define(a->out);
  std::vector<int> reads = {qi};
  for (int id : {ki, vi}) {
    if (std::find(reads.begin(), reads.end(), id) == reads.end()) reads.push_back(id);
  }
  const Attention at = *a;
  b.add_step(std::make_unique<FunctionStep>(
      node, "Attention", std::move(reads), std::vector<int>{oi}, [=](Session& s) {
        auto operand = [&](const Operand& p, int id, int i) {
          return AttentionOperand{
              static_cast<const char*>(s.device[static_cast<size_t>(id)]) + p.offset * 2,
              at.batch_stride[i], at.head_stride[i], p.row};
        };
        return launch_attention(at.elem, operand(at.q, qi, 0), operand(at.k, ki, 1),
                                operand(at.v, vi, 2), operand(at.o, oi, 3), at.batches, at.heads,
                                at.queries, at.keys, at.scale, s.stream);
      }));
  return true;
}

}  // namespace kiln::compiler::cuda
