// SPDX-License-Identifier: Apache-2.0
// The operator interface, the per-sample random generator, and the operator registry.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "pipeline/kernels/gpu_images.h"
#include "pipeline/schema/schema.h"

namespace kiln::pipeline {

// A small deterministic generator (splitmix64): the same seed gives the same draws everywhere.
class SampleRng {
 public:
  explicit SampleRng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi).
  double uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53;
  }
  // Uniform integer in [lo, hi] (hi >= lo).
  int64_t uniform_int(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }

 private:
  uint64_t state_;
};

// Mixes values into one seed (order matters); used for per-sample, per-operator seeds.
uint64_t mix_seed(std::initializer_list<uint64_t> values);

// What an operator knows about the sample it processes.
struct SampleContext {
  uint64_t seed = 0;      // from (pipeline seed, epoch, sample position, operator index)
  std::string_view path;  // the sample's source file, for error messages
};

// One sample's share of a GPU operator's batch launch, planned on a CPU worker: what the kernel
// does to the image, and the shape and dtype it makes.
struct GpuSamplePlan {
  kernels::GpuStep step;
  Shape out_shape;
  DType out_dtype = DType::kU8;
};

// One configured operator instance. run() is called concurrently from several threads, so it
// must not modify the operator; all randomness comes from ctx.seed.
class Operator {
 public:
  explicit Operator(OpArgs args) : args_(std::move(args)) {}
  virtual ~Operator() = default;
  Operator(const Operator&) = delete;
  Operator& operator=(const Operator&) = delete;

  const OperatorSchema& schema() const { return args_.schema(); }
  // The validated arguments (static values).
  const OpArgs& args() const { return args_; }
  // True for readers, which the executor drives itself instead of calling run().
  virtual bool is_reader() const { return false; }

  // Processes one sample. `args` are this operator's arguments with the per-sample values of this
  // sample filled in; `inputs` match schema().inputs; `outputs` receives schema().outputs.
  // Errors name the operator and, for data errors, ctx.path.
  virtual Status run(const SampleContext& ctx, const OpArgs& args, std::span<const Tensor> inputs,
                     std::vector<Tensor>* outputs) const = 0;

  // The GPU form (device "gpu"), for operators of one image input and one image output. The
  // executor plans each sample on a CPU worker (plan_gpu: checks the sample, draws its random
  // values from ctx.seed as run() does, so both devices pick the same windows; `host` is the input
  // itself when a CPU operator made it, else null), then launches the whole batch at once
  // (run_gpu, `steps` in batch order). An operator that gpu_reads_host() gets the host inputs in
  // `host` instead of their upload in `images` (a decoder reads the encoded bytes).
  virtual bool supports_gpu() const { return false; }
  virtual bool gpu_reads_host() const { return false; }
  virtual Result<GpuSamplePlan> plan_gpu(const SampleContext& ctx, const OpArgs& args,
                                         const Shape& shape, DType dtype, const Tensor* host) const;
  virtual Result<kernels::GpuImages> run_gpu(kernels::GpuStream& stream,
                                             const kernels::GpuImages& images,
                                             std::span<const Tensor> host,
                                             std::span<const kernels::GpuStep> steps) const;

 private:
  OpArgs args_;
};

// A reader (readers.*): the executor drives it through its own reader classes, so run() is never
// called; calling it anyway is an internal error naming the operator.
class ReaderOperator final : public Operator {
 public:
  using Operator::Operator;
  bool is_reader() const override { return true; }
  Status run(const SampleContext& ctx, const OpArgs& args, std::span<const Tensor> inputs,
             std::vector<Tensor>* outputs) const override;
};

// The operators that have a GPU form (Operator::supports_gpu()).
std::span<const std::string_view> gpu_operator_names();

// Every operator's schema, in operator_list.inc order.
std::span<const OperatorSchema* const> operator_schemas();
// The schema named `name` ("decoders.image"), or nullptr.
const OperatorSchema* find_operator_schema(std::string_view name);
// Validates `args` against the schema of `name` and configures the operator. Errors name the
// operator and the argument.
Result<std::unique_ptr<Operator>> create_operator(std::string_view name, const ArgMap& args);

}  // namespace kiln::pipeline
