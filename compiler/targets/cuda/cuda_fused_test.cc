// SPDX-License-Identifier: Apache-2.0
// Kernels generated through NVRTC on the cuda target against ref (fixed seeds): elementwise
// chains, and chains read by a row op or a Transpose; every case skips where no GPU is present.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "compiler/targets/cuda/cuda_testing.h"

namespace kiln::compiler {
namespace {

// KILN_CUDA_NVRTC=1: a chain of elementwise ops (an input read twice, a scalar constant, a Unary
// with an attribute) runs as one generated kernel, in f32 and between f16 Casts, matching ref.
TEST(CudaTarget, ElementwiseChainsRunAsOneNvrtcKernel) {
  SKIP_WITHOUT_GPU();
  ::setenv("KILN_CUDA_NVRTC", "1", 1);
  const std::string cache = testing::TempDir() + "kiln_nvrtc_chain_cache";
  ::setenv("KILN_CACHE_DIR", cache.c_str(), 1);
  for (int64_t pixels : {int64_t{8}, int64_t{7}}) {  // n = 240: 8 elements a thread; 210: one
    const std::vector<Tensor> inputs = {random_tensor(Shape{2, 3, pixels, 5}, 70),
                                        random_tensor(Shape{2, 3, pixels, 5}, 71)};
    for (DType dt : {DType::kF32, DType::kF16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " pixels " + std::to_string(pixels));
      std::shared_ptr<Executable> ref, exe;
      for (const char* target : {"ref", "cuda"}) {
        const DType g = std::string(target) == "ref" ? DType::kF32 : dt;  // ref in f32
        auto graph = make_graph(inputs, [&](GraphBuilder& b, const std::vector<Value*>& in) {
          auto cast = [&](Value* v, DType to) { return g == DType::kF32 ? v : cast_to(b, v, to); };
          Value* x = cast(in[0], g);
          Value* two = b.constant(in_dtype(Tensor::scalar(2.0f), g));
          Value* v = b.add(Op(ops::Mul{}), {x, two});
          v = b.add(Op(ops::Add{}), {v, cast(in[1], g)});
          v = b.add(Op(ops::Tanh{}), {v});
          ops::LeakyRelu leaky;
          leaky.alpha = 0.2f;
          v = b.add(Op(leaky), {v});
          v = b.add(Op(ops::Sub{}), {x, v});
          b.output(cast(v, DType::kF32));
        });
        (std::string(target) == "ref" ? ref : exe) = compile_for(std::move(graph), target);
      }
      ASSERT_NE(ref, nullptr);
      ASSERT_NE(exe, nullptr);
      expect_close(run(*ref, inputs), run(*exe, inputs), dt == DType::kF32 ? 1e-5f : 1e-2f);
      const cuda::Program* program = cuda_program(*exe);
      ASSERT_NE(program, nullptr);
      EXPECT_EQ(steps_starting(*program, "Fused elementwise"), 1);
      if (dt == DType::kF32) {
        EXPECT_EQ(program->steps().size(), 1u);
      }
    }
  }
  ::unsetenv("KILN_CUDA_NVRTC");
  ::unsetenv("KILN_CACHE_DIR");
  std::filesystem::remove_all(cache);
}

// A chain of f16 or bf16 ops fused into one generated kernel gives, bit for bit, what the ops run
// one by one give (KILN_CUDA_NVRTC=0): each op's value is rounded to the element type, as ONNX
// stores every op's output, not carried in f32 to the chain's end. The same for a Softmax whose
// input is an Add and a Mul (the prologue) and whose output is scaled (the epilogue), within one
// ulp (the row kernels sum in another order), the Softmax in f32 between Casts.
TEST(CudaTarget, HalfChainsRoundEveryOpLikeTheOpsOneByOne) {
  SKIP_WITHOUT_GPU();
  const std::string cache = testing::TempDir() + "kiln_nvrtc_round_cache";
  ::setenv("KILN_CACHE_DIR", cache.c_str(), 1);
  const std::vector<Tensor> inputs = {random_tensor(Shape{4, 3, 8, 40}, 72),
                                      random_tensor(Shape{4, 3, 8, 40}, 73)};
  for (bool rows : {false, true}) {
    for (DType dt : {DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (rows ? " softmax" : " chain"));
      std::vector<std::vector<Tensor>> outs;
      for (const char* nvrtc : {"1", "0"}) {
        ::setenv("KILN_CUDA_NVRTC", nvrtc, 1);
        auto graph = make_graph(inputs, [&](GraphBuilder& b, const std::vector<Value*>& in) {
          Value* x = cast_to(b, in[0], dt);
          Value* y = cast_to(b, in[1], dt);
          Value* third = b.constant(in_dtype(Tensor::scalar(0.3333f), dt));
          Value* v = b.add(Op(ops::Mul{}), {x, third});
          v = b.add(Op(ops::Add{}), {v, y});
          if (rows) {
            // In f32 between Casts, as quantize_fp16 leaves a Softmax.
            ops::Softmax softmax;
            softmax.axis = -1;
            v = cast_to(b, b.add(Op(softmax), {cast_to(b, v, DType::kF32)}), dt);
            v = b.add(Op(ops::Mul{}), {v, third});
          } else {
            v = b.add(Op(ops::Tanh{}), {v});
            v = b.add(Op(ops::Sub{}), {x, v});
            v = b.add(Op(ops::Mul{}), {v, v});
          }
          b.output(cast_to(b, v, DType::kF32));
        });
        std::shared_ptr<Executable> exe = compile_for(std::move(graph), "cuda");
        ASSERT_NE(exe, nullptr);
        const cuda::Program* program = cuda_program(*exe);
        ASSERT_NE(program, nullptr);
        // "Fused elementwise", or the row kernel named by its ops ("Mul+Add+Softmax").
        int fused = steps_starting(*program, "Fused");
        for (const auto& step : program->steps()) {
          fused += step->kind.find("Add+Softmax") != std::string::npos;
        }
        EXPECT_EQ(fused > 0, std::string(nvrtc) == "1") << fused << " fused steps";
        outs.push_back(run(*exe, inputs));
      }
      const Tensor& fused = outs[0][0];
      const Tensor& apart = outs[1][0];
      const float ulp = dt == DType::kBF16 ? 1.0f / 128 : 1.0f / 1024;  // at magnitude 1
      int64_t differ = 0;
      for (int64_t i = 0; i < fused.numel(); ++i) {
        const float a = fused.data<float>()[i], e = apart.data<float>()[i];
        if (a != e) ++differ;
        ASSERT_LE(std::fabs(a - e), rows ? ulp * std::max(1.0f, std::fabs(e)) : 0.0f) << i;
      }
      if (!rows) {
        EXPECT_EQ(differ, 0);
      }
    }
  }
  ::unsetenv("KILN_CUDA_NVRTC");
  ::unsetenv("KILN_CACHE_DIR");
  std::filesystem::remove_all(cache);
}

// One case of the NVRTC row and transpose fusions: a graph of the inputs in `dt` (f32 at its edges,
// Casts around the row ops in f16 as quantize_fp16 leaves them), the fused step it must give.
struct FusedCase {
  std::string name;
  std::vector<Tensor> inputs;
  std::function<void(GraphBuilder&, const std::vector<Value*>&, DType)> build;
  std::string step;  // the one fused step expected
  int steps;         // the cuda program's steps in f32
};

// Helpers for FusedCase graphs in `dt`.
struct InDtype {
  GraphBuilder& b;
  DType dt;
  Value* cast(Value* v, DType to) const { return dt == DType::kF32 ? v : cast_to(b, v, to); }
  Value* scalar(float v) const { return b.constant(in_dtype(Tensor::scalar<float>(v), dt)); }
  // The graph's inputs in dt, all cast before any other node, so that every op finds its
  // operands computed.
  std::vector<Value*> inputs(const std::vector<Value*>& in) const {
    std::vector<Value*> out;
    for (Value* v : in) out.push_back(cast(v, dt));
    return out;
  }
  // `op` on `v` in f32 (between Casts when dt is a half type), extra inputs `more`.
  Value* in_f32(Op op, Value* v, std::vector<Value*> more = {}) const {
    std::vector<Value*> args = {cast(v, DType::kF32)};
    args.insert(args.end(), more.begin(), more.end());
    return cast(b.add(std::move(op), args), dt);
  }
};

std::vector<FusedCase> fused_cases() {
  const Tensor gamma = random_tensor(Shape{96}, 180);
  const Tensor beta = random_tensor(Shape{96}, 181);
  auto layernorm = [=](const InDtype& h, Value* x) {
    return h.in_f32(Op(ops::LayerNormalization{}), x, {h.b.constant(gamma), h.b.constant(beta)});
  };
  std::vector<FusedCase> cases;
  // 96 columns, and ViT-B's 768 (f16 rows in 16-byte chunks), the LayerNorm's own scale and bias.
  for (int64_t cols : {int64_t{96}, int64_t{768}}) {
    const std::string wide = cols == 96 ? "" : "_" + std::to_string(cols);
    const Tensor g = random_tensor(Shape{cols}, 192), bt = random_tensor(Shape{cols}, 193);
    auto norm = [=](const InDtype& h, Value* x) {
      return h.in_f32(Op(ops::LayerNormalization{}), x, {h.b.constant(g), h.b.constant(bt)});
    };
    // A transformer's residual Add before LayerNorm.
    cases.push_back({"add_layernorm" + wide,
                     {random_tensor(Shape{2, 5, cols}, 182), random_tensor(Shape{2, 5, cols}, 183)},
                     [=](GraphBuilder& b, const std::vector<Value*>& graph_in, DType dt) {
                       InDtype h{b, dt};
                       const std::vector<Value*> in = h.inputs(graph_in);
                       Value* sum = b.add(Op(ops::Add{}), {in[0], in[1]});
                       b.output(h.cast(norm(h, sum), DType::kF32));
                     },
                     "Add+LayerNormalization",
                     1});
    // Pre-LN ViT: the residual sum also feeds the next residual Add (and a Neg): the kernel's
    // second output. (Not a Cast of the sum as an output: in f16 it would be the same node as
    // LayerNorm's Cast to f32, which then has two readers and is not fused.)
    cases.push_back({"add_layernorm_sum_read_too" + wide,
                     {random_tensor(Shape{3, 7, cols}, 184), random_tensor(Shape{3, 7, cols}, 185)},
                     [=](GraphBuilder& b, const std::vector<Value*>& graph_in, DType dt) {
                       InDtype h{b, dt};
                       const std::vector<Value*> in = h.inputs(graph_in);
                       Value* sum = b.add(Op(ops::Add{}), {in[0], in[1]});
                       Value* ln = norm(h, sum);
                       b.output(h.cast(b.add(Op(ops::Add{}), {sum, ln}), DType::kF32));
                       b.output(h.cast(b.add(Op(ops::Neg{}), {sum}), DType::kF32));
                     },
                     "Add+LayerNormalization",
                     3});
  }
  // Attention scores scaled and masked (the mask broadcast over heads and rows), then Softmax.
  {
    Tensor mask = random_tensor(Shape{2, 1, 1, 40}, 186);
    for (float& v : mask.span<float>()) v = v > 0.5f ? -30.0f : 0.0f;
    cases.push_back({"mul_mask_softmax",
                     {random_tensor(Shape{2, 3, 6, 40}, 187), mask},
                     [=](GraphBuilder& b, const std::vector<Value*>& graph_in, DType dt) {
                       InDtype h{b, dt};
                       const std::vector<Value*> in = h.inputs(graph_in);
                       Value* s = b.add(Op(ops::Mul{}), {in[0], h.scalar(2.5f)});
                       s = b.add(Op(ops::Add{}), {s, in[1]});
                       b.output(h.cast(h.in_f32(Op(ops::Softmax{}), s), DType::kF32));
                     },
                     "Mul+Add+Softmax",
                     1});
  }
  // A mean over the last axis of a sum, wide rows (several warps a row).
  cases.push_back({"add_reducemean",
                   {random_tensor(Shape{4, 3, 1500}, 188), random_tensor(Shape{1500}, 189)},
                   [=](GraphBuilder& b, const std::vector<Value*>& graph_in, DType dt) {
                     InDtype h{b, dt};
                     const std::vector<Value*> in = h.inputs(graph_in);
                     Value* sum = b.add(Op(ops::Add{}), {in[0], in[1]});
                     ops::ReduceMean mean;
                     mean.axes = std::vector<int64_t>{-1};
                     b.output(h.cast(h.in_f32(Op(mean), sum), DType::kF32));
                   },
                   "Add+ReduceMean",
                   1});
  // LayerNorm with a chain after it (epilogue): scaled and offset by another input.
  cases.push_back({"layernorm_mul_add",
                   {random_tensor(Shape{6, 96}, 190), random_tensor(Shape{6, 96}, 191)},
                   [=](GraphBuilder& b, const std::vector<Value*>& graph_in, DType dt) {
                     InDtype h{b, dt};
                     const std::vector<Value*> in = h.inputs(graph_in);
                     Value* ln = layernorm(h, in[0]);
                     Value* y = b.add(Op(ops::Mul{}), {ln, h.scalar(0.5f)});
                     y = b.add(Op(ops::Add{}), {y, in[1]});
                     b.output(h.cast(y, DType::kF32));
                   },
                   "LayerNormalization+Mul+Add",
                   1});
  // A chain written transposed, and a transpose read by a chain.
  cases.push_back({"chain_transpose",
                   {random_tensor(Shape{2, 9, 24}, 192), random_tensor(Shape{9, 24}, 193)},
                   [=](GraphBuilder& b, const std::vector<Value*>& graph_in, DType dt) {
                     InDtype h{b, dt};
                     const std::vector<Value*> in = h.inputs(graph_in);
                     Value* v = b.add(Op(ops::Add{}), {in[0], in[1]});
                     v = b.add(Op(ops::Tanh{}), {v});
                     ops::Transpose t;
                     t.perm = std::vector<int64_t>{0, 2, 1};
                     b.output(h.cast(b.add(Op(t), {v}), DType::kF32));
                   },
                   "Add+Tanh+Transpose",
                   1});
  cases.push_back({"transpose_chain",
                   {random_tensor(Shape{2, 9, 24}, 194), random_tensor(Shape{24, 1, 9}, 195)},
                   [=](GraphBuilder& b, const std::vector<Value*>& graph_in, DType dt) {
                     InDtype h{b, dt};
                     const std::vector<Value*> in = h.inputs(graph_in);
                     ops::Transpose t;
                     t.perm = std::vector<int64_t>{2, 0, 1};
                     Value* v = b.add(Op(t), {in[0]});
                     v = b.add(Op(ops::Mul{}), {v, in[1]});
                     b.output(h.cast(b.add(Op(ops::Sigmoid{}), {v}), DType::kF32));
                   },
                   "Transpose+Mul+Sigmoid",
                   1});
  return cases;
}

// KILN_CUDA_NVRTC=1: elementwise chains before a row op (LayerNorm, Softmax, ReduceMean) or after
// one, and before or after a Transpose, run inside one generated kernel, in f32 and f16 (ref in
// f32); with KILN_CUDA_NVRTC=0 the same graphs run unfused (ReduceMean on the host) and match too.
TEST(CudaTarget, ChainsFuseIntoRowKernelsAndTransposes) {
  SKIP_WITHOUT_GPU();
  const std::string cache = testing::TempDir() + "kiln_nvrtc_rows_cache";
  ::setenv("KILN_CACHE_DIR", cache.c_str(), 1);
  for (const FusedCase& c : fused_cases()) {
    std::shared_ptr<Executable> ref = compile_for(
        make_graph(c.inputs, [&](GraphBuilder& b,
                                 const std::vector<Value*>& in) { c.build(b, in, DType::kF32); }),
        "ref");
    ASSERT_NE(ref, nullptr) << c.name;
    const std::vector<Tensor> want = run(*ref, c.inputs);
    for (const char* nvrtc : {"1", "0"}) {
      ::setenv("KILN_CUDA_NVRTC", nvrtc, 1);
      for (DType dt : {DType::kF32, DType::kF16}) {
        SCOPED_TRACE(c.name + " " + std::string(dtype_name(dt)) + " KILN_CUDA_NVRTC=" + nvrtc);
        std::shared_ptr<Executable> exe = compile_for(
            make_graph(c.inputs,
                       [&](GraphBuilder& b, const std::vector<Value*>& in) { c.build(b, in, dt); }),
            "cuda");
        ASSERT_NE(exe, nullptr);
        expect_close(want, run(*exe, c.inputs), dt == DType::kF32 ? 1e-4f : 1e-2f);
        const cuda::Program* program = cuda_program(*exe);
        ASSERT_NE(program, nullptr);
        const bool fused = std::string(nvrtc) == "1";
        EXPECT_EQ(program->count_steps(c.step), fused ? 1 : 0);
        if (fused) {
          EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
        }
        if (fused && dt == DType::kF32) {
          EXPECT_EQ(static_cast<int>(program->steps().size()), c.steps);
        }
      }
    }
  }
  ::unsetenv("KILN_CUDA_NVRTC");
  ::unsetenv("KILN_CACHE_DIR");
  std::filesystem::remove_all(cache);
}

}  // namespace
}  // namespace kiln::compiler
