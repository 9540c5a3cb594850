// SPDX-License-Identifier: Apache-2.0
// Op names, defaults, attribute printing, equality and hashing — all derived from reflect().
#include "compiler/ops/op.h"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>

#include "compiler/ir/graph.h"
#include "compiler/ops/all_ops.h"

namespace kiln::compiler {

namespace {

struct OpInfo {
  std::string_view name;
  std::string_view family;
};
constexpr std::array<OpInfo, kNumOpKinds> kOpInfo = {{
#define KILN_OP(name, family) {#name, #family},
#include "compiler/ops/op_list.inc"
#undef KILN_OP
}};

// Collects (name, field) pairs so that two ops can be compared field by field.
class FieldCollector final : public AttrVisitor {
 public:
  void visit(std::string_view name, AttrRef field) override { fields.emplace_back(name, field); }
  std::vector<std::pair<std::string_view, AttrRef>> fields;
};

template <class T>
bool field_equal(const T& a, const T& b) {
  if constexpr (std::is_same_v<T, Tensor>) {
    if (a.defined() != b.defined()) return false;
    if (!a.defined()) return true;
    if (a.raw_data() == b.raw_data() && a.shape() == b.shape() && a.dtype() == b.dtype()) {
      return true;
    }
    return a.equals(b);
  } else if constexpr (std::is_same_v<T, float>) {
    return std::memcmp(&a, &b, sizeof(float)) == 0;  // NaN attributes compare equal to themselves
  } else {
    return a == b;
  }
}

void hash_combine(size_t& seed, size_t v) { seed ^= v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2); }

template <class T>
size_t field_hash(const T& v) {
  if constexpr (std::is_same_v<T, Tensor>) {
    if (!v.defined()) return 0;
    size_t h = std::hash<int64_t>()(v.numel()) ^ static_cast<size_t>(v.dtype());
    if (v.dtype() != DType::kString) {
      const auto* p = static_cast<const unsigned char*>(v.raw_data());
      size_t n = std::min<size_t>(v.nbytes(), 256);
      for (size_t i = 0; i < n; ++i) hash_combine(h, p[i]);
    }
    return h;
  } else if constexpr (std::is_same_v<T, GraphAttr>) {
    return std::hash<const void*>()(v.get());
  } else if constexpr (std::is_same_v<T, DType>) {
    return static_cast<size_t>(v);
  } else if constexpr (std::is_same_v<T, float>) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return bits;
  } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, std::string>) {
    return std::hash<T>()(v);
  } else if constexpr (requires { v.has_value(); }) {
    return v ? field_hash(*v) + 1 : 0;
  } else {
    size_t h = v.size();
    for (const auto& e : v) hash_combine(h, field_hash(e));
    return h;
  }
}

std::string format_float(float f) {
  std::string s = fmt::format("{}", f);
  return s;
}

std::string format_tensor(const Tensor& t) {
  if (!t.defined()) return "none";
  std::string out = fmt::format("{}{}", dtype_name(t.dtype()), t.shape().to_string());
  if (t.numel() > 8) return out;
  out += '{';
  visit_dtype(t.dtype(), [&]<class T>() {
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (i) out += ',';
      if constexpr (std::is_same_v<T, std::string>) {
        out += fmt::format("\"{}\"", p[i]);
      } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        out += format_float(static_cast<float>(p[i]));
      } else if constexpr (std::is_same_v<T, bool>) {
        out += p[i] ? "true" : "false";
      } else if constexpr (std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>) {
        out += std::to_string(static_cast<int>(p[i]));
      } else {
        out += fmt::format("{}", p[i]);
      }
    }
  });
  out += '}';
  return out;
}

template <class T>
std::string format_field(const T& v) {
  if constexpr (std::is_same_v<T, Tensor>) {
    return format_tensor(v);
  } else if constexpr (std::is_same_v<T, GraphAttr>) {
    return v ? fmt::format("<graph {}>", v->name()) : "none";
  } else if constexpr (std::is_same_v<T, DType>) {
    return std::string(dtype_name(v));
  } else if constexpr (std::is_same_v<T, float>) {
    return format_float(v);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return std::to_string(v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return fmt::format("\"{}\"", v);
  } else if constexpr (requires { v.has_value(); }) {
    return v ? format_field(*v) : "none";
  } else {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ',';
      out += format_field(v[i]);
    }
    return out + "]";
  }
}

template <class T>
bool is_absent(const T& v) {
  if constexpr (std::is_same_v<T, Tensor>) {
    return !v.defined();
  } else if constexpr (std::is_same_v<T, GraphAttr>) {
    return v == nullptr;
  } else if constexpr (requires { v.has_value(); }) {
    return !v.has_value();
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    return v.empty();  // string lists have no other way to be absent
  } else {
    return false;
  }
}

}  // namespace

std::string_view op_kind_name(OpKind kind) { return kOpInfo[static_cast<size_t>(kind)].name; }
std::string_view op_kind_family(OpKind kind) { return kOpInfo[static_cast<size_t>(kind)].family; }

std::optional<OpKind> parse_op_kind(std::string_view name) {
  for (size_t i = 0; i < kOpInfo.size(); ++i) {
    if (kOpInfo[i].name == name) return static_cast<OpKind>(i);
  }
  return std::nullopt;
}

Op Op::make_default(OpKind kind) {
  switch (kind) {
#define KILN_OP(name, family) \
  case OpKind::k##name: return Op(ops::name{});
#include "compiler/ops/op_list.inc"
#undef KILN_OP
  }
  KILN_CHECK(false, "invalid OpKind");
  __builtin_unreachable();
}

Op Op::with_attributes(AttrVisitor& v) const {
  Op copy;
  copy.kind_ = kind_;
  copy.impl_ = impl_->clone();
  copy.impl_->reflect(v);
  return copy;
}

std::string Op::attributes_string() const {
  FieldCollector c;
  impl_->reflect(c);
  std::string out;
  for (const auto& entry : c.fields) {
    // Not a structured binding: clang before 16 (the fuzz builds' clang 14) cannot capture one.
    const std::string_view name = entry.first;
    std::visit(
        [&](auto* p) {
          if (is_absent(*p)) return;
          out += out.empty() ? "[" : ", ";
          out += fmt::format("{}={}", name, format_field(*p));
        },
        entry.second);
  }
  if (!out.empty()) out += ']';
  return out;
}

namespace {

// Whether the ops of each kind have graph attributes (If's branches, Loop's body), a property of
// the kind's reflect(): 0 not known yet, 1 none, 2 some. Passes ask every node for its subgraphs,
// and reflecting each (a Constant has eight fields) took a third of a small model's compile.
std::array<std::atomic<uint8_t>, kNumOpKinds> g_has_graph_attrs{};

}  // namespace

std::vector<Graph*> Op::subgraphs() const {
  std::atomic<uint8_t>& known = g_has_graph_attrs[static_cast<size_t>(kind_)];
  if (known.load(std::memory_order_relaxed) == 1) return {};
  FieldCollector c;
  impl_->reflect(c);
  std::vector<Graph*> out;
  bool any = false;
  for (const auto& [name, field] : c.fields) {
    if (auto* g = std::get_if<GraphAttr*>(&field)) {
      any = true;
      if (**g) out.push_back((**g).get());
    }
  }
  known.store(any ? 2 : 1, std::memory_order_relaxed);
  return out;
}

bool operator==(const Op& a, const Op& b) {
  if (a.kind_ != b.kind_) return false;
  if (a.impl_ == b.impl_) return true;
  FieldCollector fa, fb;
  a.impl_->reflect(fa);
  b.impl_->reflect(fb);
  for (size_t i = 0; i < fa.fields.size(); ++i) {
    bool equal = std::visit(
        [&](auto* pa) {
          using P = decltype(pa);
          return field_equal(*pa, *std::get<P>(fb.fields[i].second));
        },
        fa.fields[i].second);
    if (!equal) return false;
  }
  return true;
}

size_t Op::hash() const {
  size_t h = static_cast<size_t>(kind_);
  FieldCollector c;
  impl_->reflect(c);
  for (const auto& [name, field] : c.fields) {
    hash_combine(h, std::visit([](auto* p) { return field_hash(*p); }, field));
  }
  return h;
}

}  // namespace kiln::compiler
