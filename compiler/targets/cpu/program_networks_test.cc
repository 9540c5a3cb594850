// SPDX-License-Identifier: Apache-2.0
// The cpu target's planned execution of convolutional networks: residual, dense, fire and
// depthwise-separable ones agree with ref in both layouts, with fused steps and few reorders.
#include "compiler/targets/cpu/program_testing.h"

namespace kiln::compiler {
namespace {

class CpuProgramLayouts : public testing::TestWithParam<const char*> {};

TEST_P(CpuProgramLayouts, ResidualNetworkMatchesRefWithFusedStepsAndFewReorders) {
  ScopedEnv layout("KILN_CPU_CONV_LAYOUT", GetParam());
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 3, 32, 32}, 1)};
  std::vector<Tensor> want = run(*compile_for(tiny_resnet(2), "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(tiny_resnet(2), "cpu");
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr) << "a static graph runs as a planned program";
  expect_close(want, run(*exe, inputs));

  // The residual Adds and their Relus run inside the convolutions (sum + eltwise post-ops).
  // Channel-blocked, the last one also computes the GlobalAveragePool of its output (pool_after).
  const int pooled = program->count_steps("Conv+Add+Relu+GlobalAveragePool");
  EXPECT_EQ(pooled, std::string(GetParam()) == "blocked16" ? 1 : 0);
  EXPECT_EQ(program->count_steps("Conv+Add+Relu") + pooled, 2) << print_graph(exe->graph());
  EXPECT_EQ(program->count_steps("Add"), 0);
  EXPECT_EQ(program->count_steps("Relu"), 0);
  // Blocked layouts run from the first conv's output to the pool at the end: reorders only at the
  // edges (into the network, out of the pooled features).
  EXPECT_LE(program->count_steps("Reorder"), 3);
  expect_no_live_overlap(*program);
  EXPECT_LT(program->arena_bytes(), program->unplanned_bytes()) << "dead values' space is reused";

  // The residual is dead after its Add: the convolution adds into the residual's own buffer.
  const auto& steps = program->steps();
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i]->kind != "Conv+Add+Relu") continue;
    bool written_before = false;
    for (size_t j = 0; j < i; ++j) {
      for (int id : steps[j]->writes) written_before |= id == steps[i]->writes.front();
    }
    EXPECT_TRUE(written_before) << "step " << i << " writes a fresh buffer, not its residual's";
  }
  // Flatten runs as a view of the pooled features: no step, no copy.
  EXPECT_EQ(program->count_steps("Flatten"), 0);
  int views = 0;
  for (const cpu::Buffer& b : program->buffers()) views += b.kind == cpu::Buffer::Kind::kView;
  EXPECT_EQ(views, 1);
}

INSTANTIATE_TEST_SUITE_P(ConvLayouts, CpuProgramLayouts, testing::Values("any", "blocked16"));

TEST(CpuProgram, BatchNormConcatSiluAndClipMatchRef) {
  // DenseNet's BN-Relu-Conv and concat, EfficientNet's SiLU, MobileNetV2's Clip(0, 6) and
  // depthwise convolution, plus ops that run their ref kernels in between (Transpose, ReduceMean).
  auto make = [] {
    auto graph = std::make_shared<Graph>("mixed");
    GraphBuilder b(*graph);
    Value* x = b.input("x", TensorType(DType::kF32, Shape{1, 16, 12, 12}));
    Value* c1 = conv(b, x, 16, 32, 3, 1, 5);
    Value* silu = b.add(Op(ops::Mul{}), {c1, b.add(Op(ops::Sigmoid{}), {c1}, "sig")}, "silu");
    Value* dw = conv(b, silu, 32, 32, 3, 1, 6, /*group=*/32);
    Value* relu6 =
        b.add(Op(ops::Clip{}),
              {dw, b.constant(Tensor::scalar(0.0f)), b.constant(Tensor::scalar(6.0f))}, "relu6");
    Value* cat = b.add(Op(ops::Concat{.axis = 1}), {relu6, x}, "concat");
    Value* bn = b.add(
        Op(ops::BatchNormalization{}),
        {cat, b.constant(random_tensor(Shape{48}, 7)), b.constant(random_tensor(Shape{48}, 8)),
         b.constant(random_tensor(Shape{48}, 9)), b.constant(positive_tensor(Shape{48}, 10))},
        "bn");
    Value* relu = b.add(Op(ops::Relu{}), {bn}, "bn_relu");
    // A Pad by zeros, as exporters leave before pools: removed (algebraic_simplification).
    Value* padded =
        b.add(Op(ops::Pad{}), {relu, b.constant(Tensor::from_vector(std::vector<int64_t>(8, 0)))},
              "pad0");
    Value* y = conv(b, padded, 48, 8, 1, 1, 11);
    ops::Transpose t;
    t.perm = std::vector<int64_t>{0, 2, 3, 1};
    b.output(b.add(Op(t), {y}, "nhwc"));
    b.output(b.add(Op(ops::Sigmoid{}), {relu6}, "side"));
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  std::shared_ptr<Graph> ref_graph = make();
  const std::vector<Tensor> inputs = {random_tensor(Shape{1, 16, 12, 12}, 2)};
  std::vector<Tensor> want = run(*compile_for(ref_graph, "ref"), inputs);
  // In the layouts oneDNN picks (a network this small with a depthwise convolution would run
  // channel-blocked, where the Transpose is a Reorder rather than a view).
  ScopedEnv any("KILN_CPU_CONV_LAYOUT", "any");
  std::shared_ptr<Executable> exe = compile_for(make(), "cpu");
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr);
  expect_close(want, run(*exe, inputs));
  EXPECT_EQ(program->count_steps("Conv+SiLU"), 1);
  EXPECT_EQ(program->count_steps("Conv+Clip"), 1);
  EXPECT_EQ(program->count_steps("Concat"), 1);
  EXPECT_EQ(program->count_steps("BatchNormalization+Relu"), 1);
  // The Transpose is a strided view of the Conv's output (copied by a Reorder only if that is
  // not already its row-major order).
  EXPECT_EQ(program->count_steps("Transpose"), 0);
  EXPECT_LE(program->count_steps("Reorder"), 2);
  EXPECT_EQ(program->count_steps("Pad"), 0);
  expect_no_live_overlap(*program);
}

TEST(CpuProgram, TransposeOfAChannelBlockedTensorIsOneReorder) {
  // The Conv writes nChw16c; the Transpose reads it with permuted axes into its plain output (not
  // a Reorder to plain and a second one through permuted strides).
  auto make = [] {
    auto graph = std::make_shared<Graph>("blocked_transpose");
    GraphBuilder b(*graph);
    Value* x = b.input("x", TensorType(DType::kF32, Shape{2, 16, 6, 5}));
    ops::Transpose t;
    t.perm = std::vector<int64_t>{0, 2, 3, 1};
    b.output(b.add(Op(t), {conv(b, x, 16, 32, 3, 1, 40)}, "nhwc"));
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 16, 6, 5}, 41)};
  std::vector<Tensor> want = run(*compile_for(make(), "ref"), inputs);
  ScopedEnv blocked("KILN_CPU_CONV_LAYOUT", "blocked16");
  std::shared_ptr<Executable> exe = compile_for(make(), "cpu");
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr);
  expect_close(want, run(*exe, inputs));
  EXPECT_EQ(program->count_steps("Transpose"), 1);
  // Only the input's, into the Conv's layout.
  EXPECT_EQ(program->count_steps("Reorder"), 1);
  for (const auto& step : program->steps()) {
    if (step->kind == "Reorder") {
      EXPECT_EQ(step->node->kind(), OpKind::kConv);
    }
  }
}

// A DenseNet block: every layer's BatchNormalization+Relu reads the Concat of the block input
// and all earlier layers' outputs, and a transition reads the Concat of all of them. Each layer
// adds `growth` channels (a 3x3 convolution from 2 * growth); `pool`: the transition ends in a 2x2
// AveragePool (DenseNet's).
std::shared_ptr<Graph> dense_block(int64_t batch, int64_t growth = 8, bool pool = false) {
  auto graph = std::make_shared<Graph>("dense");
  GraphBuilder b(*graph);
  Value* x = b.input("x", TensorType(DType::kF32, Shape{batch, 8, 10, 10}));
  const int64_t wide = 2 * growth;
  std::vector<Value*> features = {b.add(Op(ops::Relu{}), {conv(b, x, 8, wide, 3, 1, 1)}, "stem")};
  auto bn_relu = [&](Value* v, int64_t channels, uint32_t seed) {
    Value* bn = b.add(Op(ops::BatchNormalization{}),
                      {v, b.constant(random_tensor(Shape{channels}, seed)),
                       b.constant(random_tensor(Shape{channels}, seed + 1)),
                       b.constant(random_tensor(Shape{channels}, seed + 2)),
                       b.constant(positive_tensor(Shape{channels}, seed + 3))},
                      "bn" + std::to_string(seed));
    return b.add(Op(ops::Relu{}), {bn}, "bn_relu" + std::to_string(seed));
  };
  for (uint32_t layer = 0; layer < 3; ++layer) {
    const int64_t channels = wide + growth * static_cast<int64_t>(layer);
    Value* cat = b.add(Op(ops::Concat{.axis = 1}), features, "cat" + std::to_string(layer));
    Value* h = bn_relu(cat, channels, 100 + 10 * layer);
    h = b.add(Op(ops::Relu{}), {conv(b, h, channels, wide, 1, 1, 200 + 10 * layer)}, "mid");
    features.push_back(conv(b, h, wide, growth, 3, 1, 300 + 10 * layer));
  }
  Value* all = b.add(Op(ops::Concat{.axis = 1}), features, "cat_all");
  Value* y = conv(b, bn_relu(all, wide + 3 * growth, 400), wide + 3 * growth, 4, 1, 1, 500);
  if (pool) {
    ops::AveragePool avg;
    avg.kernel_shape = std::vector<int64_t>{2, 2};
    avg.strides = std::vector<int64_t>{2, 2};
    y = b.add(Op(avg), {y}, "transition_pool");
  }
  b.output(y);
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return graph;
}

TEST(CpuProgram, DenseBlockConcatsRunInsideTheirBatchNormsAndMatchRef) {
  for (int64_t batch : {1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const std::vector<Tensor> inputs = {random_tensor(Shape{batch, 8, 10, 10}, 7)};
    std::vector<Tensor> want = run(*compile_for(dense_block(batch), "ref"), inputs);
    std::shared_ptr<Executable> exe = compile_for(dense_block(batch), "cpu");
    ASSERT_NE(exe, nullptr);
    const cpu::Program* program = cpu_program(*exe);
    ASSERT_NE(program, nullptr);
    expect_close(want, run(*exe, inputs));
    std::string steps;
    for (const auto& step : program->steps()) steps += step->kind + "\n";
    // Every BatchNormalization reads its Concat's pieces where they lie: no Concat copies them.
    EXPECT_EQ(program->count_steps("Concat+BatchNormalization+Relu"), 4) << steps;
    EXPECT_EQ(program->count_steps("Concat"), 0) << steps;
    EXPECT_EQ(program->count_steps("BatchNormalization+Relu"), 0) << steps;
    EXPECT_EQ(program->count_steps("Relu"), 0) << steps;
    expect_no_live_overlap(*program);
  }
}

TEST(CpuProgram, WideDenseBlockRunsChannelBlockedWithConcatsReadInPlace) {
  // DenseNet-121's shape: 3x3 convolutions from 64 or more channels to 32 run as Winograd over
  // nChw16c, and every BatchNormalization reads its Concat's nChw16c pieces where they lie. The
  // transition's pool moves before its Conv (pool_before_pointwise_conv) into that pass.
  for (int64_t batch : {1, 2}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    auto layout = cpu::choose_conv_layout(*dense_block(batch, 32, true));
    ASSERT_TRUE(layout.ok()) << layout.status().to_string();
    EXPECT_EQ(*layout, cpu::ConvLayout::kBlocked16);
    const std::vector<Tensor> inputs = {random_tensor(Shape{batch, 8, 10, 10}, 8)};
    std::vector<Tensor> want = run(*compile_for(dense_block(batch, 32, true), "ref"), inputs);
    std::shared_ptr<Executable> exe = compile_for(dense_block(batch, 32, true), "cpu");
    ASSERT_NE(exe, nullptr);
    const cpu::Program* program = cpu_program(*exe);
    ASSERT_NE(program, nullptr);
    expect_close(want, run(*exe, inputs), 1e-3f);
    std::string steps;
    for (const auto& step : program->steps()) steps += step->kind + "\n";
    EXPECT_EQ(program->count_steps("Concat+BatchNormalization+Relu"), 3) << steps;
    EXPECT_EQ(program->count_steps("Concat+BatchNormalization+Relu+AveragePool"), 1) << steps;
    EXPECT_EQ(program->count_steps("Concat"), 0) << steps;
    EXPECT_EQ(program->count_steps("AveragePool"), 0) << steps;
    // A reorder only out of the network: the 8-channel stem runs direct, not as Winograd, and
    // reads the plain input.
    EXPECT_EQ(program->count_steps("Reorder"), 1) << steps;
    for (const auto& step : program->steps()) {
      if (step->kind.rfind("Concat+BatchNormalization+Relu", 0) != 0) continue;
      const cpu::Buffer& out = program->buffers()[static_cast<size_t>(step->writes[0])];
      EXPECT_EQ(out.layout, dnnl::memory::desc(out.layout.dims(), dnnl::memory::data_type::f32,
                                               dnnl::memory::format_tag::nChw16c));
    }
    expect_no_live_overlap(*program);
  }
}

TEST(CpuProgram, ConcatOfPlainInputsRunsInsideEachBatchNormReadingIt) {
  // Plain (NCHW) pieces, two readers: one BatchNormalization with a Relu, one without.
  auto make = [] {
    auto graph = std::make_shared<Graph>("planar");
    GraphBuilder b(*graph);
    Value* x = b.input("x", TensorType(DType::kF32, Shape{2, 3, 5, 4}));
    Value* z = b.input("z", TensorType(DType::kF32, Shape{2, 5, 5, 4}));
    Value* cat = b.add(Op(ops::Concat{.axis = 1}), {x, z}, "cat");
    for (uint32_t seed : {10u, 20u}) {
      Value* bn = b.add(Op(ops::BatchNormalization{}),
                        {cat, b.constant(random_tensor(Shape{8}, seed)),
                         b.constant(random_tensor(Shape{8}, seed + 1)),
                         b.constant(random_tensor(Shape{8}, seed + 2)),
                         b.constant(positive_tensor(Shape{8}, seed + 3))},
                        "bn" + std::to_string(seed));
      b.output(seed == 10u ? b.add(Op(ops::Relu{}), {bn}, "relu") : bn);
    }
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 3, 5, 4}, 1),
                                      random_tensor(Shape{2, 5, 5, 4}, 2)};
  std::vector<Tensor> want = run(*compile_for(make(), "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(make(), "cpu");
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr);
  expect_close(want, run(*exe, inputs));
  EXPECT_EQ(program->count_steps("Concat+BatchNormalization+Relu"), 1);
  EXPECT_EQ(program->count_steps("Concat+BatchNormalization"), 1);
  EXPECT_EQ(program->count_steps("Concat"), 0);
}

// EfficientNet's MBConv block: 1x1 expansion + SiLU, depthwise 3x3 + SiLU, squeeze-and-excitation
// (global average pool, 1x1 reduce + SiLU, 1x1 expand + Sigmoid, channel-wise Mul), 1x1
// projection and the residual Add; then a MobileNetV2 block (Clip(0, 6)) on the result.
std::shared_ptr<Graph> mbconv_network(int64_t batch) {
  auto graph = std::make_shared<Graph>("mbconv");
  GraphBuilder b(*graph);
  Value* x = b.input("x", TensorType(DType::kF32, Shape{batch, 16, 24, 24}));
  auto silu = [&](Value* v, const std::string& name) {
    return b.add(Op(ops::Mul{}), {v, b.add(Op(ops::Sigmoid{}), {v}, name + "_sigmoid")}, name);
  };
  Value* e = silu(conv(b, x, 16, 96, 1, 1, 100), "expand_silu");
  Value* d = silu(conv(b, e, 96, 96, 3, 1, 102, /*group=*/96), "dw_silu");
  Value* g = b.add(Op(ops::GlobalAveragePool{}), {d}, "se_pool");
  Value* r = silu(conv(b, g, 96, 4, 1, 1, 104), "se_reduce_silu");
  Value* s = b.add(Op(ops::Sigmoid{}), {conv(b, r, 4, 96, 1, 1, 106)}, "se_gate");
  Value* scaled = b.add(Op(ops::Mul{}), {d, s}, "se_scale");
  Value* y = b.add(Op(ops::Add{}), {conv(b, scaled, 96, 16, 1, 1, 108), x}, "residual");
  auto relu6 = [&](Value* v, const std::string& name) {
    return b.add(Op(ops::Clip{}),
                 {v, b.constant(Tensor::scalar(0.0f)), b.constant(Tensor::scalar(6.0f))}, name);
  };
  Value* m = relu6(conv(b, y, 16, 64, 1, 1, 110), "mb_expand_relu6");
  m = relu6(conv(b, m, 64, 64, 3, 2, 112, /*group=*/64), "mb_dw_relu6");
  b.output(conv(b, m, 64, 24, 1, 1, 114));
  b.output(y);
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return graph;
}

// Squeeze-and-excitation of 40 channels (not a multiple of 16: nChw16c pads the gate) reduced to
// 10, at batch 1: its two convolutions run as one step of kiln's in either layout.
TEST_P(CpuProgramLayouts, ExcitationOfPaddedChannelsMatchesRef) {
  ScopedEnv layout("KILN_CPU_CONV_LAYOUT", GetParam());
  auto network = [] {
    auto graph = std::make_shared<Graph>("excitation");
    GraphBuilder b(*graph);
    Value* x = b.input("x", TensorType(DType::kF32, Shape{1, 40, 6, 6}));
    auto silu = [&](Value* v, const std::string& name) {
      return b.add(Op(ops::Mul{}), {v, b.add(Op(ops::Sigmoid{}), {v}, name + "_sigmoid")}, name);
    };
    Value* d = silu(conv(b, x, 40, 40, 3, 1, 130, /*group=*/40), "dw_silu");
    Value* g = b.add(Op(ops::GlobalAveragePool{}), {d}, "se_pool");
    Value* r = silu(conv(b, g, 40, 10, 1, 1, 132), "se_reduce_silu");
    Value* gate = b.add(Op(ops::Sigmoid{}), {conv(b, r, 10, 40, 1, 1, 134)}, "se_gate");
    b.output(conv(b, b.add(Op(ops::Mul{}), {d, gate}, "se_scale"), 40, 24, 1, 1, 136));
    b.output(gate);
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  const std::vector<Tensor> inputs = {random_tensor(Shape{1, 40, 6, 6}, 138)};
  std::vector<Tensor> want = run(*compile_for(network(), "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(network(), "cpu");
  ASSERT_NE(exe, nullptr);
  const cpu::Program* program = cpu_program(*exe);
  ASSERT_NE(program, nullptr);
  expect_close(want, run(*exe, inputs), 1e-4f);
  if (cpu::has_fast_silu()) {
    EXPECT_EQ(program->count_steps("Conv+SiLU+Conv+Sigmoid"), 1);
  }
  expect_no_live_overlap(*program);
}

TEST(CpuProgram, DepthwiseSeparableNetworksRunChannelBlockedAndMatchRef) {
  for (int64_t batch : {1, 2}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    auto layout = cpu::choose_conv_layout(*mbconv_network(batch));
    ASSERT_TRUE(layout.ok()) << layout.status().to_string();
    EXPECT_EQ(*layout, cpu::ConvLayout::kBlocked16);
    const std::vector<Tensor> inputs = {random_tensor(Shape{batch, 16, 24, 24}, 120)};
    std::vector<Tensor> want = run(*compile_for(mbconv_network(batch), "ref"), inputs);
    std::shared_ptr<Executable> exe = compile_for(mbconv_network(batch), "cpu");
    ASSERT_NE(exe, nullptr);
    const cpu::Program* program = cpu_program(*exe);
    ASSERT_NE(program, nullptr);
    expect_close(want, run(*exe, inputs), 1e-3f);
    // The squeeze-and-excitation pool is computed in the depthwise convolution's SiLU pass; at
    // batch 1 its two convolutions (one pixel) are one step of kiln's (excitation.h).
    EXPECT_EQ(program->count_steps("Conv+SiLU+GlobalAveragePool"), 1);
    EXPECT_EQ(program->count_steps("GlobalAveragePool"), 0);
    EXPECT_EQ(program->count_steps("Conv+SiLU+Conv+Sigmoid"), batch == 1 ? 1 : 0);
    EXPECT_EQ(program->count_steps("Conv+SiLU"), batch == 1 ? 1 : 2);
    EXPECT_EQ(program->count_steps("Conv+Sigmoid"), batch == 1 ? 0 : 1);
    EXPECT_EQ(program->count_steps("Conv+Clip"), 2);
    // At batch 1 the network's work (3.2M multiply-adds) is under kSmallProgramWork: every step
    // runs on one thread. At batch 2 the squeeze-and-excitation convolutions (one pixel, a few
    // hundred weights) and the depthwise one (1.0M multiply-adds, kSmallStepWork) run on one
    // thread; the expansion (1.8M) on the whole team.
    EXPECT_EQ(program->one_thread(), batch == 1);
    int one_thread_silu = 0;
    for (const auto& step : program->steps()) {
      if (step->kind.find("Sigmoid") != std::string::npos || program->one_thread()) {
        EXPECT_TRUE(step->one_thread) << step->kind;
      }
      if (step->kind.rfind("Conv+SiLU", 0) == 0) one_thread_silu += step->one_thread ? 1 : 0;
    }
    EXPECT_EQ(one_thread_silu, batch == 1 ? 3 : 2);
    // At batch 1 the gate scales the projection's weights (no Mul step); at batch 2 it cannot.
    EXPECT_EQ(program->count_steps("Mul+Conv+Add"), batch == 1 ? 1 : 0);
    EXPECT_EQ(program->count_steps("Mul"), batch == 1 ? 0 : 1);
    // Only the input and the two outputs change layout.
    EXPECT_EQ(program->count_steps("Reorder"), 3);
    expect_no_live_overlap(*program);
  }
  {
    // The same in the layouts oneDNN picks (NHWC, the gate plain).
    ScopedEnv any("KILN_CPU_CONV_LAYOUT", "any");
    for (int64_t batch : {1, 2}) {
      const std::vector<Tensor> inputs = {random_tensor(Shape{batch, 16, 24, 24}, 121)};
      std::vector<Tensor> want = run(*compile_for(mbconv_network(batch), "ref"), inputs);
      std::shared_ptr<Executable> exe = compile_for(mbconv_network(batch), "cpu");
      ASSERT_NE(exe, nullptr);
      ASSERT_NE(cpu_program(*exe), nullptr);
      expect_close(want, run(*exe, inputs), 1e-3f);
      EXPECT_EQ(cpu_program(*exe)->count_steps("Mul+Conv+Add"), batch == 1 ? 1 : 0);
    }
  }
  // A network without depthwise convolutions keeps the layouts oneDNN picks.
  auto layout = cpu::choose_conv_layout(*tiny_resnet(1));
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(*layout, cpu::ConvLayout::kAny);
}

// SqueezeNet's shape: a 3x3 stride-2 stem, a max pool, then fire modules (1x1 squeeze to few
// channels, 1x1 and 3x3 expands concatenated).
std::shared_ptr<Graph> fire_network(int64_t batch) {
  auto graph = std::make_shared<Graph>("fire_network");
  GraphBuilder b(*graph);
  Value* x = b.input("image", TensorType(DType::kF32, Shape{batch, 3, 34, 34}));
  Value* h = b.add(Op(ops::Relu{}), {conv(b, x, 3, 64, 3, 2, 130)}, "stem_relu");
  ops::MaxPool pool;
  pool.kernel_shape = std::vector<int64_t>{2, 2};
  pool.strides = std::vector<int64_t>{2, 2};
  h = b.add(Op(pool), {h}, "pool");
  int64_t channels = 64;
  uint32_t seed = 140;
  for (int64_t squeeze : {16, 32}) {
    auto relu = [&](Value* v) {
      return b.add(Op(ops::Relu{}), {v}, "relu" + std::to_string(seed));
    };
    Value* s = relu(conv(b, h, channels, squeeze, 1, 1, seed));
    Value* e1 = relu(conv(b, s, squeeze, 4 * squeeze, 1, 1, seed + 2));
    Value* e3 = relu(conv(b, s, squeeze, 4 * squeeze, 3, 1, seed + 4));
    h = b.add(Op(ops::Concat{.axis = 1}), {e1, e3}, "fire" + std::to_string(seed));
    channels = 8 * squeeze;
    seed += 10;
  }
  b.output(h);
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  return graph;
}

TEST(CpuProgram, FireModulesRunChannelBlockedAndMatchRef) {
  // Winograd pays from 32 input channels: the network runs blocked, its 16-channel 3x3 as a
  // direct convolution; at batch 1 its stem and pool are one step of kiln's own, and the last
  // Concat (no reader to distribute it over) copies blocks.
  for (int64_t batch : {1, 8}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    auto layout = cpu::choose_conv_layout(*fire_network(batch));
    ASSERT_TRUE(layout.ok()) << layout.status().to_string();
    EXPECT_EQ(*layout, cpu::ConvLayout::kBlocked16);
    const std::vector<Tensor> inputs = {random_tensor(Shape{batch, 3, 34, 34}, 131)};
    std::shared_ptr<Executable> exe =
        compile_matching_ref([&] { return fire_network(batch); }, inputs, 1e-3f);
    ASSERT_NE(exe, nullptr);
    const cpu::Program* program = cpu_program(*exe);
    ASSERT_NE(program, nullptr);
    std::string steps;
    for (const auto& step : program->steps()) steps += step->kind + "\n";
    // Reorders only into the network and out of it.
    EXPECT_LE(program->count_steps("Reorder"), 2) << steps;
    if (batch == 1) {
      EXPECT_EQ(program->count_steps("Conv+Relu+MaxPool"), 1) << steps;
      EXPECT_EQ(program->count_steps("Concat"), 1) << steps;
      for (const auto& step : program->steps()) {
        if (step->kind == "Concat") {
          EXPECT_EQ(dynamic_cast<const cpu::PrimitiveStep*>(step.get()), nullptr)
              << "the blocks copied by kiln, not oneDNN's concat";
        }
      }
    }
    expect_no_live_overlap(*program);
  }
}

}  // namespace
}  // namespace kiln::compiler
