// SPDX-License-Identifier: Apache-2.0
// If on the cpu target: each branch is a program of its own, planned like the graph it is in, and
// one step runs the branch the condition picks over the enclosing program's buffers (Silero VAD's
// sample-rate If, a wake-word head's threshold If) instead of the whole graph going to the
// interpreter.
#include <fmt/format.h>

#include <array>
#include <span>
#include <unordered_set>

#include "compiler/ops/all_ops.h"
#include "compiler/targets/cpu/builder.h"

namespace kiln::compiler::cpu {

namespace {

// Whether `g` is `root` or a graph nested in it.
bool inside(const Graph* g, const Graph* root) {
  for (; g != nullptr; g = g->parent()) {
    if (g == root) return true;
  }
  return false;
}

// The values of enclosing graphs that `graph` (and the graphs nested in it) reads, in the order
// of their first use; `root` is the branch whose captures they are.
void collect_captures(const Graph& graph, const Graph& root, std::vector<const Value*>& captures,
                      std::unordered_set<const Value*>& seen) {
  auto visit = [&](const Value* v) {
    if (v != nullptr && !inside(v->graph(), &root) && seen.insert(v).second) captures.push_back(v);
  };
  for (const auto& node : graph.nodes()) {
    for (const Value* v : node->inputs()) visit(v);
    for (const Graph* sub : node->op().subgraphs()) collect_captures(*sub, root, captures, seen);
  }
  for (const Value* v : graph.outputs()) visit(v);
}

bool static_tensor(const Value* v) {
  return v->type().is_tensor() && v->tensor_type().is_static() &&
         v->tensor_type().dtype != DType::kString;
}

// Runs the program of the branch the condition picks; its steps are the profile's entries.
class IfStep final : public Step {
 public:
  struct Branch {
    std::unique_ptr<Program> program;
    std::vector<int> inputs;  // the enclosing program's buffer of each of its inputs
  };

  IfStep(int cond, Branch then_branch, Branch else_branch, std::vector<int> outputs, size_t slot)
      : cond_(cond),
        then_(std::move(then_branch)),
        else_(std::move(else_branch)),
        outputs_(std::move(outputs)),
        slot_(slot) {}

  Status run(StepContext& ctx) const override {
    const bool taken = *static_cast<const uint8_t*>(ctx.data[static_cast<size_t>(cond_)]) != 0;
    const Branch& branch = taken ? then_ : else_;
    if (branch.program == nullptr) {
      ctx.fallback = true;
      return unavailable_error(fmt::format(
          "{}: the {} branch was not planned (it does not type-check for the shapes compiled)",
          node->describe(), taken ? "then" : "else"));
    }
    const size_t slot = slot_ + (taken ? 0 : 1);
    if (ctx.nested.size() <= slot) ctx.nested.resize(slot + 1);
    if (ctx.nested[slot] == nullptr) {
      KILN_ASSIGN_OR_RETURN(ctx.nested[slot], branch.program->new_session());
    }
    // At most a handful of each: on the stack, so that a run allocates nothing here.
    constexpr size_t kInline = 16;
    std::array<void*, kInline> in_inline{};
    std::array<void*, kInline> out_inline{};
    std::vector<void*> in_heap;
    std::vector<void*> out_heap;
    std::span<void*> in(in_inline.data(), branch.inputs.size());
    std::span<void*> out(out_inline.data(), outputs_.size());
    if (branch.inputs.size() > kInline) {
      in_heap.resize(branch.inputs.size());
      in = in_heap;
    }
    if (outputs_.size() > kInline) {
      out_heap.resize(outputs_.size());
      out = out_heap;
    }
    for (size_t i = 0; i < branch.inputs.size(); ++i) {
      in[i] = ctx.data[static_cast<size_t>(branch.inputs[i])];
    }
    for (size_t i = 0; i < outputs_.size(); ++i) {
      out[i] = ctx.data[static_cast<size_t>(outputs_[i])];
    }
    Status ran = branch.program->run_into(*ctx.nested[slot], in, out, ctx.profile);
    if (ctx.nested[slot]->ctx.fallback) {
      ctx.nested[slot]->ctx.fallback = false;
      ctx.fallback = true;
    }
    return ran;
  }
  bool profiles_itself() const override { return true; }

 private:
  int cond_;
  Branch then_;
  Branch else_;
  std::vector<int> outputs_;
  size_t slot_;
};

}  // namespace

Result<bool> lower_if(ProgramBuilder& b, const Node& node) {
  const auto& op = node.attrs<ops::If>();
  const Value* cond = node.input(0);
  if (!static_tensor(cond) || cond->tensor_type().dtype != DType::kBool ||
      cond->tensor_type().shape().numel() != 1 || !op.then_branch || !op.else_branch) {
    return false;
  }
  IfStep::Branch branches[2];
  std::vector<int> reads = {b.buffer_of(cond)};
  for (int i = 0; i < 2; ++i) {
    const Graph& graph = i == 0 ? *op.then_branch : *op.else_branch;
    if (graph.outputs().size() != static_cast<size_t>(node.num_outputs())) return false;
    bool typed = true;
    for (int k = 0; k < node.num_outputs(); ++k) {
      const Value* out = graph.outputs()[static_cast<size_t>(k)];
      typed &= static_tensor(out) && out->tensor_type() == node.output(k)->tensor_type();
    }
    std::vector<const Value*> captures;
    std::unordered_set<const Value*> seen;
    collect_captures(graph, graph, captures, seen);
    for (const Value* v : captures) typed &= static_tensor(v) && b.has_buffer(v);
    if (!typed) continue;  // runs on the interpreter, should it be taken
    KILN_ASSIGN_OR_RETURN(branches[i].program, b.build_branch(graph, captures));
    // A branch that cannot be planned (it does not type-check for these shapes) runs on the
    // interpreter, should it be taken.
    if (branches[i].program == nullptr) continue;
    for (const Value* v : captures) {
      // Constants are read where they are; the others in plain layout.
      const int id = v->constant_value() != nullptr ? b.buffer_of(v) : b.plain(v);
      branches[i].inputs.push_back(id);
      reads.push_back(id);
    }
  }
  if (branches[0].program == nullptr && branches[1].program == nullptr) return false;
  std::vector<int> outputs;
  for (const Value* v : node.outputs()) outputs.push_back(b.define(v, dnnl::memory::desc()));
  auto step = std::make_unique<IfStep>(b.buffer_of(cond), std::move(branches[0]),
                                       std::move(branches[1]), outputs, b.take_nested_slots(2));
  step->node = &node;
  step->kind = "If";
  step->reads = std::move(reads);
  step->writes = std::move(outputs);
  b.add_step(std::move(step));
  return true;
}

}  // namespace kiln::compiler::cpu
