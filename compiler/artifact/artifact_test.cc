// SPDX-License-Identifier: Apache-2.0
// Artifacts on real files: round trips of every constant dtype, subgraphs and symbolic dims;
// mismatch, truncation and bit-flip detection with clear errors; a corrupt graph never crashes.
#include "compiler/artifact/artifact.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "compiler/artifact/checksum.h"
#include "compiler/artifact/graph_codec.h"
#include "compiler/ir/builder.h"
#include "compiler/ir/printer.h"
#include "compiler/onnx/importer.h"
#include "compiler/ops/all_ops.h"
#include "core/npy.h"

namespace kiln::compiler {
namespace {

namespace fs = std::filesystem;

std::span<const uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(Xxhash64, MatchesTheSpecificationsReferenceValues) {
  EXPECT_EQ(xxhash64(as_bytes("")), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(xxhash64(as_bytes("a")), 0xD24EC4F1A98C6E5BULL);
  EXPECT_EQ(xxhash64(as_bytes("abc")), 0x44BC2CF5AD770999ULL);
  EXPECT_EQ(xxhash64(as_bytes("asdf")), 0x415872F599CEA71EULL);
  EXPECT_EQ(xxhash64(as_bytes("Call me Ishmael.")), 0x6D04390FC9D61A90ULL);
  EXPECT_EQ(xxhash64(as_bytes("Nobody inspects the spammish repetition")), 0xFBCEA83C8A378BF1ULL);
  EXPECT_EQ(xxhash64(as_bytes("Some years ago--never mind how long precisely-")),
            0x8F26F2B986AFDC52ULL);
  EXPECT_EQ(xxhash64(as_bytes(""), 1), 0xD5AFBA1336A3BE4BULL);
}

TEST(Xxhash64, PiecesOfAnySizeHashLikeTheWhole) {
  std::mt19937 rng(5);
  for (size_t size : {0u, 1u, 31u, 32u, 33u, 64u, 100u, 1000u, 4099u}) {
    std::vector<uint8_t> bytes(size);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    const uint64_t whole = xxhash64(bytes, 7);
    for (int trial = 0; trial < 20; ++trial) {
      Xxhash64 h(7);
      size_t at = 0;
      while (at < size) {
        size_t n = std::min<size_t>(size - at, rng() % 70);
        h.update(std::span<const uint8_t>(bytes).subspan(at, n));
        at += n;
      }
      ASSERT_EQ(h.digest(), whole) << size << " bytes, trial " << trial;
    }
  }
}

class ArtifactTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln_artifact_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A cpu artifact of two Winograd 3x3 convolutions and a 1x1 at `batch`: it stores the weights
  // once, plain, and gives the compiled executable's outputs when loaded.
  void save_and_load_cpu_winograd(int64_t batch);

  // Compiles `graph` for `target` and writes it as an artifact at `file`.
  std::shared_ptr<Executable> save(std::shared_ptr<Graph> graph, const std::string& file,
                                   const char* target = "ref", bool optimize = false) {
    auto t = make_target(target);
    EXPECT_TRUE(t.ok());
    CompileOptions options;
    options.optimize = optimize;
    auto exe = compile(std::move(graph), **t, options);
    EXPECT_TRUE(exe.ok()) << exe.status().message();
    ArtifactSource source;
    source.name = "model.onnx";
    source.recompile_command =
        fmt::format("kiln compile model.onnx --target {} -o {}", target, file);
    Status s = save_artifact(file, **exe, options, source);
    EXPECT_TRUE(s.ok()) << s.message();
    return *exe;
  }

  fs::path dir_;
};

// A tensor of `dtype` with distinct, non-trivial values (strings included).
Tensor sample_tensor(DType dtype, Shape shape, uint32_t seed) {
  Tensor t(dtype, std::move(shape));
  std::mt19937 rng(seed);
  visit_dtype(dtype, [&]<class T>() {
    for (T& v : t.span<T>()) {
      if constexpr (std::is_same_v<T, std::string>) {
        v = "s" + std::to_string(rng() % 1000) + std::string(rng() % 5, 'x');
      } else if constexpr (std::is_same_v<T, bool>) {
        v = (rng() & 1) != 0;
      } else if constexpr (std::is_integral_v<T>) {
        v = static_cast<T>(rng());
      } else {
        v = T(static_cast<float>(static_cast<int>(rng() % 20001) - 10000) / 7.0f);
      }
    }
  });
  return t;
}

TEST_F(ArtifactTest, EveryConstantDtypeRoundTripsAndWrapsTheMappedFile) {
  auto graph = std::make_shared<Graph>();
  GraphBuilder b(*graph);
  std::vector<Tensor> expected;
  for (int d = 0; d < kNumDTypes; ++d) {
    const DType dtype = static_cast<DType>(d);
    for (Shape shape : {Shape{}, Shape{3, 5}, Shape{0, 4}, Shape{2, 3, 17}}) {
      expected.push_back(sample_tensor(dtype, shape, static_cast<uint32_t>(d * 10 + shape.rank())));
      b.output(
          b.constant(expected.back(), fmt::format("c_{}_{}", dtype_name(dtype), shape.rank())));
    }
  }
  ASSERT_TRUE(b.status().ok()) << b.status().message();
  const std::string file = path("dtypes.kiln");
  save(graph, file);

  auto artifact = open_artifact(file);
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  auto loaded_graph = artifact->graph();
  ASSERT_TRUE(loaded_graph.ok()) << loaded_graph.status().message();
  std::span<const uint8_t> weights = artifact->section_bytes(*artifact->find_section("weights"));
  int wrapped = 0;
  for (const auto& node : (*loaded_graph)->nodes()) {
    const Tensor* t = node->output(0)->constant_value();
    ASSERT_NE(t, nullptr);
    if (t->dtype() == DType::kString || t->numel() == 0) continue;
    const auto* p = static_cast<const uint8_t*>(t->raw_data());
    EXPECT_TRUE(p >= weights.data() && p + t->nbytes() <= weights.data() + weights.size())
        << node->describe() << " was copied instead of wrapping the mapped weights";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << node->describe();
    ++wrapped;
  }
  EXPECT_EQ(wrapped, (kNumDTypes - 1) * 3);

  auto loaded = load_artifact(file);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->header.target, "ref");
  auto outputs = loaded->executable->run({});
  ASSERT_TRUE(outputs.ok()) << outputs.status().message();
  ASSERT_EQ(outputs->size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE((*outputs)[i].tensor().equals(expected[i]))
        << "output " << i << ": " << (*outputs)[i].to_string();
  }
  EXPECT_EQ(print_graph(**loaded_graph), print_graph(*graph));
}

TEST_F(ArtifactTest, SharedConstantsAreStoredOnce) {
  auto graph = std::make_shared<Graph>();
  GraphBuilder b(*graph);
  Tensor w = sample_tensor(DType::kF32, Shape{256, 256}, 7);
  Value* x = b.input("x", TensorType(DType::kF32, Shape{256, 256}));
  Value* a = b.add(ops::Add{}, {x, b.constant(w, "w1")}, "a");
  b.output(b.add(ops::Mul{}, {a, b.constant(w, "w2")}, "m"));
  ASSERT_TRUE(b.status().ok());
  const std::string file = path("shared.kiln");
  save(graph, file);
  auto artifact = open_artifact(file);
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  EXPECT_EQ(artifact->find_section("weights")->size, w.nbytes());
  EXPECT_LT(artifact->size(), w.nbytes() + 4096);
}

// The file save_artifact streams equals serialize_artifact's bytes, padding and a target's own
// section included.
TEST_F(ArtifactTest, SavedFileEqualsTheSerializedBytesWithATargetSection) {
  auto graph = std::make_shared<Graph>();
  GraphBuilder b(*graph);
  Value* x = b.input("x", TensorType(DType::kF32, Shape{3}));
  for (int64_t n : {3, 1, 17, 5}) {  // odd sizes: padding between the weights
    b.output(b.constant(sample_tensor(DType::kI8, Shape{n}, static_cast<uint32_t>(n)),
                        fmt::format("c{}", n)));
  }
  b.output(b.add(ops::Mul{}, {x, b.constant(sample_tensor(DType::kF32, Shape{3}, 9), "m")}));
  ASSERT_TRUE(b.status().ok()) << b.status().message();
  auto t = make_target("ref");
  auto exe = compile(graph, **t, CompileOptions{false, 0});
  ASSERT_TRUE(exe.ok());
  ArtifactSource source{"m.onnx", 1, 2, {{"batch", "1"}}, "kiln compile m.onnx -o m.kiln"};
  const std::vector<uint8_t> test_bytes = {1, 2, 3, 4, 5};
  std::vector<TargetSection> extra = {TargetSection::of("ref.test", test_bytes),
                                      TargetSection::of("ref.empty", {})};
  ASSERT_TRUE(save_artifact(path("m.kiln"), **exe, {}, source, extra).ok());
  auto saved = read_file(path("m.kiln"));
  auto bytes = serialize_artifact(make_artifact_header(**exe, {}, source), (*exe)->graph(), extra);
  ASSERT_TRUE(saved.ok() && bytes.ok());
  EXPECT_EQ(*saved, std::string(bytes->begin(), bytes->end()));
  auto artifact = open_artifact(path("m.kiln"));
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  const ArtifactSection* s = artifact->find_section("ref.test");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->kind, SectionKind::kTargetData);
  EXPECT_EQ(s->offset % 64, 0u);
  std::span<const uint8_t> got = artifact->section_bytes(*s);
  EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.end()), test_bytes);
  EXPECT_EQ(artifact->find_section("ref.empty")->size, 0u);
  EXPECT_EQ(artifact->header().source.options[0].second, "1");
  EXPECT_FALSE(fs::exists(path("m.kiln") + ".tmp"));
}

TEST_F(ArtifactTest, SymbolicDimsSurviveAndRunAtAnySize) {
  auto graph = std::make_shared<Graph>();
  GraphBuilder b(*graph);
  Value* x = b.input("x", TensorType(DType::kF32, {Dim::symbolic("batch"), Dim(3)}));
  Value* y = b.add(ops::Relu{}, {x}, "relu");
  b.output(
      b.add(ops::Add{}, {y, b.constant(Tensor::from_vector<float>({1, 2, 3}), "bias")}, "out"));
  ASSERT_TRUE(b.status().ok());
  const std::string file = path("symbolic.kiln");
  save(graph, file);
  auto loaded = load_artifact(file);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ASSERT_EQ(loaded->header.inputs.size(), 1u);
  EXPECT_EQ(loaded->header.inputs[0].type.to_string(), "f32[batch,3]");
  EXPECT_EQ(loaded->executable->graph().inputs()[0]->type().to_string(), "f32[batch,3]");
  EXPECT_EQ(loaded->executable->graph().outputs()[0]->type().to_string(), "f32[batch,3]");
  for (int64_t n : {1, 4}) {
    Tensor in = sample_tensor(DType::kF32, Shape{n, 3}, 3);
    auto out = loaded->executable->run({in});
    ASSERT_TRUE(out.ok()) << out.status().message();
    const Tensor& t = (*out)[0].tensor();
    ASSERT_EQ(t.shape(), (Shape{n, 3}));
    for (int64_t i = 0; i < t.numel(); ++i) {
      EXPECT_EQ(t.data<float>()[i],
                std::max(in.data<float>()[i], 0.0f) + static_cast<float>(i % 3 + 1));
    }
  }
}

// Seeded inputs for every graph input; unknown dims become 2.
std::vector<Argument> make_inputs(const Graph& g, uint32_t seed) {
  std::vector<Argument> inputs;
  for (const Value* v : g.inputs()) {
    const TensorType& t = v->tensor_type();
    std::vector<int64_t> dims;
    for (const Dim& d : *t.dims) dims.push_back(d.known() ? d.value : 2);
    Tensor x =
        sample_tensor(t.dtype, Shape(dims), seed * 100 + static_cast<uint32_t>(inputs.size()));
    if (t.dtype == DType::kI64) {
      for (int64_t& e : x.span<int64_t>()) e = std::abs(e) % 5;  // trip counts, indices
    }
    if (t.dtype == DType::kBool) {
      for (bool& e : x.span<bool>()) e = seed % 2 == 0;  // If conditions both ways, Loops run
    }
    inputs.emplace_back(x);
  }
  return inputs;
}

TEST_F(ArtifactTest, SubgraphsOfIfLoopAndScanRoundTrip) {
  for (const char* name : {"test_if", "test_loop11", "test_scan9_sum", "test_lstm_defaults"}) {
    SCOPED_TRACE(name);
    const std::string onnx =
        std::string(KILN_SOURCE_DIR) + "/tests/fuzz/corpus/onnx/" + name + ".onnx";
    auto model = import_onnx_file(onnx);
    ASSERT_TRUE(model.ok()) << model.status().message();
    std::shared_ptr<Graph> graph(std::move((*model)->graph));
    const std::string file = path(std::string(name) + ".kiln");
    std::shared_ptr<Executable> original = save(graph, file, "ref", /*optimize=*/true);
    auto loaded = load_artifact(file);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    EXPECT_EQ(print_graph(loaded->executable->graph()), print_graph(original->graph()));
    int ran = 0;
    for (uint32_t seed : {1u, 2u, 3u}) {
      auto a = original->run(make_inputs(original->graph(), seed));
      auto b = loaded->executable->run(make_inputs(original->graph(), seed));
      ASSERT_EQ(a.ok(), b.ok()) << (a.ok() ? b.status().message() : a.status().message());
      if (!a.ok()) continue;  // e.g. a Loop that runs no iteration cannot type its scan output
      ++ran;
      ASSERT_EQ(a->size(), b->size());
      for (size_t i = 0; i < a->size(); ++i) {
        ASSERT_EQ((*a)[i].to_string(), (*b)[i].to_string());
        if ((*a)[i].is_tensor()) {
          EXPECT_TRUE((*a)[i].tensor().equals((*b)[i].tensor()));
        }
      }
    }
    EXPECT_GT(ran, 0) << "no seed gave inputs the model accepts";
  }
  // test_if has subgraphs at all: the printed IR shows both branches.
  auto if_graph = open_artifact(path("test_if.kiln"));
  ASSERT_TRUE(if_graph.ok());
  std::string printed = print_graph(**if_graph->graph());
  EXPECT_NE(printed.find("then_branch"), std::string::npos) << printed;
}

TEST_F(ArtifactTest, TinyCnnGivesIdenticalOutputsOnEveryTarget) {
  const std::string onnx = std::string(KILN_SOURCE_DIR) + "/examples/models/tiny_cnn.onnx";
  auto digit = read_npy(std::string(KILN_SOURCE_DIR) + "/examples/models/digit.npy");
  ASSERT_TRUE(digit.ok());
  for (const std::string& target : target_names()) {
    SCOPED_TRACE(target);
    auto model = import_onnx_file(onnx);
    ASSERT_TRUE(model.ok());
    const std::string file = path("tiny_cnn_" + target + ".kiln");
    auto original = save(std::shared_ptr<Graph>(std::move((*model)->graph)), file, target.c_str(),
                         /*optimize=*/true);
    auto loaded = load_artifact(file);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    EXPECT_EQ(loaded->executable->target(), target);
    auto a = original->run({*digit});
    auto b = loaded->executable->run({*digit});
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ((*a)[0].tensor().nbytes(), (*b)[0].tensor().nbytes());
    EXPECT_EQ(std::memcmp((*a)[0].tensor().raw_data(), (*b)[0].tensor().raw_data(),
                          (*a)[0].tensor().nbytes()),
              0);
  }
}

Status parse_all(const std::vector<uint8_t>& bytes);

// A cpu artifact stores each weight once, plain (no packed copy: the file is the size of the
// weights), and packs it on load, Winograd weights included, to the same outputs. Loading from a
// buffer leaves the buffer's bytes as they were (only a file mapping's pages are released).
TEST_F(ArtifactTest, CpuArtifactsStoreWeightsOnceAndPackOnlyWinogradOnLoad) {
  if (!make_target("cpu").ok()) GTEST_SKIP() << "no cpu target in this build";
  // Batch 1 runs Winograd F(2x2, 3x3), batch 16 F(4x4, 3x3): both pack from the plain weights
  // (stored plain: their transform is larger); the 1x1's are stored packed, used in place.
  for (int64_t batch : {1, 16}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    save_and_load_cpu_winograd(batch);
  }
}

void ArtifactTest::save_and_load_cpu_winograd(int64_t batch) {
  const std::vector<Tensor> weights = {sample_tensor(DType::kF32, Shape{64, 64, 3, 3}, 1),
                                       sample_tensor(DType::kF32, Shape{64, 64, 3, 3}, 2),
                                       sample_tensor(DType::kF32, Shape{32, 64, 1, 1}, 3)};
  auto graph = std::make_shared<Graph>();
  GraphBuilder b(*graph);
  Value* x = b.input("x", TensorType(DType::kF32, Shape{batch, 64, 10, 10}));
  ops::Conv same;  // 3x3, stride 1, padded: Winograd on this graph (most work is 3x3, 64 wide)
  same.pads = std::vector<int64_t>{1, 1, 1, 1};
  Value* y = b.add(ops::Relu{}, {b.add(Op(same), {x, b.constant(weights[0], "w0")})});
  y = b.add(Op(same), {y, b.constant(weights[1], "w1")});
  b.output(b.add(ops::Conv{}, {y, b.constant(weights[2], "w2")}));
  ASSERT_TRUE(b.status().ok()) << b.status().message();
  const std::string file = path(fmt::format("cpu{}.kiln", batch));
  auto original = save(graph, file, "cpu", true);
  const Tensor input = sample_tensor(DType::kF32, Shape{batch, 64, 10, 10}, 4);
  auto expected = original->run({input});
  ASSERT_TRUE(expected.ok()) << expected.status().message();

  auto artifact = open_artifact(file);
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  // Graph, weights and the list of those stored packed: each weight once.
  ASSERT_EQ(artifact->sections().size(), 3u);
  ASSERT_NE(artifact->find_section("cpu.packed"), nullptr);
  size_t weight_bytes = 0;
  for (const Tensor& w : weights) weight_bytes += w.nbytes();
  EXPECT_EQ(artifact->find_section("weights")->size, weight_bytes);
  EXPECT_LE(static_cast<double>(artifact->size()), 1.1 * static_cast<double>(weight_bytes));
  auto same_output = [&](const LoadedArtifact& loaded) {
    auto out = loaded.executable->run({input});
    ASSERT_TRUE(out.ok()) << out.status().message();
    const Tensor& want = (*expected)[0].tensor();
    const Tensor& got = (*out)[0].tensor();
    ASSERT_EQ(want.nbytes(), got.nbytes());
    EXPECT_EQ(std::memcmp(want.raw_data(), got.raw_data(), want.nbytes()), 0);
  };
  {
    auto loaded = load_artifact(*artifact);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    same_output(*loaded);
    // The released pages of the mapping read back from the file: ref agrees on the graph (the
    // packed weights unpacked).
    auto stored = artifact->graph();
    ASSERT_TRUE(stored.ok()) << stored.status().message();
    auto ref = compile(*stored, **make_target("ref"), CompileOptions{false, 0});
    ASSERT_TRUE(ref.ok());
    auto ref_out = (*ref)->run({input});
    ASSERT_TRUE(ref_out.ok()) << ref_out.status().message();
    const auto want = (*expected)[0].tensor().span<float>();
    const auto got = (*ref_out)[0].tensor().span<float>();
    float scale = 0;  // Winograd's error is relative to the outputs' scale, not to each output
    for (float v : want) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4 * scale) << i;
  }
  auto read = read_file(file);
  ASSERT_TRUE(read.ok());
  auto buffer = std::make_shared<const std::string>(*read);
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(buffer->data()), buffer->size());
  auto from_buffer = parse_artifact(bytes, buffer, "buffer.kiln");
  ASSERT_TRUE(from_buffer.ok()) << from_buffer.status().message();
  auto loaded = load_artifact(*from_buffer);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  same_output(*loaded);
  EXPECT_EQ(*buffer, *read);
}

TEST_F(ArtifactTest, CompilingTwiceWritesTheSameBytes) {
  const std::string onnx = std::string(KILN_SOURCE_DIR) + "/examples/models/tiny_cnn.onnx";
  std::vector<std::string> files;
  for (int i = 0; i < 2; ++i) {
    auto model = import_onnx_file(onnx);
    ASSERT_TRUE(model.ok());
    files.push_back(path(fmt::format("copy{}.kiln", i)));
    save(std::shared_ptr<Graph>(std::move((*model)->graph)), files.back(),
         target_names().back().c_str(), /*optimize=*/true);
  }
  auto a = read_file(files[0]);
  auto b = read_file(files[1]);
  ASSERT_TRUE(a.ok() && b.ok());
  // The recompile command names the output file; everything else must match byte for byte.
  ASSERT_EQ(a->size(), b->size());
  size_t differing = 0;
  for (size_t i = 0; i < a->size(); ++i) differing += (*a)[i] != (*b)[i];
  EXPECT_LE(differing, 2u + 8 + 8);  // one name digit, the header and preamble checksums
}

TEST_F(ArtifactTest, TheSourceModelHashTellsAStaleArtifact) {
  const std::string onnx = std::string(KILN_SOURCE_DIR) + "/examples/models/tiny_cnn.onnx";
  auto bytes = read_file(onnx);
  ASSERT_TRUE(bytes.ok());
  std::span<const uint8_t> model(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size());
  auto imported = import_onnx_bytes(model);
  ASSERT_TRUE(imported.ok());
  auto target = make_target("ref");
  auto exe = compile(std::shared_ptr<Graph>(std::move((*imported)->graph)), **target);
  ASSERT_TRUE(exe.ok());
  ArtifactSource source{"tiny_cnn.onnx", model.size(), xxhash64(model), {}, "kiln compile ..."};
  ASSERT_TRUE(save_artifact(path("t.kiln"), **exe, {}, source).ok());
  auto artifact = open_artifact(path("t.kiln"));
  ASSERT_TRUE(artifact.ok());
  EXPECT_TRUE(artifact->check_source(model).ok());
  std::string edited = *bytes;
  edited[edited.size() / 2] ^= 1;
  Status s = artifact->check_source(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(edited.data()), edited.size()));
  EXPECT_NE(s.message().find(" was compiled from another version of tiny_cnn.onnx (" +
                             std::to_string(model.size()) + " bytes, xxh64 "),
            std::string::npos)
      << s.message();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
}

// A small valid artifact's bytes.
std::vector<uint8_t> small_artifact(const std::string& target = "ref") {
  auto graph = std::make_shared<Graph>();
  GraphBuilder b(*graph);
  Value* x = b.input("x", TensorType(DType::kF32, {Dim::symbolic("n"), Dim(4)}));
  Value* w = b.constant(sample_tensor(DType::kF32, Shape{4, 3}, 1), "w");
  Value* names = b.constant(sample_tensor(DType::kString, Shape{2}, 2), "names");
  b.output(b.add(ops::MatMul{}, {x, w}, "mm"));
  b.output(names);
  KILN_CHECK(b.status().ok(), b.status().message());
  auto t = make_target(target);
  KILN_CHECK(t.ok(), "target");
  auto exe = compile(graph, **t);
  KILN_CHECK(exe.ok(), exe.status().message());
  ArtifactSource source;
  source.name = "model.onnx";
  source.recompile_command = "kiln compile model.onnx --target " + target + " -o model.kiln";
  auto bytes = serialize_artifact(make_artifact_header(**exe, {}, source), (*exe)->graph());
  KILN_CHECK(bytes.ok(), bytes.status().message());
  return *bytes;
}

// Parses and decodes `bytes` as "model.kiln"; the status of the first failing step.
Status parse_all(const std::vector<uint8_t>& bytes) {
  auto a = parse_artifact(bytes, nullptr, "model.kiln");
  if (!a.ok()) return a.status();
  KILN_RETURN_IF_ERROR(a->check_compatible());
  return a->graph().status();
}

TEST_F(ArtifactTest, TruncationAtEveryOffsetIsAClearError) {
  const std::vector<uint8_t> bytes = small_artifact();
  ASSERT_TRUE(parse_all(bytes).ok()) << parse_all(bytes).message();
  for (size_t n = 0; n < bytes.size(); ++n) {
    Status s = parse_all(std::vector<uint8_t>(bytes.begin(), bytes.begin() + n));
    ASSERT_FALSE(s.ok()) << "a " << n << "-byte prefix was accepted";
    ASSERT_NE(s.message().find("model.kiln"), std::string::npos) << s.message();
    if (n == 0) {
      EXPECT_NE(s.message().find("is not a kiln artifact"), std::string::npos) << s.message();
    } else {
      EXPECT_NE(s.message().find("truncated"), std::string::npos) << n << ": " << s.message();
      EXPECT_NE(s.message().find("kiln compile"), std::string::npos) << s.message();
    }
  }
  // The same through a real file.
  std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(bytes.size() / 2));
  ASSERT_TRUE(write_file_atomic(path("cut.kiln"), cut).ok());
  auto loaded = load_artifact(path("cut.kiln"));
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find(path("cut.kiln") + " is truncated: its header says"),
            std::string::npos)
      << loaded.status().message();
}

TEST_F(ArtifactTest, EverySingleBitFlipIsDetected) {
  const std::vector<uint8_t> bytes = small_artifact();
  int corrupt_messages = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::vector<uint8_t> flipped = bytes;
    flipped[i] ^= static_cast<uint8_t>(1u << (i % 8));
    Status s = parse_all(flipped);
    ASSERT_FALSE(s.ok()) << "a flip of byte " << i << " went unnoticed";
    ASSERT_NE(s.message().find("model.kiln"), std::string::npos) << s.message();
    ASSERT_NE(s.message().find("kiln compile"), std::string::npos) << i << ": " << s.message();
    if (s.message().find("corrupt") != std::string::npos) ++corrupt_messages;
  }
  EXPECT_GT(corrupt_messages, static_cast<int>(bytes.size()) - 16);
  std::vector<uint8_t> flipped = bytes;
  flipped[flipped.size() - 3] ^= 0x10;  // inside the weights
  Status s = parse_all(flipped);
  EXPECT_NE(s.message().find("section \"weights\" is corrupt (checksum mismatch)"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("recompile it with: kiln compile model.onnx --target ref -o "
                             "model.kiln"),
            std::string::npos)
      << s.message();
}

// Rewrites the header block of `bytes` in place (same length) and fixes both checksums.
void patch_header(std::vector<uint8_t>& bytes, const std::string& from, const std::string& to) {
  ASSERT_EQ(from.size(), to.size());
  uint64_t header_size;
  std::memcpy(&header_size, bytes.data() + 32, 8);
  auto begin = bytes.begin() + 64;
  auto end = begin + static_cast<long>(header_size);
  auto it = std::search(begin, end, from.begin(), from.end());
  ASSERT_NE(it, end) << from;
  std::copy(to.begin(), to.end(), it);
  uint64_t sum = xxhash64(std::span<const uint8_t>(bytes.data() + 64, header_size));
  std::memcpy(bytes.data() + 40, &sum, 8);
  sum = xxhash64(std::span<const uint8_t>(bytes.data(), 56));
  std::memcpy(bytes.data() + 56, &sum, 8);
}

TEST_F(ArtifactTest, AnotherMachineOrVersionIsAClearMismatch) {
  const std::string target = target_names().back();  // cpu where this build has it
  const std::vector<uint8_t> bytes = small_artifact(target);
  auto artifact = parse_artifact(bytes, nullptr, "model.kiln");
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  ASSERT_TRUE(artifact->check_compatible().ok());
  auto graph = artifact->graph();
  ASSERT_TRUE(graph.ok());
  const std::string hint =
      "; recompile it with: kiln compile model.onnx --target " + target + " -o model.kiln";

  // An ISA extension this CPU lacks.
  std::vector<std::string> have = cpu_isa_flags();
  std::string lacking = "avx10_2";
  for (const char* f : {"avx512_vnni", "amx_tile", "avx512_fp16", "avx512_bf16", "avx512f"}) {
    if (std::find(have.begin(), have.end(), f) == have.end()) {
      lacking = f;
      break;
    }
  }
  ArtifactHeader header = artifact->header();
  for (auto& [key, value] : header.fingerprint) {
    if (key == "cpu_isa") value += (value.empty() ? "" : ",") + lacking;
  }
  if (target == "ref") header.fingerprint.emplace_back("cpu_isa", lacking);
  auto other_cpu = serialize_artifact(header, **graph);
  ASSERT_TRUE(other_cpu.ok());
  Status s = parse_all(*other_cpu);
  EXPECT_EQ(s.message(),
            "model.kiln was compiled for a CPU with " + lacking + "; this CPU lacks it" + hint);

  // Another kiln version, edited in the file's bytes.
  std::vector<uint8_t> edited = bytes;
  std::string version(kiln_version());
  std::string other_version = version;
  other_version.back() = other_version.back() == '9' ? '8' : '9';
  patch_header(edited, version, other_version);
  s = parse_all(edited);
  EXPECT_EQ(s.message(),
            "model.kiln was written by kiln " + other_version + "; this is kiln " + version + hint);

  // Another library version, for the cpu target.
  for (const auto& [key, value] : artifact->header().fingerprint) {
    if (key != "onednn") continue;
    std::string other = value;
    other.back() = other.back() == '9' ? '8' : '9';
    edited = bytes;
    std::string prefix = "onednn" + std::string(4, '\0');
    prefix[6] = static_cast<char>(value.size());
    patch_header(edited, prefix + value, prefix + other);
    s = parse_all(edited);
    EXPECT_EQ(s.message(), "model.kiln was compiled with onednn " + other +
                               "; this machine has onednn " + value + hint);
  }

  // A target this build lacks.
  header = artifact->header();
  header.target = "tpu";
  auto tpu = serialize_artifact(header, **graph);
  ASSERT_TRUE(tpu.ok());
  s = parse_all(*tpu);
  EXPECT_NE(s.message().find("model.kiln was compiled for target tpu: unknown target \"tpu\""),
            std::string::npos)
      << s.message();

  // Another format version.
  edited = bytes;
  edited[8] = 7;
  s = parse_all(edited);
  EXPECT_NE(s.message().find("model.kiln has artifact format version 7; this kiln"),
            std::string::npos)
      << s.message();

  // Not an artifact at all.
  s = parse_all(std::vector<uint8_t>{'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0});
  EXPECT_NE(s.message().find("model.kiln is not a kiln artifact"), std::string::npos)
      << s.message();
}

TEST_F(ArtifactTest, MutatedGraphSectionsAreErrorsNeverCrashes) {
  auto graph = std::make_shared<Graph>();
  GraphBuilder b(*graph);
  Value* x = b.input("x", TensorType(DType::kF32, {Dim::symbolic("n"), Dim(4)}));
  Value* w = b.constant(sample_tensor(DType::kF32, Shape{4, 3}, 1), "w");
  b.output(b.add(ops::Relu{}, {b.add(ops::MatMul{}, {x, w}, "mm")}, "relu"));
  ASSERT_TRUE(b.status().ok());
  auto encoded = encode_graph(*graph);
  ASSERT_TRUE(encoded.ok());
  std::vector<uint8_t> weights(encoded->weights_size);
  for (const WeightSlice& s : encoded->weights) {
    std::memcpy(weights.data() + s.offset, s.data, s.nbytes);
  }
  ASSERT_TRUE(decode_graph(encoded->graph, weights, nullptr, "m.kiln").ok());
  std::mt19937 rng(42);
  int failures = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    std::vector<uint8_t> g = encoded->graph;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % g.size();
      switch (rng() % 3) {
        case 0: g[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        case 1: g[at] = static_cast<uint8_t>(rng()); break;
        default: g.resize(at); break;
      }
      if (g.empty()) break;
    }
    auto decoded = decode_graph(g, weights, nullptr, "m.kiln");
    if (!decoded.ok()) {
      ++failures;
      ASSERT_NE(decoded.status().message().find("m.kiln"), std::string::npos)
          << decoded.status().message();
    }
  }
  EXPECT_GT(failures, 1500);
}

}  // namespace
}  // namespace kiln::compiler
