// SPDX-License-Identifier: Apache-2.0
// The lowering files' shared helpers (lower_util.h), and the NCHW/NHWC reorder step the builder
// adds between layouts (add_reorder, program.h).
#include "compiler/targets/cuda/lower_util.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "compiler/ops/all_ops.h"
#include "compiler/targets/cuda/kernels/layout.h"
#include "core/half.h"

namespace kiln::compiler::cuda {

// The window of a 2-D pooling or depthwise convolution: x [N, C, H, W] to y's spatial dims through
// `g` (a 2-D geometry).
void set_window(Window2d& p, const Shape& x, const Shape& y, const WindowGeometry& g) {
  p.n = x[0];
  p.c = x[1];
  p.h = x[2];
  p.w = x[3];
  p.oh = y[2];
  p.ow = y[3];
  p.kh = g.kernel[0];
  p.kw = g.kernel[1];
  p.sh = g.strides[0];
  p.sw = g.strides[1];
  p.ph = g.pad_begin[0];
  p.pw = g.pad_begin[1];
  p.dh = g.dilations[0];
  p.dw = g.dilations[1];
}

// The kernels' element type of a float tensor (f32, f16, bf16).
std::optional<Elem> elem_of(DType dtype) {
  switch (dtype) {
    case DType::kF32: return Elem::kF32;
    case DType::kF16: return Elem::kF16;
    case DType::kBF16: return Elem::kBF16;
    default: return std::nullopt;
  }
}

std::optional<Elem> elem_of(const Value* v) {
  if (v == nullptr) return std::nullopt;
  return elem_of(v->tensor_type().dtype);
}

// The element type shared by every given value, when it is a float type.
std::optional<Elem> common_elem(std::initializer_list<const Value*> values) {
  std::optional<Elem> e;
  for (const Value* v : values) {
    std::optional<Elem> ev = elem_of(v);
    if (!ev || (e && *e != *ev)) return std::nullopt;
    e = ev;
  }
  return e;
}

// A float constant's values as f32 (f16/bf16 widened), if `v` is one.
std::optional<std::vector<float>> constant_floats(const Value* v) {
  const Tensor* t = v != nullptr ? v->constant_value() : nullptr;
  if (t == nullptr || !elem_of(t->dtype())) return std::nullopt;
  std::vector<float> out(static_cast<size_t>(t->numel()));
  visit_dtype(t->dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Half> ||
                  std::is_same_v<T, BFloat16>) {
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(t->data<T>()[i]);
    }
  });
  return out;
}

namespace {

// The scalar held by a constant float input (f32, or f16/bf16 as the fp16/bf16 conversion leaves
// a Clip's bounds), as f32, if it is one.
std::optional<float> constant_scalar(const Node& node, int i) {
  if (!node.has_input(i)) return std::nullopt;
  std::optional<std::vector<float>> v = constant_floats(node.input(i));
  if (!v || v->size() != 1) return std::nullopt;
  return (*v)[0];
}

}  // namespace

void add(Builder& b, const Node& node, std::string kind, std::vector<int> in, std::vector<int> out,
         FunctionStep::Fn fn) {
  b.add_step(std::make_unique<FunctionStep>(node, std::move(kind), std::move(in), std::move(out),
                                            std::move(fn)));
}

// The node of `kind` that alone reads `v`, else nullptr.
const Node* consumer_as(const Builder& b, const Value* v, OpKind kind) {
  const Node* n = b.only_consumer(v);
  return n != nullptr && n->kind() == kind ? n : nullptr;
}

// The operand of binary `node` that is not `v`, when the other one is `v`.
const Value* other_operand(const Node& node, const Value* v) {
  if (node.num_inputs() != 2) return nullptr;
  if (node.input(0) == v) return node.input(1);
  if (node.input(1) == v) return node.input(0);
  return nullptr;
}

std::optional<std::pair<Unary, std::pair<float, float>>> unary_of(const Node& node) {
  auto plain = [](Unary u) { return std::make_pair(u, std::make_pair(0.0f, 0.0f)); };
  switch (node.kind()) {
    case OpKind::kRelu: return plain(Unary::kRelu);
    case OpKind::kSigmoid: return plain(Unary::kSigmoid);
    case OpKind::kTanh: return plain(Unary::kTanh);
    case OpKind::kExp: return plain(Unary::kExp);
    case OpKind::kLog: return plain(Unary::kLog);
    case OpKind::kNeg: return plain(Unary::kNeg);
    case OpKind::kAbs: return plain(Unary::kAbs);
    case OpKind::kSqrt: return plain(Unary::kSqrt);
    case OpKind::kErf: return plain(Unary::kErf);
    case OpKind::kReciprocal: return plain(Unary::kReciprocal);
    case OpKind::kFloor: return plain(Unary::kFloor);
    case OpKind::kCeil: return plain(Unary::kCeil);
    case OpKind::kSin: return plain(Unary::kSin);
    case OpKind::kCos: return plain(Unary::kCos);
    case OpKind::kSoftplus: return plain(Unary::kSoftplus);
    case OpKind::kHardSwish: return plain(Unary::kHardSwish);
    case OpKind::kGelu:
      return plain(node.attrs<ops::Gelu>().approximate == "tanh" ? Unary::kGeluTanh : Unary::kGelu);
    case OpKind::kSwish:
      return std::make_pair(Unary::kSwish, std::make_pair(node.attrs<ops::Swish>().alpha, 0.0f));
    case OpKind::kLeakyRelu:
      return std::make_pair(Unary::kLeakyRelu,
                            std::make_pair(node.attrs<ops::LeakyRelu>().alpha, 0.0f));
    case OpKind::kElu:
      return std::make_pair(Unary::kElu, std::make_pair(node.attrs<ops::Elu>().alpha, 0.0f));
    case OpKind::kHardSigmoid: {
      const auto& op = node.attrs<ops::HardSigmoid>();
      return std::make_pair(Unary::kHardSigmoid, std::make_pair(op.alpha, op.beta));
    }
    case OpKind::kClip: {
      const float lo = node.has_input(1) ? constant_scalar(node, 1).value_or(NAN) : -INFINITY;
      const float hi = node.has_input(2) ? constant_scalar(node, 2).value_or(NAN) : INFINITY;
      if (std::isnan(lo) || std::isnan(hi)) return std::nullopt;
      return std::make_pair(Unary::kClip, std::make_pair(lo, hi));
    }
    default: return std::nullopt;
  }
}

std::optional<Binary> binary_of(OpKind kind) {
  switch (kind) {
    case OpKind::kAdd: return Binary::kAdd;
    case OpKind::kSub: return Binary::kSub;
    case OpKind::kMul: return Binary::kMul;
    case OpKind::kDiv: return Binary::kDiv;
    case OpKind::kPow: return Binary::kPow;
    case OpKind::kMax: return Binary::kMax;
    case OpKind::kMin: return Binary::kMin;
    default: return std::nullopt;
  }
}

void broadcast_strides(const Shape& in, const Shape& out, int64_t* strides) {
  const int offset = out.rank() - in.rank();
  int64_t stride = 1;
  for (int d = out.rank() - 1; d >= 0; --d) {
    const int i = d - offset;
    if (i < 0) {
      strides[d] = 0;
      continue;
    }
    strides[d] = in[i] == 1 && out[d] != 1 ? 0 : stride;
    stride *= in[i];
  }
}

// A constant integer tensor's values (i32 or i64), if `v` is one.
std::optional<std::vector<int64_t>> constant_ints(const Value* v) {
  const Tensor* t = v != nullptr ? v->constant_value() : nullptr;
  if (t == nullptr) return std::nullopt;
  std::vector<int64_t> out;
  if (t->dtype() == DType::kI64) {
    for (int64_t i = 0; i < t->numel(); ++i) out.push_back(t->data<int64_t>()[i]);
  } else if (t->dtype() == DType::kI32) {
    for (int64_t i = 0; i < t->numel(); ++i) out.push_back(t->data<int32_t>()[i]);
  } else {
    return std::nullopt;
  }
  return out;
}

std::vector<uint8_t> nhwc_bytes(const Tensor& t, int64_t channels) {
  const Shape s = t.shape();
  const size_t es = dtype_size(t.dtype());
  std::vector<uint8_t> out(static_cast<size_t>(s[0] * s[2] * s[3] * channels) * es, 0);
  const auto* in = static_cast<const uint8_t*>(t.raw_data());
  size_t at = 0;
  for (int64_t n = 0; n < s[0]; ++n) {
    for (int64_t h = 0; h < s[2]; ++h) {
      for (int64_t w = 0; w < s[3]; ++w) {
        for (int64_t c = 0; c < s[1]; ++c) {
          const size_t from = static_cast<size_t>(((n * s[1] + c) * s[2] + h) * s[3] + w) * es;
          std::memcpy(out.data() + at + static_cast<size_t>(c) * es, in + from, es);
        }
        at += static_cast<size_t>(channels) * es;
      }
    }
  }
  return out;
}

void add_reorder(Builder& b, int from, int to, const Shape& x, bool to_nhwc) {
  // Output dims in storage order, each read at the input's stride for that dim.
  const std::vector<int64_t> dims = to_nhwc ? std::vector<int64_t>{x[0], x[2], x[3], x[1]}
                                            : std::vector<int64_t>{x[0], x[1], x[2], x[3]};
  const std::vector<int64_t> strides =
      to_nhwc ? std::vector<int64_t>{x[1] * x[2] * x[3], x[3], 1, x[2] * x[3]}   // from NCHW
              : std::vector<int64_t>{x[2] * x[3] * x[1], 1, x[3] * x[1], x[1]};  // from NHWC
  const int64_t n = x.numel();
  const int es = static_cast<int>(dtype_size(b.buffer(from).dtype));
  add(b, b.current(), to_nhwc ? "Reorder NCHW>NHWC" : "Reorder NHWC>NCHW", {from}, {to},
      [=](Session& s) {
        return launch_permute(ptr(s, from), ptr(s, to), n, 4, dims.data(), strides.data(), es,
                              s.stream);
      });
}

}  // namespace kiln::compiler::cuda
