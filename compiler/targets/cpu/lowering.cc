// SPDX-License-Identifier: Apache-2.0
// What the files lowering nodes to oneDNN steps share (lowering.h): pattern helpers and adding a
// primitive's step.
#include "compiler/targets/cpu/lowering.h"

#include <fmt/format.h>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/rewrite.h"
#include "compiler/targets/cpu/kernels/silu.h"
#include "compiler/targets/cpu/onednn.h"

namespace kiln::compiler::cpu {

using dnnl::memory;
using Arg = PrimitiveStep::Arg;

bool is_f32(const Value* v) {
  return v != nullptr && v->type().is_tensor() && v->tensor_type().dtype == DType::kF32 &&
         v->tensor_type().is_static();
}

// f32 or bf16 (what quantize_bf16 leaves), static: the types the compute steps run in.
bool is_float(const Value* v) {
  return v != nullptr && v->type().is_tensor() && v->tensor_type().is_static() &&
         (v->tensor_type().dtype == DType::kF32 || v->tensor_type().dtype == DType::kBF16);
}

DType dtype(const Value* v) {
  return v->tensor_type().dtype;
}

Result<KernelChoice> kernel_choice(EnvFlag flag) {
  const std::string v = env_flag_string(flag);
  if (v == "auto") return KernelChoice::kAuto;
  if (v == "own") return KernelChoice::kOwn;
  if (v == "onednn") return KernelChoice::kOneDnn;
  return invalid_argument_error(fmt::format("{} is \"{}\"; use auto, own or onednn (or unset it)",
                                            env_flag_info(flag).variable, v));
}

bool same_float(std::initializer_list<const Value*> values) {
  for (const Value* v : values) {
    if (!is_float(v) || dtype(v) != dtype(*values.begin())) return false;
  }
  return true;
}

const Node* sole_user(const Value* v) {
  if (v->uses().size() != 1 || is_graph_output(v)) return nullptr;
  return v->uses()[0].node;
}

const Value* other_input(const Node& node, const Value* one) {
  if (node.num_inputs() != 2) return nullptr;
  return node.input(0) == one ? node.input(1) : node.input(0);
}

memory::desc any_desc(const Shape& shape, DType dtype) {
  return memory::desc(to_dims(shape), dnnl_type(dtype), memory::format_tag::any);
}

// A constant copied into memory the step owns, in `layout` (converted to its element type).
memory constant_memory(const dnnl::engine& engine, const Tensor& t, const memory::desc& layout) {
  return pack(engine, plain_desc(t.shape(), t.dtype()), t.raw_data(), layout);
}

// The step running `primitive` over `args` (not added yet).
std::unique_ptr<Step> primitive_step(ProgramBuilder& b, const Node& node, std::string kind,
                                     dnnl::primitive primitive, std::vector<Arg> args,
                                     const Tail& tail,
                                     std::optional<PrimitiveStep::Prefill> prefill,
                                     int prefill_from) {
  auto step =
      std::make_unique<PrimitiveStep>(b.engine(), std::move(primitive), args, std::move(prefill));
  step->node = &node;
  step->kind = std::move(kind) + tail.kinds;
  add_arg_buffers(*step, args);
  if (prefill_from >= 0) step->reads.push_back(prefill_from);
  return step;
}

void finish(ProgramBuilder& b, std::unique_ptr<Step> step, const Tail& tail) {
  b.add_step(std::move(step));
  for (const Node* n : tail.nodes) b.mark_fused(n);
}

void finish(ProgramBuilder& b, const Node& node, std::string kind, dnnl::primitive primitive,
            std::vector<Arg> args, const Tail& tail, std::optional<PrimitiveStep::Prefill> prefill,
            int prefill_from) {
  finish(b,
         primitive_step(b, node, std::move(kind), std::move(primitive), std::move(args), tail,
                        std::move(prefill), prefill_from),
         tail);
}

int reorder_into(ProgramBuilder& b, const Node& node, int id, const dnnl::memory::desc& from,
                 const dnnl::memory::desc& to) {
  if (from == to) return id;
  const int out = b.scratch(to.get_size());
  dnnl::reorder reorder(dnnl::reorder::primitive_desc(b.engine(), from, b.engine(), to));
  finish(b, node, "Reorder", reorder, {{DNNL_ARG_SRC, id, from, {}}, {DNNL_ARG_DST, out, to, {}}},
         Tail{});
  return out;
}

const Node* pooled_by(ProgramBuilder& b, const Value* y, const memory::desc& layout,
                      memory::desc* pooled) {
  if (!has_fast_silu() || !is_f32(y) || y->tensor_type().shape().rank() != 4) return nullptr;
  const memory::dims dims = to_dims(y->tensor_type().shape());
  if (layout != memory::desc(dims, memory::data_type::f32, memory::format_tag::nChw16c)) {
    return nullptr;
  }
  for (const Use& u : y->uses()) {
    const Node& pool = *u.node;
    if (pool.kind() != OpKind::kGlobalAveragePool || u.index != 0 || b.is_fused(&pool) ||
        !same_float({y, pool.output(0)})) {
      continue;
    }
    const memory::desc want({dims[0], dims[1], 1, 1}, memory::data_type::f32,
                            memory::format_tag::nChw16c);
    std::optional<dnnl::pooling_v2_forward::desc> desc =
        pool_desc(pool, layout, any_desc(pool.output(0)->tensor_type().shape()));
    if (!desc || dnnl::pooling_v2_forward::primitive_desc(*desc, b.engine()).dst_desc() != want) {
      continue;
    }
    *pooled = want;
    return &pool;
  }
  return nullptr;
}

}  // namespace kiln::compiler::cpu
