// SPDX-License-Identifier: Apache-2.0
// Transformer pieces and fused attention on the cuda target against ref (fixed seeds): the
// attention forms torch exports, planned and run as one step; every case skips where no GPU is
// present.
#include "compiler/targets/cuda/cuda_testing.h"

namespace kiln::compiler {
namespace {

// The transformer pieces: LayerNormalization, Split, Slice (steps, negative indices), Gather of
// one index (ViT's class token), Expand; in f32, and LayerNormalization in f16 too.
TEST(CudaTarget, TransformerPiecesMatchRef) {
  SKIP_WITHOUT_GPU();
  const Tensor scale = random_tensor(Shape{8}, 90);
  const Tensor bias = random_tensor(Shape{8}, 91);
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 6, 8}, 92),
                                      random_tensor(Shape{3, 1, 4}, 93)};
  auto i64 = [](std::vector<int64_t> v) {
    return Tensor::from_vector<int64_t>(v, Shape{static_cast<int64_t>(v.size())});
  };
  auto build = [&](DType dt) {
    return [&, dt](GraphBuilder& b, const std::vector<Value*>& in) {
      auto cast = [&](Value* v, DType to) { return dt == DType::kF32 ? v : cast_to(b, v, to); };
      Value* x = cast(in[0], dt);
      b.output(cast(b.add(Op(ops::LayerNormalization{}),
                          {x, b.constant(in_dtype(scale, dt)), b.constant(in_dtype(bias, dt))}),
                    DType::kF32));
      ops::Split split;
      split.axis = 2;
      for (Value* part : b.add(Op(split), {in[0], b.constant(i64({3, 5}))}, 2)) b.output(part);
      b.output(b.add(Op(ops::Slice{}), {in[0], b.constant(i64({1, -1})), b.constant(i64({5, 0})),
                                        b.constant(i64({1, 2})), b.constant(i64({2, -3}))}));
      ops::Gather gather;
      gather.axis = 1;
      b.output(b.add(Op(gather), {in[0], b.constant(Tensor::scalar<int64_t>(-6))}));
      b.output(b.add(Op(ops::Expand{}), {in[1], b.constant(i64({2, 3, 5, 4}))}));
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

// An encoder layer as exported from PyTorch and converted to f16 by quantize_fp16 (LayerNorm,
// Softmax and Erf between Casts to f32 and back): Linear layers as MatMul + bias Add, attention
// as batched MatMuls of transposed heads with the scores scaled by a Mul, the exact GELU as
// Div/Erf/Add/Mul/Mul, the block's residual Add after the second Linear. In f32 and f16 against ref
// in f32; every step on the device, the bias Adds, the residual Add and the scaling inside the
// matmuls, the GELU one step, and in f16 no Cast but the graph's edges.
TEST(CudaTarget, EncoderLayerRunsFusedOnTheDevice) {
  SKIP_WITHOUT_GPU();
  const Tensor gamma = scaled_random(Shape{32}, 100, 1.0f);
  const Tensor beta = scaled_random(Shape{32}, 101, 1.0f);
  const Tensor w_in = scaled_random(Shape{32, 64}, 102, 0.3f);
  const Tensor b_in = scaled_random(Shape{64}, 103, 0.5f);
  const Tensor w_out = scaled_random(Shape{64, 32}, 104, 0.3f);
  const Tensor b_out = scaled_random(Shape{32}, 105, 0.5f);
  const std::vector<Tensor> inputs = {scaled_random(Shape{2, 16, 32}, 106, 2.0f)};
  auto i64 = [](std::vector<int64_t> v) {
    return Tensor::from_vector<int64_t>(v, Shape{static_cast<int64_t>(v.size())});
  };
  auto build = [&](DType dt) {
    return [&, dt](GraphBuilder& b, const std::vector<Value*>& in) {
      const bool half = dt != DType::kF32;
      auto cast = [&](Value* v, DType to) { return half ? cast_to(b, v, to) : v; };
      auto k = [&](const Tensor& t) { return b.constant(in_dtype(t, dt)); };
      auto scalar = [&](float v) { return k(Tensor::scalar<float>(v)); };
      // What quantize_fp16 leaves around the ops it keeps in f32.
      auto in_f32 = [&](Op op, Value* v, std::vector<Value*> more = {}) {
        std::vector<Value*> args = {cast(v, DType::kF32)};
        args.insert(args.end(), more.begin(), more.end());
        return cast(b.add(std::move(op), args), dt);
      };
      Value* x = cast(in[0], dt);
      Value* ln = in_f32(Op(ops::LayerNormalization{}), x, {b.constant(gamma), b.constant(beta)});
      // The bias constants come after their MatMuls, as the exporter and the fp16 conversion
      // leave them.
      Value* h_mm = b.add(Op(ops::MatMul{}), {ln, k(w_in)});
      Value* h = b.add(Op(ops::Add{}), {k(b_in), h_mm});
      ops::Reshape heads;
      Value* split = b.add(Op(heads), {h, b.constant(i64({2, 16, 4, 16}))});
      ops::Transpose tq;
      tq.perm = std::vector<int64_t>{0, 2, 1, 3};
      ops::Transpose tk;
      tk.perm = std::vector<int64_t>{0, 2, 3, 1};
      Value* q = b.add(Op(tq), {split});
      Value* scores = b.add(Op(ops::Mul{}),
                            {b.add(Op(ops::MatMul{}), {q, b.add(Op(tk), {split})}), scalar(0.25f)});
      Value* p = in_f32(Op(ops::Softmax{}), scores);
      Value* ctx = b.add(Op(tq), {b.add(Op(ops::MatMul{}), {p, q})});
      Value* merged = b.add(Op(heads), {ctx, b.constant(i64({2, 16, 64}))});
      Value* erf = in_f32(Op(ops::Erf{}), b.add(Op(ops::Div{}), {merged, scalar(1.4142135f)}));
      Value* gelu = b.add(
          Op(ops::Mul{}),
          {b.add(Op(ops::Mul{}), {merged, b.add(Op(ops::Add{}), {erf, scalar(1)})}), scalar(0.5f)});
      Value* y_mm = b.add(Op(ops::MatMul{}), {gelu, k(w_out)});
      Value* y = b.add(Op(ops::Add{}), {k(b_out), y_mm});
      b.output(cast(b.add(Op(ops::Add{}), {y, x}), DType::kF32));
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
    EXPECT_EQ(program->count_steps("MatMul+Bias"), 1);
    EXPECT_EQ(program->count_steps("MatMul+Bias+Residual"), 1);
    EXPECT_EQ(program->count_steps("MatMul+Scale"), 1);
    EXPECT_EQ(program->count_steps("Gelu"), 1);
    EXPECT_EQ(program->count_steps("Softmax"), 1);
    EXPECT_EQ(program->count_steps("LayerNormalization"), 1);
    EXPECT_EQ(program->count_steps("Add"), 0) << "every Add inside a matmul";
    EXPECT_EQ(program->count_steps("Cast"), dt == DType::kF32 ? 0 : 2) << "the graph's edges";
  }
}

// Attention subgraphs as torch exports them: `kBert` (Split, heads transposed, scores scaled after
// the MatMul), `kSdpa` (torch 2.x's MultiheadAttention: [S, B, 3E] unflattened, one 5-D Transpose,
// Gather, heads through [S, B*H, D], q and kᵀ each scaled by a Mul), `kBmm` (torch 1.x's: 3-D
// batches of B*H heads, q scaled before the MatMul), `kMasked` (kBert with an additive mask) and
// `kProjected` (kSdpa as MultiheadAttention runs it: batch-first x transposed, the QKV projection,
// and after it the output projection, back to [S, B, E] and transposed to batch first).
enum class AttentionForm { kBert, kSdpa, kBmm, kMasked, kProjected };
constexpr int64_t kAttnB = 2, kAttnH = 3, kAttnD = 64, kAttnE = kAttnH * kAttnD;

// The inputs of attention_graph: the QKV projection's output (and the mask).
std::vector<Tensor> attention_inputs(AttentionForm form, int64_t seq) {
  const bool seq_first = form == AttentionForm::kSdpa || form == AttentionForm::kBmm;
  const int64_t width = form == AttentionForm::kProjected ? kAttnE : 3 * kAttnE;
  Tensor x = random_tensor(seq_first ? Shape{seq, kAttnB, width} : Shape{kAttnB, seq, width},
                           200 + static_cast<uint32_t>(seq));
  for (float& v : x.span<float>()) v *= 2.0f;
  std::vector<Tensor> inputs = {x};
  if (form == AttentionForm::kMasked) {
    inputs.push_back(random_tensor(Shape{kAttnB, 1, seq, seq}, 201));
  }
  return inputs;
}

// Attention of `form` over `seq` tokens in `dt` (Casts from and to f32 at the edges and around the
// Softmax, as quantize_fp16 leaves them), heads merged as the output projection reads them.
BuildFn attention_graph(AttentionForm form, int64_t seq, DType dt) {
  return [=](GraphBuilder& b, const std::vector<Value*>& in) {
    auto i64 = [](std::vector<int64_t> v) {
      return Tensor::from_vector<int64_t>(v, Shape{static_cast<int64_t>(v.size())});
    };
    auto perm = [](std::vector<int64_t> p) {
      ops::Transpose t;
      t.perm = std::move(p);
      return Op(t);
    };
    const bool half = dt != DType::kF32;
    auto cast = [&](Value* v, DType to) { return half ? cast_to(b, v, to) : v; };
    auto scalar = [&](float v) { return b.constant(in_dtype(Tensor::scalar<float>(v), dt)); };
    auto reshape = [&](Value* v, std::vector<int64_t> shape) {
      return b.add(Op(ops::Reshape{}), {v, b.constant(i64(std::move(shape)))});
    };
    const int64_t B = kAttnB, H = kAttnH, D = kAttnD, E = kAttnE;
    const bool bert = form == AttentionForm::kBert || form == AttentionForm::kMasked;
    Value* qkv = cast(in[0], dt);
    if (form == AttentionForm::kProjected) {
      Tensor w = random_tensor(Shape{E, 3 * E}, 230);
      for (float& x : w.span<float>()) x *= 0.1f;
      const Tensor bias = random_tensor(Shape{3 * E}, 231);
      Value* rows = b.add(perm({1, 0, 2}), {qkv});
      qkv = b.add(Op(ops::Add{}), {b.add(Op(ops::MatMul{}), {rows, b.constant(in_dtype(w, dt))}),
                                   b.constant(in_dtype(bias, dt))});
    }
    Value* q = nullptr;
    Value* kt = nullptr;  // k transposed: [..., D, S]
    Value* v = nullptr;
    if (bert) {
      ops::Split split;
      split.axis = 2;
      auto parts = b.add(Op(split), {qkv, b.constant(i64({E, E, E}))}, 3);
      q = b.add(perm({0, 2, 1, 3}), {reshape(parts[0], {B, seq, H, D})});
      kt = b.add(perm({0, 2, 3, 1}), {reshape(parts[1], {B, seq, H, D})});
      v = b.add(perm({0, 2, 1, 3}), {reshape(parts[2], {B, seq, H, D})});
    } else {
      Value* u = b.add(Op(ops::Unsqueeze{}), {reshape(qkv, {seq, B, 3, E}), b.constant(i64({0}))});
      Value* t =
          b.add(Op(ops::Squeeze{}), {b.add(perm({3, 1, 2, 0, 4}), {u}), b.constant(i64({3}))});
      std::vector<Value*> heads;
      for (int64_t i = 0; i < 3; ++i) {
        Value* part = b.add(Op(ops::Gather{}), {t, b.constant(Tensor::scalar<int64_t>(i))});
        heads.push_back(b.add(perm({1, 0, 2}), {reshape(part, {seq, B * H, D})}));
      }
      if (form == AttentionForm::kSdpa || form == AttentionForm::kProjected) {
        const float root = std::sqrt(1.0f / std::sqrt(static_cast<float>(D)));
        q = b.add(Op(ops::Mul{}), {reshape(heads[0], {B, H, seq, D}), scalar(root)});
        kt = b.add(Op(ops::Mul{}),
                   {b.add(perm({0, 1, 3, 2}), {reshape(heads[1], {B, H, seq, D})}), scalar(root)});
        v = reshape(heads[2], {B, H, seq, D});
      } else {
        q = b.add(Op(ops::Div{}), {heads[0], scalar(8.0f)});
        kt = b.add(perm({0, 2, 1}), {heads[1]});
        v = heads[2];
      }
    }
    Value* scores = b.add(Op(ops::MatMul{}), {q, kt});
    if (bert) scores = b.add(Op(ops::Mul{}), {scores, scalar(0.125f)});
    if (form == AttentionForm::kMasked) {
      scores = b.add(Op(ops::Add{}), {scores, cast(in[1], dt)});
    }
    Value* p = cast(b.add(Op(ops::Softmax{}), {cast(scores, DType::kF32)}), dt);
    Value* o = b.add(Op(ops::MatMul{}), {p, v});
    if (form == AttentionForm::kSdpa || form == AttentionForm::kProjected) {
      o = reshape(b.add(perm({2, 0, 1, 3}), {o}), {seq * B, E});
      if (form == AttentionForm::kProjected) {  // out_proj, back to [S, B, E], batch first
        Tensor w = random_tensor(Shape{E, E}, 232);
        for (float& x : w.span<float>()) x *= 0.1f;
        const Tensor bias = random_tensor(Shape{E}, 233);
        ops::Gemm gemm;
        gemm.transB = 1;
        o = b.add(Op(gemm), {o, b.constant(in_dtype(w, dt)), b.constant(in_dtype(bias, dt))});
        o = b.add(perm({1, 0, 2}), {reshape(o, {seq, B, E})});
      }
    } else if (form == AttentionForm::kBmm) {
      o = reshape(b.add(perm({1, 0, 2}), {o}), {seq * B, E});
    } else {
      o = reshape(b.add(perm({0, 2, 1, 3}), {o}), {B, seq, E});
    }
    b.output(cast(o, DType::kF32));
  };
}

// Runs without a GPU: the forms torch exports are found in f16 and bf16 (not in f32, which keeps
// the unfused path, nor with a mask).
TEST(CudaAttention, PlanFindsTheExportedForms) {
  for (const AttentionForm form : {AttentionForm::kBert, AttentionForm::kSdpa, AttentionForm::kBmm,
                                   AttentionForm::kMasked, AttentionForm::kProjected}) {
    for (const DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " form " + std::to_string(static_cast<int>(form)));
      const std::vector<Tensor> inputs = attention_inputs(form, 197);
      std::shared_ptr<Graph> graph = make_graph(inputs, attention_graph(form, 197, dt));
      cuda::Builder builder(*graph, 0, nullptr, nullptr, {});
      const bool fused = dt != DType::kF32 && form != AttentionForm::kMasked;
      EXPECT_EQ(cuda::plan_attention(builder), fused ? 1 : 0);
    }
  }
}

// Each form as one fused Attention step in f16 and bf16 (no Transpose, Softmax or MatMul step left:
// q, k and v read in place from the projection's output), the old path in f32 and with a mask;
// sequence lengths 128 and 197 (BERT's and ViT's) and 5 (one partial tile); against ref in f32.
// One test per exported form, so that a sanitizer run can pick forms (the projected form runs
// cuBLASLt GEMMs too).
class CudaFusedAttention : public ::testing::TestWithParam<AttentionForm> {};

TEST_P(CudaFusedAttention, MatchesRef) {
  SKIP_WITHOUT_GPU();
  const AttentionForm form = GetParam();
  for (const int64_t seq : {int64_t{128}, int64_t{197}, int64_t{5}}) {
    if (form == AttentionForm::kMasked && seq != 5) continue;
    const std::vector<Tensor> inputs = attention_inputs(form, seq);
    std::shared_ptr<Executable> ref =
        compile_for(make_graph(inputs, attention_graph(form, seq, DType::kF32)), "ref");
    ASSERT_NE(ref, nullptr);
    const std::vector<Tensor> want = run(*ref, inputs);
    for (const DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " form " + std::to_string(static_cast<int>(form)) +
                   " seq " + std::to_string(seq));
      std::shared_ptr<Executable> exe =
          compile_for(make_graph(inputs, attention_graph(form, seq, dt)), "cuda");
      ASSERT_NE(exe, nullptr);
      const float tolerance = dt == DType::kF16 ? 1e-2f : dt == DType::kBF16 ? 6e-2f : 1e-4f;
      expect_close(want, run(*exe, inputs), tolerance);
      const cuda::Program* program = cuda_program(*exe);
      ASSERT_NE(program, nullptr);
      EXPECT_EQ(program->device_steps(), static_cast<int>(program->steps().size()));
      const bool fused = dt != DType::kF32 && form != AttentionForm::kMasked;
      EXPECT_EQ(program->count_steps("Attention"), fused ? 1 : 0);
      if (fused && form == AttentionForm::kProjected) {
        EXPECT_EQ(static_cast<int>(program->steps().size()), 5)
            << "Cast, MatMul+Bias (on the untransposed rows), Attention, Gemm+Bias, Cast";
        EXPECT_EQ(program->count_steps("Transpose"), 0);
      } else if (fused) {
        EXPECT_EQ(static_cast<int>(program->steps().size()), 3) << "Cast, Attention, Cast";
      }
    }
  }
}

std::string attention_form_name(const ::testing::TestParamInfo<AttentionForm>& info) {
  static const char* const kNames[] = {"Bert", "Sdpa", "Bmm", "Masked", "Projected"};
  return kNames[static_cast<int>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(Forms, CudaFusedAttention,
                         ::testing::Values(AttentionForm::kBert, AttentionForm::kSdpa,
                                           AttentionForm::kBmm, AttentionForm::kMasked,
                                           AttentionForm::kProjected),
                         attention_form_name);

}  // namespace
}  // namespace kiln::compiler
