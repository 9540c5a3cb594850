// SPDX-License-Identifier: Apache-2.0
// Elementwise, pooling, softmax and normalization ops on the cuda target against ref (fixed
// seeds), in f32 and in the graphs of the fp16/bf16 conversion; every case skips where no GPU is
// present.
#include <unistd.h>

#include <limits>

#include "compiler/targets/cuda/cuda_testing.h"

namespace kiln::compiler {
namespace {

TEST(CudaTarget, ElementwiseWithBroadcastingMatchesRef) {
  SKIP_WITHOUT_GPU();
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 3, 4, 5}, 1),
                                      random_tensor(Shape{3, 1, 5}, 2)};
  auto steps = expect_cuda_matches_ref(inputs, [](GraphBuilder& b, const std::vector<Value*>& in) {
    Value* s = b.add(Op(ops::Add{}), {in[0], in[1]});
    Value* m = b.add(Op(ops::Mul{}), {s, in[1]});
    Value* d = b.add(Op(ops::Sub{}), {m, in[0]});
    Value* t = b.add(Op(ops::Tanh{}), {d});
    Value* r = b.add(Op(ops::Relu{}), {b.add(Op(ops::Sigmoid{}), {t})});
    ops::LeakyRelu leaky;
    leaky.alpha = 0.3f;
    b.output(b.add(Op(leaky), {b.add(Op(ops::Div{}), {r, b.add(Op(ops::Exp{}), {in[1]})})}));
  });
  EXPECT_EQ(steps.first, steps.second);
}

TEST(CudaTarget, PoolSoftmaxNormalizationAndDataMovementMatchRef) {
  SKIP_WITHOUT_GPU();
  const Tensor scale = random_tensor(Shape{4}, 40);
  const Tensor shift = random_tensor(Shape{4}, 41);
  const Tensor mean = random_tensor(Shape{4}, 42);
  Tensor var = random_tensor(Shape{4}, 43);
  for (float& v : var.span<float>()) v = std::abs(v) + 0.5f;
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 4, 9, 11}, 44)};
  auto steps = expect_cuda_matches_ref(inputs, [&](GraphBuilder& b, const std::vector<Value*>& in) {
    ops::BatchNormalization bn;
    Value* x = b.add(
        Op(bn), {in[0], b.constant(scale), b.constant(shift), b.constant(mean), b.constant(var)});
    ops::MaxPool mp;
    mp.kernel_shape = std::vector<int64_t>{3, 3};
    mp.strides = std::vector<int64_t>{2, 2};
    mp.pads = std::vector<int64_t>{1, 1, 1, 1};
    b.output(b.add(Op(mp), {x}));
    ops::AveragePool ap;
    ap.kernel_shape = std::vector<int64_t>{2, 3};
    ap.pads = std::vector<int64_t>{1, 0, 1, 1};
    ap.count_include_pad = 1;
    b.output(b.add(Op(ap), {x}));
    b.output(b.add(Op(ops::GlobalAveragePool{}), {x}));
    ops::Concat cat;
    cat.axis = 1;
    Value* c = b.add(Op(cat), {x, in[0]});
    ops::Transpose tr;
    tr.perm = std::vector<int64_t>{0, 2, 3, 1};
    Value* t = b.add(Op(tr), {c});
    b.output(b.add(Op(ops::Softmax{}), {t}));
    b.output(b.add(Op(ops::Sinh{}), {t}));  // no device kernel: runs on the host
  });
  EXPECT_EQ(steps.second - steps.first, 1);
}

// The graphs that quantize_fp16/bf16 make: f32 at the edges (Casts), f16/bf16 between, with f32
// accumulation inside. cuda in f16 and bf16 against ref in f32, within their precision.
TEST(CudaTarget, HalfPrecisionGraphsMatchRefInF32) {
  SKIP_WITHOUT_GPU();
  const Tensor w1 = random_tensor(Shape{8, 3, 3, 3}, 50);
  const Tensor b1 = random_tensor(Shape{8}, 51);
  const Tensor dw = random_tensor(Shape{8, 1, 3, 3}, 52);
  const Tensor scale = random_tensor(Shape{8}, 53);
  const Tensor shift = random_tensor(Shape{8}, 54);
  const Tensor mean = random_tensor(Shape{8}, 55);
  Tensor var = random_tensor(Shape{8}, 56);
  for (float& v : var.span<float>()) v = std::abs(v) + 0.5f;
  const Tensor fc = random_tensor(Shape{8, 16}, 57);
  const Tensor fc_bias = random_tensor(Shape{16}, 58);
  const std::vector<Tensor> inputs = {random_tensor(Shape{4, 3, 16, 16}, 59),
                                      random_tensor(Shape{2, 3, 8, 32}, 60),
                                      random_tensor(Shape{2, 3, 32, 8}, 61)};
  auto build_in = [&](DType dt) {
    return [&, dt](GraphBuilder& b, const std::vector<Value*>& in) {
      auto cast = [&](Value* v, DType to) { return dt == DType::kF32 ? v : cast_to(b, v, to); };
      auto k = [&](const Tensor& t) { return b.constant(in_dtype(t, dt)); };
      ops::Conv conv;
      conv.pads = std::vector<int64_t>{1, 1, 1, 1};
      Value* x = b.add(Op(ops::Relu{}), {b.add(Op(conv), {cast(in[0], dt), k(w1), k(b1)})});
      ops::Conv depthwise;
      depthwise.group = 8;
      depthwise.pads = std::vector<int64_t>{1, 1, 1, 1};
      Value* d = b.add(Op(depthwise), {x, k(dw)});
      Value* n = b.add(Op(ops::BatchNormalization{}), {d, k(scale), k(shift), k(mean), k(var)});
      Value* r = b.add(Op(ops::Relu{}), {b.add(Op(ops::Add{}), {n, x})});
      ops::MaxPool mp;
      mp.kernel_shape = std::vector<int64_t>{2, 2};
      mp.strides = std::vector<int64_t>{2, 2};
      b.output(cast(b.add(Op(mp), {r}), DType::kF32));
      ops::Flatten flat;
      Value* g = b.add(Op(flat), {b.add(Op(ops::GlobalAveragePool{}), {r})});
      Value* logits = b.add(Op(ops::Gemm{}), {g, k(fc), k(fc_bias)});
      b.output(cast(b.add(Op(ops::Softmax{}), {logits}), DType::kF32));
      // Attention-shaped: batched MatMul, Transpose, Sigmoid.
      Value* scores = b.add(Op(ops::MatMul{}), {cast(in[1], dt), cast(in[2], dt)});
      ops::Transpose tr;
      tr.perm = std::vector<int64_t>{0, 2, 1, 3};
      b.output(cast(b.add(Op(ops::Sigmoid{}), {b.add(Op(tr), {scores})}), DType::kF32));
    };
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build_in(DType::kF32)), "ref");
  ASSERT_NE(ref, nullptr);
  const std::vector<Tensor> want = run(*ref, inputs);
  // NHWC (the default for f16/bf16 convolutions) and NCHW; then fp32 forced NHWC.
  for (const char* layout : {"nhwc", "nchw"}) {
    ::setenv("KILN_CUDA_LAYOUT", layout, 1);
    const bool nhwc = std::string(layout) == "nhwc";
    for (const DType dt : {DType::kF16, DType::kBF16, DType::kF32}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + layout);
      std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build_in(dt)), "cuda");
      ASSERT_NE(exe, nullptr);
      // bf16 keeps 8 bits of mantissa, f16 11: 2^-7 and 2^-10 per rounding, a few roundings deep.
      const float tolerance = dt == DType::kF16 ? 1e-2f : dt == DType::kBF16 ? 6e-2f : 1e-4f;
      expect_close(want, run(*exe, inputs), tolerance);
      const cuda::Program* program = cuda_program(*exe);
      ASSERT_NE(program, nullptr);
      EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()))
          << "every step on the device";
      if (dt != DType::kF32) {
        EXPECT_GE(program->count_steps("Cast"), 4);
      }
      // NHWC: the input goes channels last once (its 3 channels padded to 8 for tensor cores in
      // the same step: "Pad channels"), the pooled output comes back once; the global pool reads
      // NHWC directly. (fp32 and bf16 may find no NHWC algorithm for a convolution and run it
      // NCHW, with more reorders: only f16's count is fixed.)
      if (dt == DType::kF16 || !nhwc) {
        // (Or none: the own kernel reads the image as it is, where tuning measured it faster.)
        const int into_nhwc =
            program->count_steps("Reorder NCHW>NHWC") + program->count_steps("Pad channels");
        if (nhwc) {
          EXPECT_LE(into_nhwc, 1);
        } else {
          EXPECT_EQ(into_nhwc, 0);
        }
        EXPECT_EQ(program->count_steps("Reorder NHWC>NCHW"), nhwc ? 1 : 0);
      }
    }
  }
  ::unsetenv("KILN_CUDA_LAYOUT");
}

// Softmax and LayerNormalization rows of every width the one-warp-a-row kernels take (1 to 32
// elements a lane, a partial last one) and past them (the block-a-row kernels), LogSoftmax, and the
// scaling by a constant scalar (Mul either way round, Div), in f32 and f16, against ref in f32.
TEST(CudaTarget, RowKernelsAndScalarScalingMatchRef) {
  SKIP_WITHOUT_GPU();
  const std::vector<int64_t> widths = {5, 32, 33, 100, 197, 300, 512, 768, 1000, 1024, 1500};
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < widths.size(); ++i) {
    Tensor t = random_tensor(Shape{3, 2, widths[i]}, 110 + static_cast<uint32_t>(i));
    for (float& v : t.span<float>()) v *= 4.0f;
    inputs.push_back(std::move(t));
  }
  auto build = [&](DType dt) {
    return [&, dt](GraphBuilder& b, const std::vector<Value*>& in) {
      auto cast = [&](Value* v, DType to) { return dt == DType::kF32 ? v : cast_to(b, v, to); };
      auto scalar = [&](float v) { return b.constant(in_dtype(Tensor::scalar<float>(v), dt)); };
      for (size_t i = 0; i < in.size(); ++i) {
        const Tensor scale = random_tensor(Shape{widths[i]}, 130 + static_cast<uint32_t>(i));
        const Tensor bias = random_tensor(Shape{widths[i]}, 150 + static_cast<uint32_t>(i));
        Value* x = cast(in[i], dt);
        b.output(cast(b.add(Op(ops::Softmax{}), {x}), DType::kF32));
        b.output(cast(b.add(Op(ops::LayerNormalization{}),
                            {x, b.constant(in_dtype(scale, dt)), b.constant(in_dtype(bias, dt))}),
                      DType::kF32));
        if (i % 3 == 0) b.output(cast(b.add(Op(ops::LogSoftmax{}), {x}), DType::kF32));
        Value* scaled =
            b.add(Op(ops::Mul{}), {scalar(0.5f), b.add(Op(ops::Mul{}), {x, scalar(3)})});
        b.output(cast(b.add(Op(ops::Div{}), {scaled, scalar(4)}), DType::kF32));
      }
    };
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build(DType::kF32)), "ref");
  ASSERT_NE(ref, nullptr);
  const std::vector<Tensor> want = run(*ref, inputs);
  for (const DType dt : {DType::kF32, DType::kF16}) {
    SCOPED_TRACE(dtype_name(dt));
    std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build(dt)), "cuda");
    ASSERT_NE(exe, nullptr);
    expect_close(want, run(*exe, inputs), dt == DType::kF16 ? 1e-2f : 1e-4f);
    const cuda::Program* program = cuda_program(*exe);
    ASSERT_NE(program, nullptr);
    EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()))
        << "every step on the device";
  }
}

// A row or window of nothing but -inf (an attention row masked whole) has the maximum -inf, as
// ONNX and ref say: with -FLT_MAX as the identity, the ONNX 1.23 attention tests' guard
// Where(ReduceMax(mask) == -inf, 0, Softmax(...)) missed the masked rows and let NaN through.
TEST(CudaTarget, MaximaOfRowsOfMinusInfinityAreMinusInfinity) {
  SKIP_WITHOUT_GPU();
  const float inf = std::numeric_limits<float>::infinity();
  Tensor rows = random_tensor(Shape{4, 40}, 170);
  for (int64_t j = 0; j < 40; ++j) rows.span<float>()[j] = -inf;      // row 0
  for (int64_t j = 40; j < 80; j += 2) rows.span<float>()[j] = -inf;  // row 1 half
  Tensor maps = random_tensor(Shape{1, 3, 4, 4}, 171);
  for (int64_t j = 0; j < 16; ++j) maps.span<float>()[j] = -inf;  // channel 0
  const std::vector<Tensor> inputs = {rows, maps};
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    ops::ReduceMax reduce;
    reduce.axes = std::vector<int64_t>{-1};
    Value* row_max = b.add(Op(reduce), {in[0]});
    b.output(row_max);
    Value* masked = b.add(Op(ops::Equal{}), {row_max, b.constant(Tensor::scalar<float>(-inf))});
    Value* soft = b.add(Op(ops::Softmax{}), {in[0]});
    b.output(b.add(Op(ops::Where{}), {masked, b.constant(Tensor::scalar<float>(0.0f)), soft}));
    b.output(b.add(Op(ops::GlobalMaxPool{}), {in[1]}));
    ops::MaxPool pool;
    pool.kernel_shape = std::vector<int64_t>{2, 2};
    pool.strides = std::vector<int64_t>{2, 2};
    b.output(b.add(Op(pool), {in[1]}));
  };
  std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build), "cuda");
  ASSERT_NE(exe, nullptr);
  const std::vector<Tensor> got = run(*exe, inputs);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].span<float>()[0], -inf) << "ReduceMax of a row of -inf";
  EXPECT_TRUE(std::isfinite(got[0].span<float>()[1]));
  for (int64_t j = 0; j < 40; ++j) EXPECT_EQ(got[1].span<float>()[j], 0.0f) << "masked row " << j;
  for (int64_t j = 40; j < 160; ++j) EXPECT_TRUE(std::isfinite(got[1].span<float>()[j])) << j;
  EXPECT_EQ(got[2].span<float>()[0], -inf) << "GlobalMaxPool of a channel of -inf";
  for (int64_t j = 0; j < 4; ++j)
    EXPECT_EQ(got[3].span<float>()[j], -inf) << "MaxPool window " << j;
  std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build), "ref");
  ASSERT_NE(ref, nullptr);
  const std::vector<Tensor> want = run(*ref, inputs);
  for (size_t o = 0; o < want.size(); ++o) {
    const auto w = want[o].span<float>();
    const auto g = got[o].span<float>();
    for (size_t i = 0; i < w.size(); ++i) {
      EXPECT_TRUE(w[i] == g[i] || std::fabs(w[i] - g[i]) <= 1e-5f) << o << " " << i;
    }
  }
}

}  // namespace
}  // namespace kiln::compiler
