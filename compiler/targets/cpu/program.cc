// SPDX-License-Identifier: Apache-2.0
// Running a Program: sessions (arena, stream, memories), steps in order, profiles.
#include "compiler/targets/cpu/program.h"

#include <fmt/format.h>
#include <omp.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/rewrite.h"
#include "compiler/targets/cpu/conv_gate.h"
#include "compiler/targets/cpu/onednn.h"
#include "compiler/targets/ref/kernel.h"
#include "core/huge_pages.h"
#include "core/logging.h"

namespace kiln::compiler::cpu {

namespace {

using runtime::byte_size;
using runtime::RefSlot;

}  // namespace

bool is_row_major(const dnnl::memory::desc& layout) {
  if (layout.is_zero()) return true;
  const dnnl_memory_desc_t& md = layout.data;
  if (md.format_kind != dnnl_blocked || md.format_desc.blocking.inner_nblks != 0 ||
      md.offset0 != 0) {
    return false;
  }
  // Strides of size-1 dims do not matter: any value addresses the same elements.
  dnnl::memory::dim stride = 1;
  for (int i = md.ndims; i-- > 0;) {
    if (md.padded_dims[i] != md.dims[i]) return false;
    if (md.dims[i] != 1 && md.format_desc.blocking.strides[i] != stride) return false;
    stride *= md.dims[i];
  }
  return true;
}

bool Buffer::is_plain() const {
  return is_row_major(layout);
}

// ---- PrimitiveStep ----

PrimitiveStep::PrimitiveStep(dnnl::engine engine, dnnl::primitive primitive, std::vector<Arg> args,
                             std::optional<Prefill> prefill)
    : engine_(std::move(engine)),
      primitive_(std::move(primitive)),
      args_(std::move(args)),
      prefill_(std::move(prefill)) {}

namespace {

// `m` pointing at `data`, made on first use.
void point(dnnl::memory& m, const dnnl::memory::desc& layout, const dnnl::engine& engine,
           void* data) {
  if (!m) {
    m = dnnl::memory(layout, engine, data);
  } else if (m.get_data_handle() != data) {
    m.set_data_handle(data);
  }
}

}  // namespace

Status PrimitiveStep::run(StepContext& ctx) const {
  StepContext::Memories& mem = ctx.memories[ctx.step];
  std::unordered_map<int, dnnl::memory>& args = mem.args;
  for (const Arg& a : args_) {
    if (a.buffer < 0) {
      if (args.count(a.arg) == 0) args.emplace(a.arg, a.fixed);
    } else {
      point(args[a.arg], a.layout, engine_, ctx.data[static_cast<size_t>(a.buffer)]);
    }
  }
  if (prefill_) {
    point(mem.prefill_from, prefill_->from_layout, engine_,
          ctx.data[static_cast<size_t>(prefill_->from)]);
    prefill_->reorder.execute(*ctx.stream, mem.prefill_from, args.at(DNNL_ARG_DST));
  }
  primitive_.execute(*ctx.stream, args);
  return Status();
}

// ---- Program ----

Program::Program(dnnl::engine engine, std::vector<Buffer> buffers,
                 std::vector<std::unique_ptr<Step>> steps, std::vector<int> outputs,
                 MemoryPlan plan, uint64_t seed, int dnnl_nodes, bool one_thread)
    : PlannedProgram(std::move(buffers), std::move(steps), std::move(outputs), std::move(plan)),
      engine_(std::move(engine)),
      seed_(seed),
      dnnl_nodes_(dnnl_nodes),
      one_thread_(one_thread) {}

Result<std::unique_ptr<Session>> Program::new_session(bool own_arena) const {
  auto session = std::make_unique<Session>();
  if (own_arena && plan_.arena_bytes != 0) {
    // On huge pages where it spans them (core/huge_pages.h), as the weights are.
    void* p = alloc_huge_aligned(kArenaAlignment, plan_.arena_bytes);
    if (p == nullptr) {
      return resource_exhausted_error(
          fmt::format("cpu target: cannot allocate the {} MiB scratch arena of a session",
                      plan_.arena_bytes >> 20));
    }
    session->arena = std::unique_ptr<uint8_t, void (*)(void*)>(static_cast<uint8_t*>(p), std::free);
    populate_pages(p, plan_.arena_bytes);  // every run writes it
  }
  try {
    session->stream = std::make_unique<dnnl::stream>(engine_);
  } catch (const dnnl::error& e) {
    return internal_error(fmt::format("cpu target: cannot make a oneDNN stream: {}", e.what()));
  }
  session->ctx.data.assign(buffers_.size(), nullptr);
  session->ctx.memories.resize(steps_.size());
  session->ctx.stream = session->stream.get();
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const Buffer& b = buffers_[i];
    if (b.kind == Buffer::Kind::kConstant) session->ctx.data[i] = const_cast<void*>(b.constant);
  }
  if (session->arena) bind_arena(*session, session->arena.get());
  return session;
}

void Program::bind_arena(Session& session, uint8_t* arena) const {
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (buffers_[i].kind == Buffer::Kind::kArena) session.ctx.data[i] = arena + plan_.offsets[i];
  }
}

Result<std::vector<Argument>> Program::run(Session& session, std::vector<Argument> inputs,
                                           RunProfile* profile) const {
  // Each output gets a tensor of its own, except one that is an input (returned as it is) or
  // another output's buffer (the same value listed twice: its tensor is shared).
  const size_t n = outputs_.size();
  std::vector<Tensor> tensors(n);
  std::vector<void*> out(n, nullptr);
  for (size_t i = 0; i < n; ++i) {
    const Buffer& b = buffers_[static_cast<size_t>(outputs_[i])];
    if (b.kind == Buffer::Kind::kInput ||
        (b.kind == Buffer::Kind::kOutput && static_cast<size_t>(b.index) != i)) {
      continue;
    }
    Result<Tensor> t = Tensor::allocate(b.dtype, b.shape);
    if (!t.ok()) return t.status().with_context("cpu target: allocating an output");
    tensors[i] = std::move(t).value();
    out[i] = tensors[i].raw_data();
  }
  std::vector<void*> in(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) in[i] = inputs[i].tensor().raw_data();
  if (profile != nullptr) profile->steps.clear();
  KILN_RETURN_IF_ERROR(run_into(session, in, out, profile));
  std::vector<Argument> results;
  results.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const Buffer& b = buffers_[static_cast<size_t>(outputs_[i])];
    if (b.kind == Buffer::Kind::kInput) {
      results.push_back(inputs[static_cast<size_t>(b.index)]);
    } else if (b.kind == Buffer::Kind::kOutput && static_cast<size_t>(b.index) != i) {
      results.emplace_back(tensors[static_cast<size_t>(b.index)]);
    } else {
      results.emplace_back(std::move(tensors[i]));
    }
  }
  return results;
}

Status Program::run_into(Session& session, std::span<void* const> inputs,
                         std::span<void* const> outputs, RunProfile* profile) const {
  StepContext& ctx = session.ctx;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const Buffer& b = buffers_[i];
    if (b.kind == Buffer::Kind::kInput) {
      ctx.data[i] = inputs[static_cast<size_t>(b.index)];
    } else if (b.kind == Buffer::Kind::kOutput) {
      ctx.data[i] = outputs[static_cast<size_t>(b.index)];
    }
  }
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const Buffer& b = buffers_[i];
    if (b.kind == Buffer::Kind::kView) {
      ctx.data[i] = static_cast<uint8_t*>(ctx.data[static_cast<size_t>(b.view_of)]) + b.offset;
    }
  }
  ref::Interpreter interpreter(seed_);
  ctx.interpreter = &interpreter;
  ctx.profile = profile;
  // A program on one thread sets the team once; others for each step that runs on one.
  const TeamOfOne whole(one_thread_);
  for (size_t i = 0; i < steps_.size(); ++i) {
    const std::unique_ptr<Step>& step = steps_[i];
    ctx.step = i;
    const auto start = std::chrono::steady_clock::now();
    Status s;
    try {
      const TeamOfOne team(step->one_thread && !one_thread_);
      s = step->run(ctx);
    } catch (const dnnl::error& e) {
      return internal_error(fmt::format("{}: oneDNN failed in {}: {} (status {})",
                                        step->node->describe(), step->kind, e.what(),
                                        static_cast<int>(e.status)));
    }
    if (!s.ok()) return s;
    if (profile != nullptr && !step->profiles_itself()) {
      session.stream->wait();
      const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
      profile->steps.push_back({step->node->describe(), step->kind, ms.count(), step->runs_on()});
    }
  }
  session.stream->wait();
  // Outputs not written in place: an input, a constant, a view or an arena buffer.
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const int id = outputs_[i];
    const void* from = ctx.data[static_cast<size_t>(id)];
    const size_t bytes = buffers_[static_cast<size_t>(id)].bytes;
    if (outputs[i] != nullptr && outputs[i] != from && bytes != 0) {
      std::memcpy(outputs[i], from, bytes);
    }
  }
  return Status();
}

void add_arg_buffers(Step& step, const std::vector<PrimitiveStep::Arg>& args) {
  for (const PrimitiveStep::Arg& a : args) {
    if (a.buffer < 0) continue;
    if (a.arg == DNNL_ARG_DST || a.arg == DNNL_ARG_SCRATCHPAD) {
      step.writes.push_back(a.buffer);
    } else {
      step.reads.push_back(a.buffer);
    }
  }
}

}  // namespace kiln::compiler::cpu
