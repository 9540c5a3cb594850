// SPDX-License-Identifier: Apache-2.0
// Lowering a graph to the cpu target's Program: the builder's state and the helpers lowering rules
// use, and the entry points of the rules (each defined in its own file), which build() calls.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/runtime/plan.h"
#include "compiler/targets/cpu/program.h"
#include "compiler/targets/ref/interpreter.h"

namespace kiln::compiler::cpu {

// The layout that runs `graph` faster, from where its convolutions' work is; KILN_CPU_CONV_LAYOUT
// (any, blocked16) overrides it. Defined in lower_conv.cc.
Result<ConvLayout> choose_conv_layout(const Graph& graph);
// An error naming the KILN_CPU_* convolution variable (1x1, Winograd, stem) set to a value it
// does not take. Defined in lower_conv.cc.
Status check_conv_flags();

// Lowers a graph to a Program: fused oneDNN steps with blocked layouts where oneDNN runs a node
// (dnnl_steps.cc), a ref step for every other node (running the kernel `make_kernel` gives it, or
// the ref kernel), reorders where a consumer needs another layout.
class ProgramBuilder : public runtime::PlanBuilder<Buffer, Step> {
 public:
  // Makes the kernel of a node that runs as a ref step (the cpu target's: the node alone as a
  // program, node_program.h); nullptr leaves the node to its ref kernel.
  using KernelFactory = std::function<std::unique_ptr<ref::NodeKernel>(const Node&)>;

  // Kernels made for ref steps go into `kernels`, which must outlive the program.
  ProgramBuilder(const Graph& graph, dnnl::engine engine, ref::KernelTable* kernels,
                 KernelFactory make_kernel, uint64_t seed)
      : PlanBuilder(graph),
        engine_(std::move(engine)),
        kernels_(kernels),
        make_kernel_(std::move(make_kernel)),
        seed_(seed) {}

  // nullptr when the graph cannot be planned: a dynamic or non-tensor value, a string tensor, a
  // node with subgraphs. The interpreter runs such graphs. A layout or primitive oneDNN refuses
  // outside a lowering function's own fallbacks is an internal error naming the node.
  Result<std::unique_ptr<Program>> build();

  // Makes the builder one of an If branch: `captures` are the values of enclosing graphs that its
  // nodes read (input i of the program is captures[i], after the graph's own inputs); constants
  // among them are read where they are.
  void set_captures(std::vector<const Value*> captures) { captures_ = std::move(captures); }
  // A program of `branch` (an If's), reading `captures` (see set_captures), made with this
  // builder's engine, kernels and seed; nullptr when it cannot be planned.
  Result<std::unique_ptr<Program>> build_branch(const Graph& branch,
                                                std::vector<const Value*> captures) const;
  // Numbers `count` slots of a session's nested sessions (StepContext::nested) for a step.
  size_t take_nested_slots(size_t count) {
    nested_slots_ += count;
    return nested_slots_ - count;
  }

  // While build() runs, `release` is offered each constant that no step reads (its every user is
  // lowered, it is no graph output, no view reads it): weights the steps hold packed. It returns
  // whether it dropped the constant's data; the program then no longer points at it.
  using ConstantRelease = std::function<bool(const Value*)>;
  void set_constant_release(ConstantRelease release) { release_ = std::move(release); }

  // ---- for the lowering functions ----
  const dnnl::engine& engine() const { return engine_; }
  ConvLayout conv_layout() const { return conv_layout_; }
  // The buffer `v` was produced in (its layout may be blocked).
  int buffer_of(const Value* v) const;
  // The layout `v` lives in: its buffer's layout, or the plain layout of its shape.
  dnnl::memory::desc layout_of(const Value* v) const;
  // `v` (f32) in layout `want`: its own buffer when the layouts match, else the buffer of a reorder
  // (made once per value and layout).
  int in_layout(const Value* v, const dnnl::memory::desc& want);
  // `v` in plain row-major layout.
  int plain(const Value* v);
  // Gives `v` a new buffer written in `layout` (zero desc: plain) by the next step.
  int define(const Value* v, const dnnl::memory::desc& layout);
  // A buffer used only by the next step (a primitive's scratchpad); -1 for zero bytes.
  int scratch(size_t bytes);
  // Nothing overwrites buffer `id` in place from now on (a later step reads it).
  void keep(int id) { viewed_.insert(id); }
  // Adds a step; the buffers it reads and writes are live at it.
  void add_step(std::unique_ptr<Step> step);
  // `v` names the bytes of buffer `id` from now on (a step that updated them in place, e.g. a
  // convolution adding into its residual's buffer).
  void rebind(const Value* v, int id);
  // Whether the step of `consumer` (about to be added) may overwrite `v`'s buffer: an arena buffer
  // that nothing reads later (every other user of `v` already ran, and no view reads it).
  bool can_overwrite(const Value* v, const Node& consumer) const;
  // An Add fused into the Conv producing one of its inputs (as a oneDNN sum post-op): the Conv is
  // lowered at the Add, once the other input exists.
  const Node* sum_partner(const Node* node) const;

 private:
  Result<std::unique_ptr<Program>> build_program();
  void add_ref_step(const Node& node);
  // Whether `node` has so little work (elements of its inputs, weights and outputs) that its
  // steps run on one thread.
  static bool is_small(const Node& node);
  // The work of `node`, for deciding on threads: multiply-adds of convolutions, matrix products
  // and recurrences, else the elements it reads and writes.
  static int64_t work_of(const Node& node);
  // A graph whose nodes' work adds up to at most this runs on one thread (Program::one_thread):
  // Silero VAD's (a 1-D convolution front end and an LSTM cell) is 1.4M, a wake-word head's 0.2M,
  // a MobileNet's hundreds of millions.
  static constexpr int64_t kSmallProgramWork = int64_t{4} << 20;
  // A convolution, matrix product or recurrence of at most this work runs on one thread.
  static constexpr int64_t kSmallStepWork = int64_t{1} << 20;
  // Lowers every node; false when one cannot be planned (a constant without a value).
  Result<bool> lower_nodes();
  // Lowers `node` to oneDNN steps, or to its ref step.
  Status lower_node(const Node& node);
  // Lowers the squeeze-and-excitation Mul that `conv` was to absorb (squeeze_excite.h), when `conv`
  // runs without it.
  Status lower_gate_alone(const Node& conv);
  // Defines a shape-only node's output as a view of its (plain) input; false when it is not one.
  bool add_view(const Node& node);
  // Defines the outputs of a Transpose, Split, Slice or Reshape of a strided view as views that
  // read the input's bytes through strides (views.cc); false when the input's layout has inner
  // blocks.
  bool add_strided_view(const Node& node);
  // Gives `v` a view of buffer `of` (of the buffer `of` views, when it is a view) from byte
  // `offset` on, in `layout` (zero desc: plain); returns the view's buffer.
  int add_view_buffer(const Value* v, int of, size_t offset, const dnnl::memory::desc& layout);
  void plan_sum_fusion();
  // Offers `v` to release_ when it is a constant no step reads (see set_constant_release).
  void release_if_unread(const Value* v);

  dnnl::engine engine_;
  ref::KernelTable* kernels_;
  KernelFactory make_kernel_;
  uint64_t seed_;
  // Reorders made so far: (source buffer) -> [(layout, buffer)].
  std::unordered_map<int, std::vector<std::pair<dnnl::memory::desc, int>>> reorders_;
  std::unordered_set<int> viewed_;                             // buffers some view reads
  std::unordered_set<const Node*> done_;                       // nodes whose steps were added
  std::unordered_map<const Node*, const Node*> sum_partners_;  // Conv <-> Add, both ways
  ConvLayout conv_layout_ = ConvLayout::kAny;
  const Node* building_ = nullptr;      // the node build() is lowering
  bool one_thread_ = false;             // the whole program runs on one thread
  std::vector<const Value*> captures_;  // an If branch's reads of enclosing graphs
  size_t nested_slots_ = 0;
  ConstantRelease release_;
  std::unordered_set<const Value*> released_;  // constants offered to release_
};

// Lowers `node` (and the nodes it fuses with) to oneDNN steps when it can; false leaves the node to
// its ref step. Defined in dnnl_steps.cc.
Result<bool> lower_dnnl(ProgramBuilder& builder, const Node& node);
// Lowers an integer node (QLinearConv, ConvInteger, QLinearMatMul, MatMulInteger) or a
// QuantizeLinear / DequantizeLinear to oneDNN int8 steps when it can; may throw dnnl::error.
// Defined in quantized.cc.
bool lower_quantized(ProgramBuilder& builder, const Node& node);
// An If whose branches can be planned runs as one step that runs the program of the branch its
// condition picks over this program's buffers; false when a branch cannot be planned. Defined in
// control.cc.
Result<bool> lower_if(ProgramBuilder& builder, const Node& node);
// An LSTM on kiln's AVX-512 kernel (kernels/lstm.h), its weights packed at compile time; false
// where the kernel does not apply (peepholes, clip, other activations, ...). Defined in rnn.cc.
bool lower_lstm(ProgramBuilder& builder, const Node& node);
// ConvTranspose on oneDNN's deconvolution, weights packed, an eltwise tail fused; false where
// oneDNN cannot run it. Defined in conv_transpose.cc.
bool lower_conv_transpose(ProgramBuilder& builder, const Node& node);
// Resize on oneDNN's resampling, in its input's layout, where oneDNN's coordinates are ONNX's
// (linear half_pixel; nearest forms without ties); false otherwise. Defined in resize.cc.
bool lower_resize(ProgramBuilder& builder, const Node& node);
// A channel Concat whose every reader is an inference BatchNormalization (DenseNet's dense blocks)
// runs no step of its own: each reader's scale-shift pass reads the Concat's inputs where they
// are. lower_deferred_concat returns whether that applies (and then adds nothing);
// lower_concat_batch_norm lowers such a reader (and a Relu after it), false when it is none.
// Defined in concat.cc.
bool lower_deferred_concat(ProgramBuilder& builder, const Node& concat);
bool lower_concat_batch_norm(ProgramBuilder& builder, const Node& node);
// A channel Concat of a batch of one whose inputs are nChw16c with whole blocks: each input's
// bytes are one run of the output's, copied as they are (oneDNN's concat took 0.135 ms for
// SqueezeNet's two 256-channel 13x13 pieces). false where it does not apply.
bool lower_blocked_concat(ProgramBuilder& builder, const Node& concat);

}  // namespace kiln::compiler::cpu
