// SPDX-License-Identifier: Apache-2.0
// Tests the executor end to end on real JPEG/PNG files in a temporary folder.
#include "pipeline/executor/pipeline.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/gpu.h"
#include "core/logging.h"
#include "core/mapped_file.h"
#include "pipeline/decoders/image_decoder.h"
#include "pipeline/kernels/normalize.h"
#include "pipeline/kernels/resize.h"
#include "pipeline/testing/test_images.h"

namespace kiln::pipeline {
namespace {

using ::testing::HasSubstr;
using testing::Pattern;

// Writes an image of `w` x `h` to `name` as JPEG or PNG (by extension).
void write_image(const testing::TempDir& dir, const std::string& name, int w, int h,
                 Pattern pattern = Pattern::kGradient) {
  std::vector<uint8_t> pixels = testing::make_pixels(w, h, 3, pattern);
  bool png = name.ends_with(".png");
  testing::write_bytes(dir.file(name), png ? testing::encode_png(pixels, w, h, 3)
                                           : testing::encode_jpeg(pixels, w, h, 3));
}

// 12 images in 3 classes, of different sizes and both formats.
void write_dataset(const testing::TempDir& dir) {
  for (int i = 0; i < 5; ++i) write_image(dir, fmt::format("cat/{}.jpg", i), 40 + 3 * i, 30 + i);
  for (int i = 0; i < 4; ++i) {
    write_image(dir, fmt::format("dog/{}.png", i), 33 + i, 41 - i, Pattern::kCheckerboard);
  }
  for (int i = 0; i < 3; ++i) write_image(dir, fmt::format("fox/{}.jpg", i), 64, 48 + 8 * i);
}

OpSpec reader_spec(const std::string& root, ArgMap extra = {}) {
  extra["file_root"] = root;
  return {"readers.file", extra, {}, {"encoded", "label"}, {}};
}

std::vector<OpSpec> classify_ops(const std::string& root, ArgMap reader_args = {}) {
  return {
      reader_spec(root, std::move(reader_args)),
      {"decoders.image", {}, {"encoded"}, {"decoded"}, {}},
      {"resize",
       {{"resize_x", int64_t{32}}, {"resize_y", int64_t{24}}},
       {"decoded"},
       {"resized"},
       {}},
      {"crop_mirror_normalize",
       {{"crop", std::vector<int64_t>{16, 16}},
        {"mean", std::vector<double>{120, 110, 100}},
        {"std", std::vector<double>{60, 50, 40}}},
       {"resized"},
       {"images"},
       {}},
  };
}

PipelineOptions options(int64_t batch, int threads, std::vector<std::string> outputs,
                        uint64_t seed = 1) {
  PipelineOptions o;
  o.batch_size = batch;
  o.num_threads = threads;
  o.seed = seed;
  o.outputs = std::move(outputs);
  return o;
}

std::vector<Batch> run_epoch(Pipeline& p) {
  std::vector<Batch> out;
  while (true) {
    auto batch = p.run();
    KILN_CHECK(batch.ok(), batch.status().to_string());
    if (!*batch) return out;
    out.push_back(std::move(**batch));
  }
}

std::string class_of(const std::string& path) {
  return std::filesystem::path(path).parent_path().filename().string();
}

TEST(PipelineTest, DecodeResizeNormalizeGivesDenseBatchesWithTheRightValues) {
  testing::TempDir dir;
  write_dataset(dir);
  auto p = Pipeline::create(options(4, 2, {"images", "label"}), classify_ops(dir.path()));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  std::vector<Batch> batches = run_epoch(**p);
  ASSERT_EQ(batches.size(), 3u);
  const std::map<std::string, int32_t> labels{{"cat", 0}, {"dog", 1}, {"fox", 2}};
  for (const Batch& b : batches) {
    ASSERT_EQ(b.outputs.size(), 2u);
    ASSERT_TRUE(b.outputs[0].dense.defined());
    EXPECT_EQ(b.outputs[0].dense.shape(), Shape({4, 3, 16, 16}));
    EXPECT_EQ(b.outputs[1].dense.shape(), Shape({4}));
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(b.outputs[1].dense.data<int32_t>()[i], labels.at(class_of(b.paths[i])));
      // The same steps by hand, through the kernels.
      auto file = MappedFile::open(b.paths[i]);
      ASSERT_TRUE(file.ok());
      auto decoded = decode_image((*file)->bytes(), b.paths[i], {});
      ASSERT_TRUE(decoded.ok());
      Tensor resized(DType::kU8, Shape{24, 32, 3});
      kernels::resize_u8(decoded->view(), resized.view(), kernels::Interp::kAntialiased);
      Tensor expected(DType::kF32, Shape{3, 16, 16});
      const std::vector<float> mean{120, 110, 100}, stddev{60, 50, 40};
      kernels::crop_mirror_normalize_u8(resized.view(), expected.view(), {4, 8, 16, 16}, false,
                                        mean, stddev, kernels::Layout::kCHW);
      EXPECT_TRUE(b.outputs[0].samples[i].equals(expected)) << b.paths[i];
      EXPECT_EQ(b.outputs[0].samples[i].raw_data(),
                b.outputs[0].dense.data<float>() + i * 3 * 16 * 16);
    }
  }
  EXPECT_TRUE((*p)->bad_samples().empty());
  auto again = (*p)->run();
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());  // the epoch stays over until reset()
}

TEST(PipelineTest, BatchesStayRaggedUntilAFixedShapeOperator) {
  testing::TempDir dir;
  write_dataset(dir);
  std::vector<OpSpec> ops = classify_ops(dir.path());
  auto p = Pipeline::create(options(5, 1, {"decoded", "images"}), ops);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  std::vector<Batch> batches = run_epoch(**p);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[2].outputs[0].samples.size(), 2u);  // partial by default
  for (const Batch& b : batches) {
    EXPECT_FALSE(b.outputs[0].dense.defined());
    EXPECT_TRUE(b.outputs[1].dense.defined());
    for (size_t i = 0; i < b.paths.size(); ++i) {
      auto file = MappedFile::open(b.paths[i]);
      auto info = read_image_info((*file)->bytes(), b.paths[i]);
      ASSERT_TRUE(info.ok());
      EXPECT_EQ(b.outputs[0].samples[i].shape(), Shape({info->height, info->width, 3}));
    }
  }
}

std::vector<OpSpec> augment_ops(const std::string& root) {
  return {
      reader_spec(root, {{"random_shuffle", true}}),
      {"decoders.image_random_crop",
       {{"min_width", int64_t{8}}, {"min_height", int64_t{8}}},
       {"encoded"},
       {"cropped"},
       {}},
      {"resize",
       {{"resize_x", int64_t{20}}, {"resize_y", int64_t{20}}},
       {"cropped"},
       {"resized"},
       {}},
      {"random.coin_flip", {}, {}, {"coin"}, {}},
      {"random.uniform", {{"range", std::vector<double>{0.0, 1.0}}}, {}, {"pos"}, {}},
      {"crop_mirror_normalize",
       {{"crop", std::vector<int64_t>{12, 12}}, {"output_layout", std::string("HWC")}},
       {"resized"},
       {"images"},
       {{"mirror", "coin"}, {"crop_pos_x", "pos"}}},
  };
}

// Every dense output and path of an epoch, flattened for comparison.
std::vector<Tensor> epoch_tensors(Pipeline& p, std::vector<std::string>* paths) {
  std::vector<Tensor> out;
  for (Batch& b : run_epoch(p)) {
    for (TensorList& list : b.outputs) out.push_back(list.dense);
    paths->insert(paths->end(), b.paths.begin(), b.paths.end());
  }
  return out;
}

bool same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].equals(b[i])) return false;
  }
  return true;
}

TEST(PipelineTest, SameSeedGivesIdenticalBatchesForAnyThreadCount) {
  testing::TempDir dir;
  write_dataset(dir);
  std::vector<std::string> outputs{"images", "label", "coin", "pos"};
  std::vector<std::vector<Tensor>> runs;
  std::vector<std::string> first_paths;
  for (auto [threads, depth] : {std::pair{1, 1}, std::pair{2, 3}, std::pair{2, 1}}) {
    PipelineOptions o = options(4, threads, outputs, 77);
    o.prefetch_queue_depth = depth;
    auto p = Pipeline::create(o, augment_ops(dir.path()));
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    std::vector<std::string> paths;
    runs.push_back(epoch_tensors(**p, &paths));
    if (first_paths.empty()) first_paths = paths;
    EXPECT_EQ(paths, first_paths);
  }
  ASSERT_EQ(runs[0].size(), 12u);  // 3 batches x 4 outputs
  EXPECT_TRUE(same(runs[0], runs[1]));
  EXPECT_TRUE(same(runs[0], runs[2]));
  // Both coin sides and varied positions actually occur.
  std::set<int32_t> coins;
  for (int b = 0; b < 3; ++b) {
    for (int i = 0; i < 4; ++i) coins.insert(runs[0][b * 4 + 2].data<int32_t>()[i]);
  }
  EXPECT_EQ(coins.size(), 2u);

  auto other = Pipeline::create(options(4, 2, outputs, 78), augment_ops(dir.path()));
  ASSERT_TRUE(other.ok());
  std::vector<std::string> other_paths;
  EXPECT_FALSE(same(runs[0], epoch_tensors(**other, &other_paths)));
  EXPECT_NE(other_paths, first_paths);
}

TEST(PipelineTest, EpochsDifferAndResetRestartsMidEpoch) {
  testing::TempDir dir;
  write_dataset(dir);
  auto p = Pipeline::create(options(4, 2, {"images", "label"}, 5), augment_ops(dir.path()));
  ASSERT_TRUE(p.ok());
  std::vector<std::string> paths0, paths1;
  std::vector<Tensor> e0 = epoch_tensors(**p, &paths0);
  (*p)->reset();
  EXPECT_EQ((*p)->epoch(), 1);
  std::vector<Tensor> e1 = epoch_tensors(**p, &paths1);
  EXPECT_FALSE(same(e0, e1));
  EXPECT_NE(paths0, paths1);
  std::multiset<std::string> a(paths0.begin(), paths0.end()), b(paths1.begin(), paths1.end());
  EXPECT_EQ(a, b);  // the same samples, in another order

  // Reset after one batch of epoch 2: epoch 3 is the same as from a fresh pipeline.
  (*p)->reset();
  ASSERT_TRUE((*p)->run().ok());
  (*p)->reset();
  std::vector<std::string> paths3;
  std::vector<Tensor> e3 = epoch_tensors(**p, &paths3);
  auto fresh = Pipeline::create(options(4, 1, {"images", "label"}, 5), augment_ops(dir.path()));
  ASSERT_TRUE(fresh.ok());
  for (int i = 0; i < 3; ++i) (*fresh)->reset();
  std::vector<std::string> fresh_paths;
  EXPECT_TRUE(same(e3, epoch_tensors(**fresh, &fresh_paths)));
  EXPECT_EQ(paths3, fresh_paths);
}

TEST(PipelineTest, PerSampleArgumentFromCoinFlipMirrorsExactlyTheFlippedSamples) {
  testing::TempDir dir;
  write_dataset(dir);
  auto ops = [&](bool flip) {
    std::vector<OpSpec> v = {
        reader_spec(dir.path()),
        {"decoders.image", {}, {"encoded"}, {"decoded"}, {}},
        {"resize",
         {{"resize_x", int64_t{9}}, {"resize_y", int64_t{7}}},
         {"decoded"},
         {"small"},
         {}},
        {"random.coin_flip", {{"probability", 0.5}}, {}, {"coin"}, {}},
    };
    if (flip) v.push_back({"flip", {}, {"small"}, {"flipped"}, {{"horizontal", "coin"}}});
    return v;
  };
  auto plain = Pipeline::create(options(12, 1, {"small", "coin"}), ops(false));
  auto flipped = Pipeline::create(options(12, 2, {"flipped", "coin"}), ops(true));
  ASSERT_TRUE(plain.ok() && flipped.ok()) << flipped.status().to_string();
  auto a = (*plain)->run();
  auto b = (*flipped)->run();
  ASSERT_TRUE(a.ok() && b.ok() && a->has_value() && b->has_value());
  const Batch& pa = **a;
  const Batch& pb = **b;
  int flips = 0;
  for (int i = 0; i < 12; ++i) {
    int32_t coin = pb.outputs[1].dense.data<int32_t>()[i];
    EXPECT_EQ(coin, pa.outputs[1].dense.data<int32_t>()[i]);
    const uint8_t* x = pa.outputs[0].dense.data<uint8_t>() + i * 7 * 9 * 3;
    const uint8_t* y = pb.outputs[0].dense.data<uint8_t>() + i * 7 * 9 * 3;
    for (int r = 0; r < 7; ++r) {
      for (int c = 0; c < 9; ++c) {
        for (int ch = 0; ch < 3; ++ch) {
          ASSERT_EQ(y[(r * 9 + c) * 3 + ch], x[(r * 9 + (coin ? 8 - c : c)) * 3 + ch]);
        }
      }
    }
    flips += coin;
  }
  EXPECT_GT(flips, 0);
  EXPECT_LT(flips, 12);
}

TEST(PipelineTest, ShardsCoverEverySampleOnce) {
  testing::TempDir dir;
  write_dataset(dir);
  std::multiset<std::string> seen;
  for (int64_t shard = 0; shard < 3; ++shard) {
    auto p = Pipeline::create(
        options(2, 2, {"images"}),
        classify_ops(dir.path(),
                     {{"shard_id", shard}, {"num_shards", int64_t{3}}, {"random_shuffle", true}}));
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    for (const Batch& b : run_epoch(**p)) seen.insert(b.paths.begin(), b.paths.end());
  }
  EXPECT_EQ(seen.size(), 12u);
  for (const std::string& path : seen) EXPECT_EQ(seen.count(path), 1u) << path;
}

TEST(PipelineTest, CheckpointResumesWithIdenticalBatchesInAnotherPipeline) {
  testing::TempDir dir;
  write_dataset(dir);
  auto make = [&] {
    return Pipeline::create(options(3, 2, {"images", "label"}),
                            classify_ops(dir.path(), {{"random_shuffle", true}}));
  };
  auto first = make();
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  (*first)->reset();  // epoch 1, so the checkpoint carries an epoch too
  ASSERT_TRUE((*first)->run().ok());
  ReaderPosition saved = (*first)->checkpoint();
  EXPECT_EQ(saved.epoch, 1);
  EXPECT_EQ(saved.cursor, 3);
  std::vector<Batch> expected;
  while (true) {
    auto b = (*first)->run();
    ASSERT_TRUE(b.ok());
    if (!*b) break;
    expected.push_back(std::move(**b));
  }
  ASSERT_EQ(expected.size(), 3u);
  auto second = make();
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE((*second)->restore(saved).ok());
  EXPECT_EQ((*second)->epoch(), 1);
  for (const Batch& want : expected) {
    auto got = (*second)->run();
    ASSERT_TRUE(got.ok() && got->has_value());
    EXPECT_EQ((*got)->paths, want.paths);
    EXPECT_TRUE((*got)->outputs[0].dense.equals(want.outputs[0].dense));
    EXPECT_TRUE((*got)->outputs[1].dense.equals(want.outputs[1].dense));
  }
  auto end = (*second)->run();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
  Status bad = (*second)->restore({0, 99, 99});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.message(), HasSubstr("cannot restore position"));
}

TEST(PipelineTest, ExternalSourceProcessesFedImagesInOrder) {
  testing::TempDir dir;
  write_dataset(dir);
  std::vector<OpSpec> ops = classify_ops(dir.path());
  ops[0] = {"readers.external_source", {}, {}, {"encoded", "label"}, {}};
  auto p = Pipeline::create(options(4, 2, {"images", "label"}), ops);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto files = Pipeline::create(options(4, 2, {"images", "label"}), classify_ops(dir.path()));
  ASSERT_TRUE(files.ok());
  auto from_files = (*files)->run();
  ASSERT_TRUE(from_files.ok() && from_files->has_value());
  // Feed the same first four files: same pixels as the file pipeline (same positions, same seed).
  std::vector<Tensor> encoded;
  std::vector<int32_t> labels;
  for (const std::string& path : (*from_files)->paths) {
    auto bytes = read_file(path);
    ASSERT_TRUE(bytes.ok());
    Tensor t(DType::kU8, Shape{static_cast<int64_t>(bytes->size())});
    std::copy(bytes->begin(), bytes->end(), t.data<uint8_t>());
    encoded.push_back(t);
    labels.push_back(7);
  }
  encoded.push_back(Tensor(DType::kU8, Shape{3}));  // not an image: skipped and reported
  labels.push_back(8);
  ASSERT_TRUE((*p)->feed(encoded, labels).ok());
  EXPECT_EQ((*p)->pending(), 5);
  auto batch = (*p)->run();
  ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status().to_string();
  EXPECT_EQ((*batch)->paths,
            (std::vector<std::string>{"external #0", "external #1", "external #2", "external #3"}));
  EXPECT_TRUE((*batch)->outputs[0].dense.equals((*from_files)->outputs[0].dense));
  EXPECT_EQ((*batch)->outputs[1].dense.data<int32_t>()[3], 7);
  auto rest = (*p)->run();  // only the bad sample is left
  ASSERT_TRUE(rest.ok());
  EXPECT_FALSE(rest->has_value());
  ASSERT_EQ((*p)->bad_samples().size(), 1u);
  EXPECT_EQ((*p)->bad_samples()[0].path, "external #4");
  Status mismatch = (*p)->feed({Tensor(DType::kU8, Shape{3})}, {1, 2});
  EXPECT_THAT(mismatch.message(), HasSubstr("expected as many labels"));
  Status wrong = (*p)->feed({Tensor(DType::kF32, Shape{2, 2})});
  EXPECT_THAT(wrong.message(), HasSubstr("must be a 1-D uint8 tensor"));
  EXPECT_THAT((*files)->feed(encoded).message(), HasSubstr("needs a readers.external_source"));
}

TEST(PipelineTest, LastBatchPolicies) {
  testing::TempDir dir;
  write_dataset(dir);  // 12 samples, batch 5
  auto sizes = [&](const std::string& policy, std::vector<int64_t>* padded) {
    auto p = Pipeline::create(options(5, 2, {"images"}),
                              classify_ops(dir.path(), {{"last_batch_policy", policy}}));
    KILN_CHECK(p.ok(), p.status().to_string());
    std::vector<size_t> out;
    for (const Batch& b : run_epoch(**p)) {
      out.push_back(b.outputs[0].samples.size());
      padded->push_back(b.num_padded);
    }
    return out;
  };
  std::vector<int64_t> padded;
  EXPECT_EQ(sizes("partial", &padded), (std::vector<size_t>{5, 5, 2}));
  padded.clear();
  EXPECT_EQ(sizes("drop", &padded), (std::vector<size_t>{5, 5}));
  padded.clear();
  EXPECT_EQ(sizes("fill", &padded), (std::vector<size_t>{5, 5, 5}));
  EXPECT_EQ(padded, (std::vector<int64_t>{0, 0, 3}));
  auto bad =
      Pipeline::create(options(5, 1, {"images"}),
                       classify_ops(dir.path(), {{"last_batch_policy", std::string("pad")}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("last batch policy \"pad\""));
}

// Adds a corrupt, a truncated, an empty and a non-image file to the data set.
void write_bad_files(const testing::TempDir& dir) {
  std::vector<uint8_t> pixels = testing::make_pixels(50, 40, 3, Pattern::kGradient);
  std::vector<uint8_t> jpeg = testing::encode_jpeg(pixels, 50, 40, 3);
  std::vector<uint8_t> png = testing::encode_png(pixels, 50, 40, 3);
  png[png.size() / 2] ^= 0x55;
  testing::write_bytes(dir.file("cat/bad_corrupt.png"), png);
  testing::write_bytes(dir.file("dog/bad_truncated.jpg"),
                       std::vector<uint8_t>(jpeg.begin(), jpeg.begin() + jpeg.size() * 2 / 3));
  testing::write_bytes(dir.file("dog/bad_empty.jpg"), std::vector<uint8_t>{});
  std::string text = "not an image at all\n";
  testing::write_bytes(dir.file("fox/bad_notes.jpg"),
                       std::vector<uint8_t>(text.begin(), text.end()));
}

TEST(PipelineTest, BadFilesAreReportedAndSkippedByDefault) {
  testing::TempDir dir;
  write_dataset(dir);
  write_bad_files(dir);  // 16 files, 12 good
  std::vector<std::string> logged;
  std::mutex log_mutex;
  set_log_sink([&](LogLevel level, std::string_view message) {
    std::lock_guard lock(log_mutex);
    if (level == LogLevel::kWarning) logged.emplace_back(message);
  });
  for (int threads : {1, 2}) {
    logged.clear();
    auto p = Pipeline::create(options(5, threads, {"images", "label"}), classify_ops(dir.path()));
    ASSERT_TRUE(p.ok());
    std::vector<Batch> batches = run_epoch(**p);
    std::vector<size_t> sizes;
    std::set<std::string> paths;
    const std::map<std::string, int32_t> labels{{"cat", 0}, {"dog", 1}, {"fox", 2}};
    for (const Batch& b : batches) {
      sizes.push_back(b.paths.size());
      for (size_t i = 0; i < b.paths.size(); ++i) {
        paths.insert(b.paths[i]);
        EXPECT_EQ(b.outputs[1].dense.data<int32_t>()[i], labels.at(class_of(b.paths[i])));
        EXPECT_THAT(b.paths[i], ::testing::Not(HasSubstr("bad_")));
      }
    }
    EXPECT_EQ(sizes, (std::vector<size_t>{5, 5, 2}));  // skipped samples are replaced
    EXPECT_EQ(paths.size(), 12u);
    std::vector<BadSample> bad = (*p)->bad_samples();
    ASSERT_EQ(bad.size(), 4u);
    std::map<std::string, std::string> reasons;
    for (const BadSample& s : bad) {
      reasons[std::filesystem::path(s.path).filename().string()] = s.reason;
      EXPECT_THAT(s.reason, HasSubstr(s.path));
    }
    EXPECT_THAT(reasons["bad_corrupt.png"], HasSubstr("corrupt or truncated PNG"));
    EXPECT_THAT(reasons["bad_truncated.jpg"], HasSubstr("corrupt or truncated JPEG"));
    EXPECT_THAT(reasons["bad_empty.jpg"], HasSubstr("empty file"));
    EXPECT_THAT(reasons["bad_notes.jpg"], HasSubstr("not a JPEG or PNG file"));
    std::lock_guard lock(log_mutex);
    ASSERT_EQ(logged.size(), 4u);
    for (const std::string& line : logged) {
      EXPECT_THAT(line, ::testing::StartsWith("pipeline: skipping sample \""));
      EXPECT_THAT(line, HasSubstr("bad_"));
    }
  }
  set_log_sink(nullptr);
}

TEST(PipelineTest, BadFileFailsTheRunWithTheErrorPolicy) {
  testing::TempDir dir;
  write_dataset(dir);
  write_bad_files(dir);
  PipelineOptions o = options(4, 2, {"images"});
  o.bad_data = BadDataPolicy::kError;
  auto p = Pipeline::create(o, classify_ops(dir.path()));
  ASSERT_TRUE(p.ok());
  Status error;
  for (int i = 0; i < 10 && error.ok(); ++i) {
    auto batch = (*p)->run();
    if (!batch.ok()) error = batch.status();
  }
  ASSERT_FALSE(error.ok());
  EXPECT_THAT(error.message(), HasSubstr("bad_"));
  EXPECT_EQ((*p)->run().status(), error);  // sticky until reset()
}

TEST(PipelineTest, StageTimingsCountEveryCall) {
  testing::TempDir dir;
  write_dataset(dir);
  auto p = Pipeline::create(options(4, 2, {"images"}), classify_ops(dir.path()));
  ASSERT_TRUE(p.ok());
  run_epoch(**p);
  std::vector<StageTiming> t = (*p)->stage_timings();
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t[0].stage, "read");
  EXPECT_EQ(t[1].stage, "decoders.image#1");
  EXPECT_EQ(t[4].stage, "batch");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(t[i].calls, 12) << t[i].stage;
  EXPECT_EQ(t[4].calls, 3);
  EXPECT_GT(t[1].seconds, 0.0);
}

TEST(PipelineTest, PrefetchStopsAtTheQueueDepth) {
  testing::TempDir dir;
  write_dataset(dir);
  for (int64_t depth : {1, 3}) {
    PipelineOptions o = options(1, 2, {"images"});
    o.prefetch_queue_depth = depth;
    auto p = Pipeline::create(o, classify_ops(dir.path()));
    ASSERT_TRUE(p.ok());
    auto assembled = [&] { return (*p)->stage_timings().back().calls; };
    for (int i = 0; i < 2500 && assembled() < depth + 1; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    // `depth` batches wait in the queue and one more waits to be pushed; none beyond.
    EXPECT_EQ(assembled(), depth + 1);
    ASSERT_TRUE((*p)->run().ok());
    for (int i = 0; i < 2500 && assembled() < depth + 2; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(assembled(), depth + 2);
  }
}

TEST(PipelineTest, WiringErrorsNameTheOperator) {
  testing::TempDir dir;
  write_dataset(dir);
  auto expect_error = [&](std::vector<OpSpec> ops, std::vector<std::string> outputs,
                          const std::string& text) {
    auto p = Pipeline::create(options(2, 1, std::move(outputs)), std::move(ops));
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_THAT(p.status().message(), HasSubstr(text));
  };
  expect_error({{"decoders.image", {}, {"encoded"}, {}, {}}}, {"images"},
               "operator #0 (decoders.image): the first operator, and only it, must be a reader");
  expect_error({reader_spec(dir.path()), {"decoders.image", {}, {"bytes"}, {}, {}}}, {"images"},
               "input \"bytes\" is not an output of an earlier operator");
  expect_error({reader_spec(dir.path()), {"decoders.image", {}, {"encoded"}, {}, {}}}, {"nothing"},
               "output \"nothing\" is not produced");
  expect_error({reader_spec(dir.path()),
                {"decoders.image", {}, {"encoded"}, {}, {}},
                {"flip", {}, {"images"}, {"out"}, {{"mirror", "label"}}}},
               {"out"}, "\"mirror\" is not a per-sample argument");
  expect_error({reader_spec(dir.path()), {"decoders.image", {}, {"encoded"}, {"label"}, {}}},
               {"label"}, "tensor name \"label\" is already used");
  expect_error({reader_spec(dir.path() + "/missing")}, {"label"}, "missing\" does not exist");
  OpSpec gpu_slice{"slice", {}, {"images", "label", "label"}, {"cut"}, {}};
  gpu_slice.gpu = true;
  expect_error({reader_spec(dir.path()), {"decoders.image", {}, {"encoded"}, {}, {}}, gpu_slice},
               {"cut"},
               "operator #2 (slice): has no GPU form; device \"gpu\" takes decoders.image, "
               "decoders.image_random_crop, resize, "
               "random_resized_crop, crop, flip, crop_mirror_normalize, brightness_contrast, "
               "gamma, hsv, color_twist, rotate, warp_affine, gaussian_blur, noise.gaussian, "
               "noise.salt_and_pepper, pad, cast");
  OpSpec gpu_flip{"flip", {}, {"images"}, {"flipped"}, {}};
  gpu_flip.gpu = true;
  expect_error({reader_spec(dir.path()),
                {"decoders.image", {}, {"encoded"}, {}, {}},
                gpu_flip,
                {"cast", {{"dtype", std::string("float32")}}, {"flipped"}, {"floats"}, {}}},
               {"floats"},
               "operator #3 (cast): input \"flipped\" is made on the GPU, so this operator needs "
               "device \"gpu\" too");
}

TEST(PipelineTest, GpuOperatorsWithoutAGpuSayWhatIsMissing) {
  std::string why;
  if (!list_gpus(&why).empty()) GTEST_SKIP() << "this machine has a GPU";
  testing::TempDir dir;
  write_dataset(dir);
  OpSpec gpu_flip{"flip", {}, {"images"}, {"flipped"}, {}};
  gpu_flip.gpu = true;
  auto p = Pipeline::create(
      options(2, 1, {"flipped"}),
      {reader_spec(dir.path()), {"decoders.image", {}, {"encoded"}, {}, {}}, gpu_flip});
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              HasSubstr(built_with_cuda() ? "device \"gpu\" needs an NVIDIA GPU"
                                          : "device \"gpu\" needs a kiln built with CUDA"));
  EXPECT_THAT(p.status().message(), HasSubstr("run the operators with device \"cpu\""));
}

}  // namespace
}  // namespace kiln::pipeline
