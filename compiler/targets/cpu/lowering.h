// SPDX-License-Identifier: Apache-2.0
// What the files lowering nodes to oneDNN steps share: graph pattern helpers, the eltwise tail a
// primitive runs as post-ops (eltwise_tail.cc), and adding a primitive's step (lowering.cc).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/targets/cpu/builder.h"
#include "core/env.h"
#include "core/status.h"

namespace kiln::compiler::cpu {

// What a KILN_CPU_* kernel variable (auto, own or onednn) asks of a convolution kiln has its own
// kernel for: that kernel where it is faster than oneDNN's, wherever it applies, or never.
enum class KernelChoice { kAuto, kOwn, kOneDnn };
// The choice `flag` holds, or an error naming the variable and the values it takes.
Result<KernelChoice> kernel_choice(EnvFlag flag);

// A static f32 tensor; a static f32 or bf16 one (the types the compute steps run in); its type.
bool is_f32(const Value* v);
bool is_float(const Value* v);
DType dtype(const Value* v);

// Every value is a static f32 or bf16 tensor, all of the same type.
bool same_float(std::initializer_list<const Value*> values);
// The only node using `v` (in its graph, not returned), or nullptr.
const Node* sole_user(const Value* v);
// The other input of a two-input node, given one of them; nullptr for other nodes.
const Value* other_input(const Node& node, const Value* one);

struct Eltwise {
  dnnl::algorithm algorithm;
  float alpha = 0.0f;
  float beta = 0.0f;
};

// The eltwise nodes that follow `y` and can run as post-ops of the step producing it: a chain of
// single-use eltwise nodes (Mul or Div by a scalar constant as a linear scale), GELU in its Erf
// form, and x * Sigmoid(x) (SiLU) as swish. `before` lists the eltwise post-ops the step applies
// ahead of the tail (a Conv's own Relu). The chain stops before an op whose algorithm `before` or
// the tail already holds with other parameters: oneDNN 2.6's brgemm kernels (brg matmul,
// brgconv) apply every eltwise post-op of one algorithm with the first one's parameters, so
// LeakyRelu(0.2) then Relu ran as LeakyRelu(0.2) twice, Clip(a, b) then Clip(c, d) as the first
// twice, a scale by 2 then one by -1.5 as 2 twice.
struct Tail {
  std::vector<Eltwise> ops;
  std::vector<const Node*> nodes;
  const Value* out = nullptr;
  std::string kinds;
};
Tail trailing_eltwise(const Value* y, int max_ops = 2, const std::vector<Eltwise>& before = {});

// The oneDNN eltwise algorithm of a one-input f32 (or bf16) node, when it has one.
std::optional<Eltwise> eltwise_of(const Node& node);

// Appends `ops` to `post` as eltwise post-ops.
void append(dnnl::post_ops& post, const std::vector<Eltwise>& ops);

// A oneDNN memory descriptor of `shape` whose layout the primitive picks.
dnnl::memory::desc any_desc(const Shape& shape, DType dtype = DType::kF32);
// A constant copied into memory the step owns, in `layout` (converted to its element type).
dnnl::memory constant_memory(const dnnl::engine& engine, const Tensor& t,
                             const dnnl::memory::desc& layout);

// The step running `primitive` over `args` (not added yet), its kind followed by the tail's.
std::unique_ptr<Step> primitive_step(ProgramBuilder& b, const Node& node, std::string kind,
                                     dnnl::primitive primitive,
                                     std::vector<PrimitiveStep::Arg> args, const Tail& tail,
                                     std::optional<PrimitiveStep::Prefill> prefill = std::nullopt,
                                     int prefill_from = -1);
// Adds `step` and marks the tail's nodes fused.
void finish(ProgramBuilder& b, std::unique_ptr<Step> step, const Tail& tail);
// Adds the step running `primitive` over `args` for `node`, its kind followed by the tail's, and
// marks the tail's nodes fused. A `prefill` copies buffer `prefill_from` into the destination
// first (a sum post-op's addend).
void finish(ProgramBuilder& b, const Node& node, std::string kind, dnnl::primitive primitive,
            std::vector<PrimitiveStep::Arg> args, const Tail& tail,
            std::optional<PrimitiveStep::Prefill> prefill = std::nullopt, int prefill_from = -1);
// Buffer `id`, read as `from`, reordered into a new buffer of layout `to` by a step of `node`'s
// (a weight that arrives at run time, packed on every run as a constant one is once); `id` itself
// where the layouts are one.
int reorder_into(ProgramBuilder& b, const Node& node, int id, const dnnl::memory::desc& from,
                 const dnnl::memory::desc& to);

// The GlobalAveragePool reading `y` that the step writing it computes too (pool_after), and the
// layout of the mean it defines: `y` is f32 in `layout`, channel-blocked by 16 (nChw16c, dense),
// and the pool's own layout would be the same blocking. nullptr otherwise.
const Node* pooled_by(ProgramBuilder& b, const Value* y, const dnnl::memory::desc& layout,
                      dnnl::memory::desc* pooled);

// MatMul of two activations (attention's Q·Kᵀ and P·V) as one oneDNN matmul reading strided
// views as they are, writing its output transposed when a Transpose is its only reader, with a
// scale, a mask Add and eltwise nodes after it as post-ops; false when oneDNN cannot run it.
// Defined in batched_matmul.cc.
bool lower_batched_matmul(ProgramBuilder& b, const Node& node);
// Any other f32 or bf16 MatMul or Gemm as one oneDNN matmul step over plain operands (matmul.cc).
bool lower_general_matmul(ProgramBuilder& b, const Node& node);

}  // namespace kiln::compiler::cpu
