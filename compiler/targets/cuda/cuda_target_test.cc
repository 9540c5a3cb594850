// SPDX-License-Identifier: Apache-2.0
// The cuda target as a whole, against ref (fixed seeds): make_target without a GPU, the bundled
// model, device-resident arguments, the tuning kept in artifacts, concurrent runs of one program
// and input errors; every case skips where no GPU is present (CI), after checking that
// make_target says why.
#include "compiler/targets/cuda/cuda_target.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>

#include "compiler/artifact/artifact.h"
#include "compiler/onnx/importer.h"
#include "compiler/runtime/shape_profiles.h"
#include "compiler/targets/cuda/cuda_testing.h"
#include "compiler/targets/cuda/tuning.h"

namespace kiln::compiler {
namespace {

TEST(CudaTarget, MakeTargetSaysWhyWithoutAGpu) {
  auto target = make_target("cuda");
  if (have_gpu()) {
    ASSERT_TRUE(target.ok()) << target.status().to_string();
    EXPECT_EQ((*target)->name(), "cuda");
    return;
  }
  ASSERT_FALSE(target.ok());
  EXPECT_NE(target.status().message().find("no GPU was found"), std::string::npos)
      << target.status().to_string();
}

TEST(CudaTarget, TheBundledModelMatchesRef) {
  SKIP_WITHOUT_GPU();
  // The source tree, or the current folder where the binary runs from a copy of the repository
  // (the device machine).
  std::string path = std::string(KILN_SOURCE_DIR) + "/examples/models/tiny_cnn.onnx";
  if (!std::filesystem::exists(path)) path = "examples/models/tiny_cnn.onnx";
  auto load = [&]() -> std::shared_ptr<Graph> {
    ImportOptions options;
    options.default_dim_value = 3;  // the batch
    auto model = import_onnx_file(path, options);
    EXPECT_TRUE(model.ok()) << model.status().to_string();
    if (!model.ok()) return nullptr;
    return std::shared_ptr<Graph>(std::move((*model)->graph));
  };
  std::shared_ptr<Graph> graph = load();
  ASSERT_NE(graph, nullptr);
  std::vector<Tensor> inputs;
  uint32_t seed = 3;
  for (const Value* v : graph->inputs()) {
    inputs.push_back(random_tensor(v->tensor_type().shape(), seed++));
  }
  std::vector<Tensor> want = run(*compile_for(graph, "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(load(), "cuda");
  ASSERT_NE(exe, nullptr);
  const cuda::Program* program = cuda_program(*exe);
  ASSERT_NE(program, nullptr);
  EXPECT_GT(program->device_steps(), 0);
  expect_close(want, run(*exe, inputs), 1e-3f);
}

// relu(in0) compiled for `target`.
std::shared_ptr<Executable> relu_for(const std::vector<Tensor>& inputs, const char* target) {
  return compile_for(make_graph(inputs,
                                [](GraphBuilder& b, const std::vector<Value*>& in) {
                                  b.output(b.add(Op(ops::Relu{}), {in[0]}));
                                }),
                     target);
}

TEST(CudaTarget, HostTargetsSayTheyTakeNoDeviceArguments) {
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 3}, 70)};
  std::shared_ptr<Executable> exe = relu_for(inputs, "ref");
  ASSERT_NE(exe, nullptr);
  const Status s = exe->run_device({nullptr}, {nullptr});
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("runs on host memory"), std::string::npos) << s.to_string();
}

TEST(CudaTarget, DeviceResidentArgumentsGiveWhatHostTensorsGive) {
  SKIP_WITHOUT_GPU();
  const Tensor w = random_tensor(Shape{4, 3, 3, 3}, 71);
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 3, 8, 8}, 72),
                                      random_tensor(Shape{2, 4, 8, 8}, 73)};
  std::shared_ptr<Executable> exe = compile_for(
      make_graph(inputs,
                 [&](GraphBuilder& b, const std::vector<Value*>& in) {
                   ops::Conv op;
                   op.pads = std::vector<int64_t>{1, 1, 1, 1};
                   Value* y = b.add(Op(op), {in[0], b.constant(w, "w")});
                   b.output(b.add(Op(ops::Relu{}), {b.add(Op(ops::Add{}), {y, in[1]})}));
                   b.output(b.add(Op(ops::Sigmoid{}), {in[1]}));
                 }),
      "cuda");
  ASSERT_NE(exe, nullptr);
  const std::vector<Tensor> want = run(*exe, inputs);
  ASSERT_EQ(want.size(), 2u);
  std::vector<std::shared_ptr<void>> memory;
  std::vector<const void*> in;
  std::vector<void*> out;
  for (const Tensor& t : inputs) {
    auto p = gpu_alloc(t.nbytes());
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    ASSERT_TRUE(gpu_upload(p->get(), t.raw_data(), t.nbytes()).ok());
    in.push_back(p->get());
    memory.push_back(*p);
  }
  for (const Tensor& t : want) {
    auto p = gpu_alloc(t.nbytes());
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    out.push_back(p->get());
    memory.push_back(*p);
  }
  for (int round = 0; round < 3; ++round) {  // the first run captures the CUDA graph
    for (size_t i = 0; i < want.size(); ++i) {
      const std::vector<uint8_t> poison(want[i].nbytes(), 0xff);
      ASSERT_TRUE(gpu_upload(out[i], poison.data(), poison.size()).ok());
    }
    const Status ran = exe->run_device(in, out);
    ASSERT_TRUE(ran.ok()) << ran.to_string();
    for (size_t i = 0; i < want.size(); ++i) {
      Tensor got(want[i].dtype(), want[i].shape());
      ASSERT_TRUE(gpu_download(got.raw_data(), out[i], got.nbytes()).ok());
      expect_close({want[i]}, {got}, 0.0f);
    }
  }
  EXPECT_EQ(exe->run_device(in, {out[0]}).code(), StatusCode::kInvalidArgument);
}

// run_ranges reduces each output on the GPU (int8 calibration's max method): the extremes of what
// run() returns, for f32 and f16 outputs, NaNs left out, with a large output (several blocks).
TEST(CudaTarget, RunRangesAreTheExtremesOfTheOutputs) {
  SKIP_WITHOUT_GPU();
  Tensor x = scaled_random(Shape{8, 16, 40, 40}, 31, 5.0f);
  x.data<float>()[1234] = NAN;
  x.data<float>()[99999] = -41.5f;
  auto build = [](GraphBuilder& b, const std::vector<Value*>& in) {
    Value* r = b.add(Op(ops::Relu{}), {in[0]});
    b.output(b.add(Op(ops::Mul{}), {r, b.constant(Tensor::scalar(3.0f))}));
    b.output(cast_to(b, b.add(Op(ops::Neg{}), {in[0]}), DType::kF16));
  };
  std::shared_ptr<Executable> exe = compile_for(make_graph({x}, build), "cuda");
  ASSERT_NE(exe, nullptr);
  const std::vector<Tensor> out = run(*exe, {x});
  ASSERT_EQ(out.size(), 2u);
  Result<std::vector<OutputRange>> ranges = exe->run_ranges({Argument(x)});
  ASSERT_TRUE(ranges.ok()) << ranges.status().to_string();
  ASSERT_EQ(ranges->size(), 2u);
  for (size_t o = 0; o < 2; ++o) {
    SCOPED_TRACE(o);
    ASSERT_EQ(out[o].dtype(), o == 0 ? DType::kF32 : DType::kF16);
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < out[o].numel(); ++i) {
      const float v = o == 0 ? out[o].data<float>()[i] : static_cast<float>(out[o].data<Half>()[i]);
      if (std::isnan(v)) continue;
      lo = std::min(lo, static_cast<double>(v));
      hi = std::max(hi, static_cast<double>(v));
    }
    EXPECT_EQ((*ranges)[o].min, lo);
    EXPECT_EQ((*ranges)[o].max, hi);
    EXPECT_EQ((*ranges)[o].count, x.numel());
  }
  EXPECT_EQ((*ranges)[1].max, 41.5);
}

TEST(CudaTuning, EncodesAndDecodesAndRejectsDamage) {
  cuda::Tuning t;
  t.fingerprint = "GPU X; sm_90";
  t.choices["conv a"] = {1, 2, 3};
  t.choices["matmul b"] = std::vector<uint8_t>(64, 7);
  const std::vector<uint8_t> bytes = t.encode();
  auto back = cuda::Tuning::decode(bytes);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->fingerprint, t.fingerprint);
  EXPECT_EQ(back->choices, t.choices);
  for (size_t cut : {size_t{0}, size_t{3}, size_t{9}, bytes.size() - 1}) {
    auto bad = cuda::Tuning::decode(std::span<const uint8_t>(bytes.data(), cut));
    EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss) << cut;
  }
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_EQ(cuda::Tuning::decode(longer).status().code(), StatusCode::kDataLoss);
}

// A conv + Gemm graph: two tuned problems.
std::shared_ptr<Graph> tuned_graph(const std::vector<Tensor>& inputs) {
  const Tensor w = random_tensor(Shape{8, 3, 3, 3}, 80);
  const Tensor fc = random_tensor(Shape{8, 5}, 81);
  return make_graph(inputs, [&](GraphBuilder& b, const std::vector<Value*>& in) {
    ops::Conv op;
    op.pads = std::vector<int64_t>{1, 1, 1, 1};
    Value* y = b.add(Op(ops::Relu{}), {b.add(Op(op), {in[0], b.constant(w, "w")})});
    Value* g = b.add(Op(ops::Flatten{}), {b.add(Op(ops::GlobalAveragePool{}), {y})});
    b.output(b.add(Op(ops::Gemm{}), {g, b.constant(fc, "fc")}));
  });
}

// The bytes of the executable's one artifact section, its tuning.
std::vector<uint8_t> tuning_bytes(const Executable& exe) {
  const std::vector<TargetSection> sections = exe.artifact_sections();
  EXPECT_EQ(sections.size(), 1u);
  std::vector<uint8_t> bytes;
  if (sections.empty()) return bytes;
  EXPECT_EQ(sections[0].name, cuda::kTuningSection);
  for (std::span<const uint8_t> piece : sections[0].pieces) {
    bytes.insert(bytes.end(), piece.begin(), piece.end());
  }
  return bytes;
}

TEST(CudaTarget, ArtifactsKeepTheTuningAndLoadingReusesItOnTheSameGpu) {
  SKIP_WITHOUT_GPU();
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 3, 12, 12}, 82)};
  std::shared_ptr<Executable> exe = compile_for(tuned_graph(inputs), "cuda");
  ASSERT_NE(exe, nullptr);
  const std::vector<uint8_t> data = tuning_bytes(*exe);
  auto tuning = cuda::Tuning::decode(data);
  ASSERT_TRUE(tuning.ok()) << tuning.status().to_string();
  EXPECT_EQ(tuning->fingerprint, cuda::gpu_fingerprint());
  EXPECT_EQ(tuning->choices.size(), 2u);  // the convolution and the Gemm

  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("kiln_cuda_tuning_" + std::to_string(::getpid()));
  ArtifactSource source;
  source.name = "tuned.onnx";
  ASSERT_TRUE(save_artifact(file.string(), *exe, {}, source).ok());
  auto loaded = load_artifact(file.string());
  std::filesystem::remove(file);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  // The same choices, taken from the file: nothing measured again, the same results.
  EXPECT_EQ(tuning_bytes(*loaded->executable), data);
  expect_close(run(*exe, inputs), run(*loaded->executable, inputs), 0.0f);

  // Tuning from another GPU (or library version) is measured again, not trusted.
  cuda::Tuning other = *tuning;
  other.fingerprint = "another GPU";
  for (auto& [key, value] : other.choices) std::fill(value.begin(), value.end(), 0xff);
  auto target = make_target("cuda");
  ASSERT_TRUE(target.ok());
  const std::vector<uint8_t> other_bytes = other.encode();
  auto stored = std::make_shared<LoadedSections>();
  stored->sections.emplace_back(cuda::kTuningSection, other_bytes);
  CompileOptions options;
  options.loaded = stored;
  auto retuned = compile(tuned_graph(inputs), **target, options);
  ASSERT_TRUE(retuned.ok()) << retuned.status().to_string();
  auto retuned_tuning = cuda::Tuning::decode(tuning_bytes(**retuned));
  ASSERT_TRUE(retuned_tuning.ok());
  EXPECT_EQ(retuned_tuning->fingerprint, cuda::gpu_fingerprint());
  std::shared_ptr<Executable> ref = compile_for(tuned_graph(inputs), "ref");
  expect_close(run(*ref, inputs), run(**retuned, inputs));
}

TEST(CudaTarget, ConcurrentRunsGiveEachCallerItsOwnResult) {
  SKIP_WITHOUT_GPU();
  const Tensor w = random_tensor(Shape{8, 3, 3, 3}, 50);
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    ops::Conv op;
    op.pads = std::vector<int64_t>{1, 1, 1, 1};
    Value* y = b.add(Op(ops::Relu{}), {b.add(Op(op), {in[0], b.constant(w, "w")})});
    b.output(b.add(Op(ops::GlobalAveragePool{}), {y}));
  };
  const std::vector<Tensor> shape_only = {random_tensor(Shape{2, 3, 16, 16}, 0)};
  std::shared_ptr<Executable> ref = compile_for(make_graph(shape_only, build), "ref");
  std::shared_ptr<Executable> exe = compile_for(make_graph(shape_only, build), "cuda");
  ASSERT_NE(exe, nullptr);
  constexpr int kThreads = 4;
  std::vector<std::vector<Tensor>> inputs(kThreads);
  std::vector<std::vector<Tensor>> want(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    inputs[t] = {random_tensor(Shape{2, 3, 16, 16}, 100 + static_cast<uint32_t>(t))};
    want[t] = run(*ref, inputs[t]);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 10; ++r) expect_close(want[t], run(*exe, inputs[t]));
    });
  }
  for (std::thread& t : threads) t.join();
}

// Each GPU compiles its own executable (use_device before compiling); any thread may run either,
// whatever its current GPU, and the thread's current GPU is left as it was.
TEST(CudaTarget, ExecutablesRunOnTheGpuTheyWereCompiledFor) {
  SKIP_WITHOUT_GPU();
  const int gpus = device_count("cuda");
  ASSERT_GE(gpus, 1);
  Result<int> none = use_device("cuda", gpus);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find(fmt::format("there is no GPU {}", gpus)),
            std::string::npos)
      << none.status().to_string();
  const std::vector<Tensor> inputs = {random_tensor(Shape{4, 33}, 71)};
  const std::vector<Tensor> want = run(*relu_for(inputs, "ref"), inputs);
  std::vector<std::shared_ptr<Executable>> per_gpu;
  for (int g = 0; g < gpus; ++g) {
    Result<int> before = use_device("cuda", g);
    ASSERT_TRUE(before.ok()) << before.status().to_string();
    per_gpu.push_back(relu_for(inputs, "cuda"));
    ASSERT_NE(per_gpu.back(), nullptr);
    ASSERT_TRUE(use_device("cuda", *before).ok());
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 2 * gpus; ++t) {
    threads.emplace_back([&, t] {
      const int mine = (t + 1) % gpus;  // the thread's GPU differs from the executable's
      ASSERT_TRUE(use_device("cuda", mine).ok());
      for (int r = 0; r < 5; ++r) expect_close(want, run(*per_gpu[t % gpus], inputs));
      int current = -1;
      cudaGetDevice(&current);
      EXPECT_EQ(current, mine);
    });
  }
  for (std::thread& t : threads) t.join();
  per_gpu.clear();  // sessions freed on their own GPUs
}

// An input in host_tensor()'s page-locked memory is copied from where it is; the results are
// those of a plain tensor, and the buffer may be refilled for the next run.
TEST(CudaTarget, PageLockedHostInputsGiveWhatPlainTensorsGive) {
  SKIP_WITHOUT_GPU();
  const std::vector<Tensor> inputs = {random_tensor(Shape{64, 1024}, 72)};  // 256 KiB
  std::shared_ptr<Executable> exe = relu_for(inputs, "cuda");
  ASSERT_NE(exe, nullptr);
  Result<Tensor> pinned = exe->host_tensor(DType::kF32, Shape{64, 1024});
  ASSERT_TRUE(pinned.ok()) << pinned.status().to_string();
  cudaPointerAttributes a{};
  ASSERT_EQ(cudaPointerGetAttributes(&a, pinned->raw_data()), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeHost);
  for (uint32_t round = 0; round < 3; ++round) {
    const std::vector<Tensor> fresh = {random_tensor(Shape{64, 1024}, 80 + round)};
    std::memcpy(pinned->raw_data(), fresh[0].raw_data(), fresh[0].nbytes());
    expect_close(run(*exe, fresh), run(*exe, {*pinned}), 0.0f);
  }
}

TEST(CudaTarget, DynamicBatchCompilesOnePlannedProgramPerShape) {
  SKIP_WITHOUT_GPU();
  // A symbolic batch: each batch size seen runs as a program of its own on the GPU, not on the
  // host interpreter.
  auto graph = std::make_shared<Graph>("dynamic");
  GraphBuilder b(*graph);
  Value* x = b.input("x", TensorType(DType::kF32, {Dim::symbolic("n"), Dim(3), Dim(8), Dim(8)}));
  ops::Conv conv;
  conv.pads = std::vector<int64_t>{1, 1, 1, 1};
  Value* c = b.add(Op(conv), {x, b.constant(random_tensor(Shape{16, 3, 3, 3}, 80), "w")}, "conv");
  Value* h = b.add(Op(ops::Relu{}), {c}, "relu");
  ops::Flatten flatten;
  b.output(b.add(Op(flatten), {b.add(Op(ops::GlobalAveragePool{}), {h}, "gap")}, "flat"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  std::shared_ptr<Executable> ref = compile_for(graph, "ref");
  std::shared_ptr<Executable> exe = compile_for(graph, "cuda");
  ASSERT_NE(exe, nullptr);
  EXPECT_EQ(cuda_program(*exe), nullptr) << "the dynamic graph itself has no single program";
  const ShapeProfiles* profiles = cuda_shape_profiles(*exe);
  ASSERT_NE(profiles, nullptr);
  for (int64_t batch : {2, 5, 2}) {
    const std::vector<Tensor> in = {random_tensor(Shape{batch, 3, 8, 8}, 90 + batch)};
    std::vector<Tensor> got = run(*exe, in);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].shape(), (Shape{batch, 16}));
    expect_close(run(*ref, in), got);
  }
  EXPECT_EQ(profiles->size(), 2u);
  EXPECT_EQ(profiles->compilations(), 2u) << "a shape seen before is not compiled again";
  // Each profile is a planned program with its steps on the device.
  RunProfile profile;
  auto out = exe->run_profiled({Argument(random_tensor(Shape{5, 3, 8, 8}, 99))}, profile);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_FALSE(profile.steps.empty());
  for (const StepTime& s : profile.steps) EXPECT_EQ(s.runs_on, "cuda") << s.kind;
}

TEST(CudaTarget, WrongInputShapeIsAClearError) {
  SKIP_WITHOUT_GPU();
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 3}, 1)};
  std::shared_ptr<Executable> exe = relu_for(inputs, "cuda");
  ASSERT_NE(exe, nullptr);
  std::vector<Argument> args;
  args.emplace_back(random_tensor(Shape{3, 3}, 2));
  auto out = exe->run(std::move(args));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("in0"), std::string::npos) << out.status().to_string();
}

}  // namespace
}  // namespace kiln::compiler
