// SPDX-License-Identifier: Apache-2.0
// The cpu target's packed weights: they leave the graph, come back in its artifact, load in
// place; a damaged or unusable packed section is refused.
#include "compiler/targets/cpu/program_testing.h"

namespace kiln::compiler {
namespace {

TEST(CpuProgram, PackedWeightsLeaveTheGraphAndComeBackInItsArtifact) {
  // MatMul weights, a Gemm's transposed weights and its bias are held packed only; the addend of
  // a plain Add is read by its step as it is and stays.
  const Tensor w1 = random_tensor(Shape{24, 40}, 30, 0.3f);
  const Tensor w2 = random_tensor(Shape{16, 40}, 31, 0.3f);  // Gemm transB: [N, K]
  const Tensor c2 = random_tensor(Shape{16}, 32);
  const Tensor addend = random_tensor(Shape{6, 16}, 33);
  auto make = [&] {
    auto graph = std::make_shared<Graph>("packed");
    GraphBuilder b(*graph);
    Value* x = b.input("x", TensorType(DType::kF32, Shape{6, 24}));
    Value* h = b.add(Op(ops::MatMul{}), {x, b.constant(w1, "w1")}, "fc1");
    h = b.add(Op(ops::Relu{}), {h}, "relu");
    ops::Gemm gemm;
    gemm.transB = 1;
    h = b.add(Op(gemm), {h, b.constant(w2, "w2"), b.constant(c2, "c2")}, "fc2");
    b.output(b.add(Op(ops::Add{}), {h, b.constant(addend, "addend")}, "shift"));
    EXPECT_TRUE(b.status().ok()) << b.status().to_string();
    return graph;
  };
  const std::vector<Tensor> inputs = {random_tensor(Shape{6, 24}, 34)};
  std::vector<Tensor> want = run(*compile_for(make(), "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(make(), "cpu");
  ASSERT_NE(exe, nullptr);
  ASSERT_NE(cpu_program(*exe), nullptr);
  expect_close(want, run(*exe, inputs));
  auto constant = [](const Graph& g, const std::string& name) -> const Tensor* {
    for (const auto& node : g.nodes()) {
      if (node->kind() == OpKind::kConstant && node->output(0)->name() == name) {
        return node->output(0)->constant_value();
      }
    }
    ADD_FAILURE() << "no constant " << name;
    return nullptr;
  };
  EXPECT_EQ(constant(exe->graph(), "w1"), nullptr);
  EXPECT_EQ(constant(exe->graph(), "w2"), nullptr);
  EXPECT_EQ(constant(exe->graph(), "c2"), nullptr);
  const Tensor* kept = constant(exe->graph(), "addend");
  ASSERT_NE(kept, nullptr);
  EXPECT_TRUE(kept->equals(addend));

  // The graph an artifact stores has every value, bit for bit.
  Result<std::shared_ptr<const Graph>> full = exe->graph_with_constants();
  ASSERT_TRUE(full.ok()) << full.status().to_string();
  for (const auto& [name, t] : {std::pair<std::string, const Tensor*>{"w1", &w1},
                                {"w2", &w2},
                                {"c2", &c2},
                                {"addend", &addend}}) {
    const Tensor* got = constant(**full, name);
    ASSERT_NE(got, nullptr) << name;
    EXPECT_TRUE(got->equals(*t)) << name;
  }
  ArtifactSource source;
  source.name = "packed.onnx";
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  Result<std::vector<uint8_t>> serialized =
      serialize_artifact(make_artifact_header(*exe, {}, source), **full);
  ASSERT_TRUE(serialized.ok()) << serialized.status().to_string();
  *bytes = std::move(serialized).value();
  Result<Artifact> artifact = parse_artifact(*bytes, bytes, "packed.kiln");
  ASSERT_TRUE(artifact.ok()) << artifact.status().to_string();
  Result<LoadedArtifact> loaded = load_artifact(*artifact);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_close(want, run(*loaded->executable, inputs));
}

// The constants of `graph` by their values' names.
std::map<std::string, const Tensor*> constants_of(const Graph& graph) {
  std::map<std::string, const Tensor*> out;
  for (const auto& node : graph.nodes()) {
    if (node->kind() == OpKind::kConstant)
      out[node->output(0)->name()] = node->output(0)->constant_value();
  }
  return out;
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

TEST(CpuProgram, AnArtifactStoresPackedWeightsThatLoadInPlace) {
  // The weights the program holds packed go into the artifact as packed bytes, listed in its
  // "cpu.packed" section: loading uses them in place, readers of the graph get plain values back,
  // and the interpreter unpacks them.
  const std::vector<Tensor> inputs = {random_tensor(Shape{1, 3, 32, 32}, 60)};
  std::vector<Tensor> want = run(*compile_for(tiny_resnet(1), "ref"), inputs);
  std::shared_ptr<Executable> exe = compile_for(tiny_resnet(1), "cpu");
  ASSERT_NE(exe, nullptr);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kiln_stored_packed_" + std::to_string(::getpid()) + ".kiln"))
                               .string();
  ArtifactSource source;
  source.name = "tiny_resnet.onnx";
  ASSERT_TRUE(save_artifact(path, *exe, {}, source).ok());
  Result<Artifact> artifact = open_artifact(path);
  ASSERT_TRUE(artifact.ok()) << artifact.status().to_string();
  ASSERT_NE(artifact->find_section("cpu.packed"), nullptr);

  // graph() has every value as the executable's plain graph has it, bit for bit; the stored
  // graph has some of them in packed layouts.
  Result<std::shared_ptr<const Graph>> plain = exe->graph_with_constants();
  Result<std::shared_ptr<Graph>> graph = artifact->graph();
  Result<std::shared_ptr<Graph>> stored = artifact->stored_graph();
  ASSERT_TRUE(plain.ok() && graph.ok() && stored.ok());
  const std::map<std::string, const Tensor*> want_values = constants_of(**plain);
  const std::map<std::string, const Tensor*> got_values = constants_of(**graph);
  const std::map<std::string, const Tensor*> stored_values = constants_of(**stored);
  ASSERT_EQ(got_values.size(), want_values.size());
  int packed = 0;
  for (const auto& [name, t] : want_values) {
    ASSERT_NE(t, nullptr) << name;
    ASSERT_NE(got_values.at(name), nullptr) << name;
    EXPECT_TRUE(got_values.at(name)->equals(*t)) << name;
    if (!stored_values.at(name)->equals(*t)) ++packed;
  }
  EXPECT_GE(packed, 3);  // the 3x3 and 1x1 convolutions' weights at least

  Result<LoadedArtifact> loaded = load_artifact(*artifact);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_close(want, run(*loaded->executable, inputs));
  {
    const ScopedEnv interpret("KILN_CPU_INTERPRET", "1");
    Result<LoadedArtifact> interpreted = load_artifact(*artifact);
    ASSERT_TRUE(interpreted.ok()) << interpreted.status().to_string();
    EXPECT_EQ(cpu_program(*interpreted->executable), nullptr);
    expect_close(want, run(*interpreted->executable, inputs));
  }
  // Saved again from the loaded executable, whose weights are the file's bytes: the same file.
  const std::string again = path + ".again";
  ASSERT_TRUE(save_artifact(again, *loaded->executable, {}, source).ok());
  EXPECT_TRUE(file_bytes(again) == file_bytes(path));
  std::filesystem::remove(path);
  std::filesystem::remove(again);
}

TEST(CpuProgram, AMalformedPackedSectionIsADataLossError) {
  std::shared_ptr<Executable> exe = compile_for(tiny_resnet(1), "cpu");
  ASSERT_NE(exe, nullptr);
  Result<Executable::ArtifactContents> contents = exe->artifact_contents();
  ASSERT_TRUE(contents.ok()) << contents.status().to_string();
  ASSERT_EQ(contents->sections.size(), 1u);
  ASSERT_EQ(contents->sections[0].name, "cpu.packed");
  const std::span<const uint8_t> good = contents->sections[0].pieces.at(0);
  const Graph& graph = *contents->graph;
  ASSERT_TRUE(cpu::StoredPackings::read(good, graph, "t.kiln", "recompile", nullptr).ok());

  auto error_of = [&](std::vector<uint8_t> bytes) {
    Result<cpu::StoredPackings> r =
        cpu::StoredPackings::read(bytes, graph, "t.kiln", "recompile", nullptr);
    EXPECT_FALSE(r.ok());
    return r.ok() ? Status() : r.status();
  };
  const std::vector<uint8_t> all(good.begin(), good.end());
  Status truncated = error_of(std::vector<uint8_t>(all.begin(), all.end() - 5));
  EXPECT_EQ(truncated.code(), StatusCode::kDataLoss);
  EXPECT_NE(truncated.message().find("t.kiln"), std::string::npos) << truncated.message();
  std::vector<uint8_t> wrong_node = all;
  wrong_node[8] ^= 0x7f;  // the first entry's node index
  Status node = error_of(wrong_node);
  EXPECT_EQ(node.code(), StatusCode::kDataLoss);
  EXPECT_NE(node.message().find("no constant of the graph"), std::string::npos) << node.message();
  std::vector<uint8_t> version = all;
  version[0] = 9;
  EXPECT_EQ(error_of(version).code(), StatusCode::kFailedPrecondition);
  // Every shorter prefix fails cleanly.
  for (size_t n = 0; n < all.size(); n += 7) {
    EXPECT_FALSE(cpu::StoredPackings::read(std::span<const uint8_t>(all.data(), n), graph, "t.kiln",
                                           "recompile", nullptr)
                     .ok());
  }
  // Any byte changed is an error or a section that still unpacks without reading past its
  // constants (the sanitizers' builds check the reads).
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  int accepted = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xff}}) {
      std::vector<uint8_t> bytes = all;
      bytes[i] ^= flip;
      std::shared_ptr<Graph> copy = clone_graph(graph);
      Result<cpu::StoredPackings> r =
          cpu::StoredPackings::read(bytes, *copy, "t.kiln", "recompile", nullptr);
      if (!r.ok()) continue;
      ++accepted;
      EXPECT_TRUE(r->unpack(engine).ok()) << "byte " << i;
    }
  }
  EXPECT_LT(accepted, static_cast<int>(all.size()));
}

TEST(CpuProgram, StoredPackedWeightsThatAStepReadsAreUnpackedOrRefused) {
  // A program lowered otherwise than the compiling one may leave a weight stored packed in the
  // graph: settle() gives it its plain values where no step reads it, and says so where one does.
  std::shared_ptr<Executable> exe = compile_for(tiny_resnet(1), "cpu");
  ASSERT_NE(exe, nullptr);
  Result<Executable::ArtifactContents> contents = exe->artifact_contents();
  Result<std::shared_ptr<const Graph>> plain = exe->graph_with_constants();
  ASSERT_TRUE(contents.ok() && plain.ok());
  const std::span<const uint8_t> section = contents->sections.at(0).pieces.at(0);
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  for (bool unread : {false, true}) {
    SCOPED_TRACE(unread ? "no step reads them" : "a step reads them");
    std::shared_ptr<Graph> graph = clone_graph(*contents->graph);
    Result<cpu::StoredPackings> stored =
        cpu::StoredPackings::read(section, *graph, "t.kiln", "recompile", nullptr);
    ASSERT_TRUE(stored.ok()) << stored.status().to_string();
    ASSERT_GT(stored->count(), 0);
    Result<bool> settled = stored->settle(engine, [unread](const Value*) { return unread; });
    ASSERT_TRUE(settled.ok()) << settled.status().to_string();
    EXPECT_EQ(*settled, unread);
    if (!unread) {
      ASSERT_TRUE(stored->unpack(engine).ok());
    }
    // Either way the graph ends with every value plain, bit for bit.
    const std::map<std::string, const Tensor*> want = constants_of(**plain);
    for (const auto& [name, t] : constants_of(*graph)) {
      ASSERT_NE(t, nullptr) << name;
      EXPECT_TRUE(t->equals(*want.at(name))) << name;
    }
  }
}

TEST(CpuProgram, DroppedConstantsComeBackInPlaceWhenABuildIsUndone) {
  // Only exact packings are dropped: a blocked copy of the same type, not a conversion to bf16.
  auto graph = std::make_shared<Graph>("undo");
  GraphBuilder b(*graph);
  const Tensor w = random_tensor(Shape{64, 48}, 50);
  const Tensor converted = random_tensor(Shape{32, 16}, 51);
  Value* packed_value = b.constant(w, "w");
  Value* converted_value = b.constant(converted, "converted");
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  cpu::ReleaseAfterPacking packings({});
  const dnnl::memory::desc blocked({64, 48}, dnnl::memory::data_type::f32,
                                   dnnl::memory::format_tag::BA16a64b);
  cpu::pack(engine, cpu::plain_desc(w.shape()), w.raw_data(), blocked);
  cpu::pack(
      engine, cpu::plain_desc(converted.shape()), converted.raw_data(),
      dnnl::memory::desc({32, 16}, dnnl::memory::data_type::bf16, dnnl::memory::format_tag::ab));
  cpu::DroppedConstants dropped;
  EXPECT_TRUE(dropped.drop(packed_value, packings));
  EXPECT_FALSE(dropped.drop(converted_value, packings));
  EXPECT_EQ(packed_value->constant_value(), nullptr);
  ASSERT_NE(converted_value->constant_value(), nullptr);
  EXPECT_EQ(dropped.bytes(), w.nbytes());
  ASSERT_TRUE(dropped.undo(engine).ok());
  EXPECT_TRUE(dropped.empty());
  ASSERT_NE(packed_value->constant_value(), nullptr);
  EXPECT_TRUE(packed_value->constant_value()->equals(w));
}

}  // namespace
}  // namespace kiln::compiler
