// SPDX-License-Identifier: Apache-2.0
// The cpu target's planned execution: transformer pieces, views and bf16 regions agree with ref,
// buffers are reused without overlapping, concurrent runs, profiles and dynamic batches work.
#include "compiler/targets/cpu/program_testing.h"

namespace kiln::compiler {
namespace {

TEST(CpuProgram, TransformerPiecesMatchRef) {
  // A BERT feed-forward and attention slice: MatMul + bias + GELU (as exporters write it),
  // LayerNorm, per-head Transpose, batched MatMul of two activations, Softmax.
  auto make = [] {
    auto graph = std::make_shared<Graph>("encoder");
    GraphBuilder b(*graph);
    Value* x = b.input("x", TensorType(DType::kF32, Shape{2, 8, 16}));
    Value* h =
        b.add(Op(ops::MatMul{}), {x, b.constant(random_tensor(Shape{16, 32}, 20, 0.3f))}, "fc1");
    h = b.add(Op(ops::Add{}), {h, b.constant(random_tensor(Shape{32}, 21))}, "fc1_bias");
    Value* erf =
        b.add(Op(ops::Erf{}),
              {b.add(Op(ops::Div{}), {h, b.constant(Tensor::scalar(1.41421356f))}, "gelu_div")},
              "gelu_erf");
    Value* one_plus = b.add(Op(ops::Add{}), {erf, b.constant(Tensor::scalar(1.0f))}, "gelu_add");
    Value* gelu =
        b.add(Op(ops::Mul{}),
              {b.add(Op(ops::Mul{}), {h, one_plus}, "gelu_mul"), b.constant(Tensor::scalar(0.5f))},
              "gelu_half");
    Value* y =
        b.add(Op(ops::MatMul{}), {gelu, b.constant(random_tensor(Shape{32, 16}, 22, 0.2f))}, "fc2");
    y = b.add(Op(ops::Add{}), {y, x}, "residual");
    Value* norm = b.add(
        Op(ops::LayerNormalization{}),
        {y, b.constant(random_tensor(Shape{16}, 23)), b.constant(random_tensor(Shape{16}, 24))},
        "ln");
    ops::Reshape reshape;
    Value* heads = b.add(Op(reshape),
                         {norm, b.constant(Tensor::from_vector(std::vector<int64_t>{2, 8, 4, 4}))},
                         "split_heads");
    ops::Transpose q;
    q.perm = std::vector<int64_t>{0, 2, 1, 3};
    ops::Transpose k;
    k.perm = std::vector<int64_t>{0, 2, 3, 1};
    Value* scores = b.add(Op(ops::MatMul{}),
                          {b.add(Op(q), {heads}, "q"), b.add(Op(k), {heads}, "k")}, "scores");
    b.output(b.add(Op(ops::Softmax{}), {scores}, "attention"));
    b.output(norm);
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 8, 16}, 25)};
  std::vector<Tensor> want = run(*compile_for(make(), "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(make(), "cpu");
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr);
  expect_close(want, run(*exe, inputs), 1e-3f);
  EXPECT_EQ(program->count_steps("MatMul+Add+Gelu"), 1);
  EXPECT_EQ(program->count_steps("MatMul+Add"), 1);  // fc2 with the residual as a sum post-op
  EXPECT_EQ(program->count_steps("LayerNormalization"), 1);
  // The per-head Transposes are read through strides by the scores MatMul: no copies.
  EXPECT_EQ(program->count_steps("Transpose"), 0);
  EXPECT_EQ(program->count_steps("Reorder"), 0);
  EXPECT_EQ(program->count_steps("MatMul"), 1);
  EXPECT_EQ(program->count_steps("Softmax"), 1);
  EXPECT_EQ(program->count_steps("Erf"), 0);
  expect_no_live_overlap(*program);
}

// A BERT attention block as torch exports it: one QKV projection, Split, per-head Reshape and
// Transposes, scaled and masked scores, Softmax, the context's Transpose back, the output
// projection with its residual, LayerNorm.
std::shared_ptr<Graph> attention_block() {
  auto graph = std::make_shared<Graph>("attention");
  GraphBuilder b(*graph);
  const int64_t batch = 2, seq = 8, hidden = 16, heads = 4, d = 4;
  Value* x = b.input("x", TensorType(DType::kF32, Shape{batch, seq, hidden}));
  Value* mask = b.input("mask", TensorType(DType::kF32, Shape{batch, 1, 1, seq}));
  Value* qkv = b.add(Op(ops::MatMul{}),
                     {x, b.constant(random_tensor(Shape{hidden, 3 * hidden}, 40, 0.3f))}, "qkv");
  qkv = b.add(Op(ops::Add{}), {qkv, b.constant(random_tensor(Shape{3 * hidden}, 41, 0.1f))},
              "qkv_bias");
  ops::Split split;
  split.axis = -1;
  std::vector<Value*> parts = b.add(Op(split), {qkv}, 3, "split");
  auto heads_of = [&](Value* v, std::vector<int64_t> perm, const std::string& name) {
    Value* r =
        b.add(Op(ops::Reshape{}),
              {v, b.constant(Tensor::from_vector(std::vector<int64_t>{batch, seq, heads, d}))},
              name + "_heads");
    ops::Transpose t;
    t.perm = std::move(perm);
    return b.add(Op(t), {r}, name + "_t");
  };
  Value* q = heads_of(parts[0], {0, 2, 1, 3}, "q");
  Value* k = heads_of(parts[1], {0, 2, 3, 1}, "k");
  Value* v = heads_of(parts[2], {0, 2, 1, 3}, "v");
  Value* scores = b.add(Op(ops::MatMul{}), {q, k}, "scores");
  scores = b.add(Op(ops::Mul{}), {scores, b.constant(Tensor::scalar(0.5f))}, "scale");
  scores = b.add(Op(ops::Add{}), {scores, mask}, "masked");
  Value* probs = b.add(Op(ops::Softmax{}), {scores}, "probs");
  Value* ctx = b.add(Op(ops::MatMul{}), {probs, v}, "context");
  ops::Transpose back;
  back.perm = std::vector<int64_t>{0, 2, 1, 3};
  ctx = b.add(Op(ops::Reshape{}),
              {b.add(Op(back), {ctx}, "context_t"),
               b.constant(Tensor::from_vector(std::vector<int64_t>{batch, seq, hidden}))},
              "merge_heads");
  Value* y = b.add(Op(ops::MatMul{}),
                   {ctx, b.constant(random_tensor(Shape{hidden, hidden}, 42, 0.3f))}, "proj");
  y = b.add(Op(ops::Add{}), {y, b.constant(random_tensor(Shape{hidden}, 43, 0.1f))}, "proj_bias");
  y = b.add(Op(ops::Add{}), {x, y}, "residual");
  b.output(b.add(Op(ops::LayerNormalization{}),
                 {y, b.constant(random_tensor(Shape{hidden}, 44)),
                  b.constant(random_tensor(Shape{hidden}, 45))},
                 "norm"));
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return graph;
}

TEST(CpuProgram, AttentionRunsWithoutCopiesAndMatchesRef) {
  Tensor mask(DType::kF32, Shape{2, 1, 1, 8});
  for (int64_t i = 0; i < mask.numel(); ++i) mask.data<float>()[i] = i % 8 >= 6 ? -1e4f : 0.0f;
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 8, 16}, 46), mask};
  std::vector<Tensor> want = run(*compile_for(attention_block(), "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(attention_block(), "cpu");
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr);
  expect_close(want, run(*exe, inputs), 1e-3f);
  // Split and the Transposes are strided views; the scale and the mask are post-ops of Q·Kᵀ; P·V
  // writes the context transposed; the residual Add is the projection's sum post-op.
  std::string kinds;
  for (const auto& step : program->steps()) kinds += step->kind + " ";
  EXPECT_EQ(kinds, "MatMul+Add MatMul+Mul+Add Softmax MatMul MatMul+Add+Add LayerNormalization ");
  int views = 0;
  for (const cpu::Buffer& buffer : program->buffers()) {
    views += buffer.kind == cpu::Buffer::Kind::kView && !buffer.is_plain();
  }
  EXPECT_GE(views, 6);  // q, k, v slices and their heads
  expect_no_live_overlap(*program);
}

// MatMul + bias, then GELU's tanh form as torch exports it (x^3 as Mul(x, Mul(x, x)), the 0.5
// last) or with Pow(x, 3) and the 0.5 first.
std::shared_ptr<Graph> gelu_tanh_mlp(bool torch_form) {
  auto graph = std::make_shared<Graph>("gelu_tanh");
  GraphBuilder b(*graph);
  auto scalar = [&](float v) { return b.constant(Tensor::scalar(v)); };
  Value* x = b.input("x", TensorType(DType::kF32, Shape{2, 5, 8}));
  Value* h = b.add(Op(ops::MatMul{}), {x, b.constant(random_tensor(Shape{8, 12}, 50, 0.5f))}, "fc");
  h = b.add(Op(ops::Add{}), {h, b.constant(random_tensor(Shape{12}, 51))}, "fc_bias");
  Value* cube = torch_form ? b.add(Op(ops::Mul{}), {h, b.add(Op(ops::Mul{}), {h, h}, "sq")}, "cube")
                           : b.add(Op(ops::Pow{}), {h, scalar(3.0f)}, "cube");
  Value* inner =
      b.add(Op(ops::Add{}), {h, b.add(Op(ops::Mul{}), {scalar(0.044715f), cube}, "c3")}, "inner");
  Value* t = b.add(Op(ops::Tanh{}), {b.add(Op(ops::Mul{}), {scalar(0.7978845608f), inner}, "arg")},
                   "tanh");
  Value* one_plus = b.add(Op(ops::Add{}), {scalar(1.0f), t}, "one_plus");
  Value* y =
      torch_form
          ? b.add(Op(ops::Mul{}), {scalar(0.5f), b.add(Op(ops::Mul{}), {h, one_plus}, "m")}, "gelu")
          : b.add(Op(ops::Mul{}), {b.add(Op(ops::Mul{}), {h, scalar(0.5f)}, "half"), one_plus},
                  "gelu");
  b.output(y);
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return graph;
}

TEST(CpuProgram, GeluTanhFormsRunAsOnePostOp) {
  for (bool torch_form : {true, false}) {
    const std::vector<Tensor> inputs = {random_tensor(Shape{2, 5, 8}, 52, 2.0f)};
    std::vector<Tensor> want = run(*compile_for(gelu_tanh_mlp(torch_form), "ref"), inputs);
    std::shared_ptr<Executable> exe = compile_for(gelu_tanh_mlp(torch_form), "cpu");
    ASSERT_NE(exe, nullptr);
    const cpu::Program* program = cpu_program(*exe);
    ASSERT_NE(program, nullptr);
    expect_close(want, run(*exe, inputs), 1e-4f);
    ASSERT_EQ(program->steps().size(), 1u) << torch_form;
    EXPECT_EQ(program->steps()[0]->kind, "MatMul+Add+GeluTanh");
  }
}

TEST(CpuProgram, SlicesAreViewsAMatMulReadsThroughStrides) {
  // torch's MultiheadAttention slices its packed projection: both operands here are Slices of one
  // tensor (the second transposed), read in place.
  auto make = [] {
    auto graph = std::make_shared<Graph>("slices");
    GraphBuilder b(*graph);
    auto ints = [&](std::vector<int64_t> v) { return b.constant(Tensor::from_vector(v)); };
    Value* x = b.input("x", TensorType(DType::kF32, Shape{2, 4, 12}));
    Value* a = b.add(Op(ops::Slice{}), {x, ints({0}), ints({6}), ints({-1})}, "a");
    Value* c = b.add(Op(ops::Slice{}), {x, ints({6}), ints({12}), ints({2}), ints({1})}, "c");
    ops::Transpose t;
    t.perm = std::vector<int64_t>{0, 2, 1};
    b.output(b.add(Op(ops::MatMul{}), {a, b.add(Op(t), {c}, "ct")}, "y"));
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 4, 12}, 63)};
  std::shared_ptr<Executable> exe = compile_matching_ref(make, inputs, 1e-4f);
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr);
  ASSERT_EQ(program->steps().size(), 1u) << print_graph(exe->graph());
  EXPECT_EQ(program->steps()[0]->kind, "MatMul");
}

TEST(CpuProgram, DecomposedLayerNormRunsAsOneStep) {
  // LayerNorm as exporters before opset 17 write it: the cpu pipeline's layer_norm_fusion makes
  // it one LayerNormalization, run by oneDNN.
  auto make = [] {
    auto graph = std::make_shared<Graph>("ln");
    GraphBuilder b(*graph);
    ops::ReduceMean mean;
    mean.axes = std::vector<int64_t>{-1};
    Value* x = b.input("x", TensorType(DType::kF32, Shape{2, 8, 16}));
    Value* d = b.add(Op(ops::Sub{}), {x, b.add(Op(mean), {x}, "mean")}, "d");
    Value* var = b.add(Op(mean),
                       {b.add(Op(ops::Pow{}), {d, b.constant(Tensor::scalar(2.0f))}, "sq")}, "var");
    Value* std =
        b.add(Op(ops::Sqrt{}),
              {b.add(Op(ops::Add{}), {var, b.constant(Tensor::scalar(1e-6f))}, "var_eps")}, "std");
    Value* y = b.add(Op(ops::Div{}), {d, std}, "norm");
    y = b.add(Op(ops::Mul{}), {y, b.constant(random_tensor(Shape{16}, 60))}, "scaled");
    b.output(b.add(Op(ops::Add{}), {y, b.constant(random_tensor(Shape{16}, 61))}, "shifted"));
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 8, 16}, 62, 3.0f)};
  std::shared_ptr<Executable> exe = compile_matching_ref(make, inputs, 1e-4f);
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr);
  ASSERT_EQ(program->steps().size(), 1u) << print_graph(exe->graph());
  EXPECT_EQ(program->steps()[0]->kind, "LayerNormalization");
}

TEST(CpuProgram, TheBundledModelMatchesRef) {
  const std::string path = std::string(KILN_SOURCE_DIR) + "/examples/models/tiny_cnn.onnx";
  auto load = [&] {
    ImportOptions options;
    options.default_dim_value = 3;  // the batch
    auto model = import_onnx_file(path, options);
    EXPECT_TRUE(model.ok()) << model.status().to_string();
    return std::shared_ptr<Graph>(std::move((*model)->graph));
  };
  std::shared_ptr<Graph> graph = load();
  std::vector<Tensor> inputs;
  uint32_t seed = 3;
  for (const Value* v : graph->inputs())
    inputs.push_back(random_tensor(v->tensor_type().shape(), seed++));
  std::vector<Tensor> want = run(*compile_for(graph, "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(load(), "cpu");
  ASSERT_NE(exe, nullptr);
  ASSERT_NE(cpu_program(*exe), nullptr);
  expect_close(want, run(*exe, inputs));
}

TEST(CpuProgram, ConcurrentRunsOfOneExecutableGiveEachCallerItsOwnResult) {
  std::shared_ptr<Executable> ref = compile_for(tiny_resnet(1), "ref");
  std::shared_ptr<Executable> exe = compile_for(tiny_resnet(1), "cpu");
  ASSERT_NE(exe, nullptr);
  ASSERT_NE(cpu_program(*exe), nullptr);
  constexpr int kThreads = 4;
  constexpr int kRuns = 8;
  std::vector<std::vector<Tensor>> inputs(kThreads);
  std::vector<std::vector<Tensor>> want(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    inputs[t] = {random_tensor(Shape{1, 3, 32, 32}, 100 + static_cast<uint32_t>(t))};
    want[t] = run(*ref, inputs[t]);
  }
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRuns; ++r) {
        std::vector<Argument> args(inputs[t].begin(), inputs[t].end());
        auto out = exe->run(std::move(args));
        if (!out.ok() || out->size() != 1) {
          ++mismatches[t];
          continue;
        }
        const Tensor& got = (*out)[0].tensor();
        for (int64_t i = 0; i < got.numel(); ++i) {
          if (std::abs(got.data<float>()[i] - want[t][0].data<float>()[i]) > 1e-4f) {
            ++mismatches[t];
            break;
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST(CpuProgram, ProfiledRunsTimeEveryStep) {
  std::shared_ptr<Executable> exe = compile_for(tiny_resnet(1), "cpu");
  ASSERT_NE(exe, nullptr);
  RunProfile profile;
  std::vector<Argument> args = {Argument(random_tensor(Shape{1, 3, 32, 32}, 4))};
  auto out = exe->run_profiled(std::move(args), profile);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(profile.steps.size(), cpu_program(*exe)->steps().size());
  double total = 0;
  for (const StepTime& s : profile.steps) {
    EXPECT_GE(s.ms, 0.0);
    EXPECT_FALSE(s.node.empty());
    total += s.ms;
  }
  EXPECT_GT(total, 0.0);
  EXPECT_EQ(profile.steps.back().kind, "Softmax");
}

TEST(CpuProgram, DynamicBatchCompilesOnePlannedProgramPerShape) {
  // A conv net with a symbolic batch: each batch size seen is compiled to its own program.
  auto graph = std::make_shared<Graph>("dynamic");
  GraphBuilder b(*graph);
  Value* x = b.input("x", TensorType(DType::kF32, {Dim::symbolic("n"), Dim(3), Dim(8), Dim(8)}));
  Value* h = b.add(Op(ops::Relu{}), {conv(b, x, 3, 16, 3, 1, 80)}, "relu");
  ops::Flatten flatten;
  b.output(b.add(Op(flatten), {b.add(Op(ops::GlobalAveragePool{}), {h}, "gap")}, "flat"));
  ASSERT_TRUE(b.status().ok()) << b.status().to_string();
  std::shared_ptr<Executable> ref = compile_for(graph, "ref");
  std::shared_ptr<Executable> exe = compile_for(graph, "cpu");
  ASSERT_NE(exe, nullptr);
  EXPECT_EQ(cpu_program(*exe), nullptr) << "the dynamic graph itself has no single program";
  const ShapeProfiles* profiles = cpu_shape_profiles(*exe);
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

  // New and known shapes from several threads at once: each caller gets its own correct result.
  std::vector<std::thread> threads;
  std::vector<std::vector<Tensor>> inputs(6);
  std::vector<std::vector<Tensor>> outputs(6);
  for (size_t t = 0; t < inputs.size(); ++t) {
    inputs[t] = {random_tensor(Shape{static_cast<int64_t>(1 + t % 3), 3, 8, 8}, 100 + t)};
    threads.emplace_back([&, t] { outputs[t] = run(*exe, inputs[t]); });
  }
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < inputs.size(); ++t) expect_close(run(*ref, inputs[t]), outputs[t]);
  EXPECT_EQ(profiles->size(), 4u);  // batches 1, 2, 3, 5
}

TEST(CpuProgram, Bf16RegionsRunOnOneDnnBetweenTwoCasts) {
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 3, 32, 32}, 1)};
  std::vector<Tensor> fp32 = run(*compile_for(tiny_resnet(2), "cpu"), inputs);
  std::shared_ptr<Graph> graph = tiny_resnet(2);
  ASSERT_TRUE(quantize_bf16(*graph).ok());
  std::shared_ptr<Graph> for_ref = tiny_resnet(2);
  ASSERT_TRUE(quantize_bf16(*for_ref).ok());
  std::vector<Tensor> ref = run(*compile_for(for_ref, "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(graph, "cpu");
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr);
  std::vector<Tensor> got = run(*exe, inputs);
  // ref rounds each op's exact result to bf16 once; oneDNN accumulates in f32: both are within
  // bf16 rounding of each other and of fp32 (probabilities, so absolute).
  for (const std::vector<Tensor>* want : {&ref, &fp32}) {
    ASSERT_EQ(got.size(), want->size());
    for (int64_t i = 0; i < got[0].numel(); ++i) {
      EXPECT_NEAR(got[0].data<float>()[i], (*want)[0].data<float>()[i], 0.02) << i;
    }
  }
  // Every conv and the classifier run as oneDNN primitives, residual Adds fused; the activations
  // stay bf16 (blocked) from the first Cast to the last.
  for (const auto& step : program->steps()) {
    if (step->node->kind() == OpKind::kConv || step->node->kind() == OpKind::kGemm) {
      EXPECT_NE(dynamic_cast<const cpu::PrimitiveStep*>(step.get()), nullptr) << step->kind;
    }
  }
  EXPECT_EQ(program->count_steps("Conv+Add+Relu"), 2) << print_graph(exe->graph());
  EXPECT_EQ(program->count_steps("Cast"), 2);
  std::string steps;
  for (const auto& step : program->steps())
    steps += step->kind + " " + step->node->describe() + "\n";
  // Reorders at the edges, and around the max pool (whose bf16 kernel reads another blocking
  // than the AMX convolutions write).
  EXPECT_LE(program->count_steps("Reorder"), 4) << steps;
  int blocked_bf16 = 0;
  for (const cpu::Buffer& b : program->buffers()) {
    blocked_bf16 += b.dtype == DType::kBF16 && !b.is_plain() ? 1 : 0;
  }
  EXPECT_GE(blocked_bf16, 5);
  expect_no_live_overlap(*program);
}

TEST(CpuProgram, Bf16ActivationProductsRunOnOneDnn) {
  // Attention's shape: scores = q x k^T of two activations, then Softmax (kept in fp32).
  auto build = [] {
    auto graph = std::make_shared<Graph>("attention");
    GraphBuilder b(*graph);
    Value* q = b.input("q", TensorType(DType::kF32, Shape{2, 6, 8}));
    Value* k = b.input("k", TensorType(DType::kF32, Shape{2, 8, 6}));
    Value* scores = b.add(Op(ops::MatMul{}), {q, k}, "scores");
    b.output(b.add(Op(ops::Softmax{}), {scores}, "probs"));
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 6, 8}, 3),
                                      random_tensor(Shape{2, 8, 6}, 4)};
  std::shared_ptr<Graph> for_ref = build();
  ASSERT_TRUE(quantize_bf16(*for_ref).ok());
  std::shared_ptr<Graph> graph = build();
  ASSERT_TRUE(quantize_bf16(*graph).ok());
  EXPECT_NE(print_graph(*graph).find("%scores: bf16[2,6,6] = MatMul"), std::string::npos)
      << print_graph(*graph);
  std::shared_ptr<Executable> exe = compile_for(graph, "cpu");
  ASSERT_NE(exe, nullptr);
  ASSERT_NE(cpu_program(*exe), nullptr);
  // Every node — the Casts, the bf16 MatMul, the Softmax — runs on oneDNN, none on ref.
  EXPECT_EQ(cpu_dnnl_node_count(*exe), exe->graph().num_nodes()) << print_graph(exe->graph());
  std::vector<Tensor> want = run(*compile_for(for_ref, "ref"), inputs);
  std::vector<Tensor> got = run(*exe, inputs);
  ASSERT_EQ(got.size(), 1u);
  for (int64_t i = 0; i < got[0].numel(); ++i) {
    EXPECT_NEAR(got[0].data<float>()[i], want[0].data<float>()[i], 0.01) << i;
  }
}

}  // namespace
}  // namespace kiln::compiler
