// SPDX-License-Identifier: Apache-2.0
#include "compiler/targets/cpu/node_program.h"

#include <fmt/format.h>

#include <cstdlib>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compiler/runtime/session_pool.h"
#include "compiler/targets/cpu/builder.h"
#include "compiler/targets/ref/kernel.h"
#include "core/huge_pages.h"

namespace kiln::compiler::cpu {

namespace {

// Whether `v` is a tensor of static shape holding numbers (not strings).
bool static_tensor(const Value* v) {
  return v->type().is_tensor() && v->tensor_type().is_static() &&
         v->tensor_type().dtype != DType::kString;
}

// A thread's scratch memory for node programs' arenas, grown to the largest asked for.
class Scratch {
 public:
  Result<uint8_t*> at_least(size_t bytes) {
    if (bytes <= bytes_) return data_.get();
    data_.reset(static_cast<uint8_t*>(alloc_huge_aligned(kArenaAlignment, bytes)));
    bytes_ = data_ != nullptr ? bytes : 0;
    if (data_ == nullptr) {
      return resource_exhausted_error(
          fmt::format("cpu target: cannot allocate {} MiB of scratch for a node", bytes >> 20));
    }
    return data_.get();
  }

 private:
  std::unique_ptr<uint8_t, void (*)(void*)> data_{nullptr, std::free};
  size_t bytes_ = 0;
};

class NodeProgramKernel final : public ref::NodeKernel {
 public:
  // Graph input j of `graph` is input `inputs[j]` of the node.
  NodeProgramKernel(std::unique_ptr<Graph> graph, std::vector<int> inputs,
                    std::unique_ptr<Program> program)
      : graph_(std::move(graph)), inputs_(std::move(inputs)), program_(std::move(program)) {}

  Status run(ref::KernelContext& ctx) const override {
    // Inputs of other shapes than compiled (the interpreter infers shapes as it goes): the node's
    // ref kernel runs them.
    std::vector<void*> in(inputs_.size());
    for (size_t j = 0; j < inputs_.size(); ++j) {
      const int i = inputs_[j];
      const TensorType& want = graph_->inputs()[j]->tensor_type();
      if (!ctx.has_input(i) || !ctx.input_arg(i).is_tensor()) return ref::run_node(ctx.node(), ctx);
      const Tensor& t = ctx.input(i);
      if (t.dtype() != want.dtype || t.shape() != want.shape()) {
        return ref::run_node(ctx.node(), ctx);
      }
      in[j] = const_cast<void*>(t.raw_data());
    }
    std::vector<void*> out(static_cast<size_t>(ctx.num_outputs()));
    for (int o = 0; o < ctx.num_outputs(); ++o) {
      const TensorType& want = graph_->outputs()[static_cast<size_t>(o)]->tensor_type();
      Tensor& t = ctx.output(o);
      if (t.dtype() != want.dtype || t.shape() != want.shape()) {
        return ref::run_node(ctx.node(), ctx);
      }
      out[static_cast<size_t>(o)] = t.raw_data();
    }
    // The interpreter runs one node at a time on a thread: every node program's arena is the
    // thread's scratch, so that the nodes' sessions (streams, oneDNN memories) stay made without
    // each holding its own arena.
    thread_local Scratch scratch;
    KILN_ASSIGN_OR_RETURN(uint8_t * arena, scratch.at_least(program_->arena_bytes()));
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, sessions_.take());
    program_->bind_arena(*session, arena);
    Status s = program_->run_into(*session, in, out, nullptr);
    sessions_.give_back(std::move(session));
    return s;
  }

 private:
  std::unique_ptr<Graph> graph_;  // the node alone, which the program's steps name
  std::vector<int> inputs_;
  std::unique_ptr<Program> program_;
  SessionPool<Session> sessions_{[p = program_.get()] { return p->new_session(false); }};
};

}  // namespace

std::unique_ptr<ref::NodeKernel> make_node_kernel(const Node& node, const dnnl::engine& engine,
                                                  uint64_t seed) {
  if (!node.op().subgraphs().empty() || node.num_outputs() == 0) return nullptr;
  for (const Value* v : node.inputs()) {
    if (v != nullptr && !static_tensor(v)) return nullptr;
  }
  for (const Value* v : node.outputs()) {
    if (!static_tensor(v)) return nullptr;
  }
  // The node alone: its constant inputs as constants (sharing their storage, so packing them
  // releases what it would have), the others as graph inputs, its outputs as the graph's.
  auto graph = std::make_unique<Graph>("node");
  std::unordered_map<const Value*, Value*> mapped;
  std::vector<int> inputs;
  std::vector<Value*> args;
  for (int i = 0; i < node.num_inputs(); ++i) {
    const Value* v = node.input(i);
    if (v == nullptr) {
      args.push_back(nullptr);
      continue;
    }
    auto [it, fresh] = mapped.emplace(v, nullptr);
    if (fresh) {
      if (const Tensor* c = v->constant_value()) {
        it->second = graph->add_constant(*c, v->name());
      } else {
        it->second = graph->add_input(v->name(), v->type());
        inputs.push_back(i);
      }
    }
    args.push_back(it->second);
  }
  Node* copy = graph->add_node(node.op(), std::move(args), node.num_outputs(), node.name());
  for (int o = 0; o < node.num_outputs(); ++o) {
    copy->output(o)->set_name(node.output(o)->name());
    copy->output(o)->set_type(node.output(o)->type());
    graph->add_output(copy->output(o));
  }
  ProgramBuilder builder(*graph, engine, nullptr, nullptr, seed);
  Result<std::unique_ptr<Program>> program = builder.build();
  if (!program.ok() || *program == nullptr || (*program)->dnnl_nodes() == 0) return nullptr;
  return std::make_unique<NodeProgramKernel>(std::move(graph), std::move(inputs),
                                             std::move(program).value());
}

}  // namespace kiln::compiler::cpu
