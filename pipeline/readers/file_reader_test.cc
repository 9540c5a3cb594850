// SPDX-License-Identifier: Apache-2.0
// Tests the file reader: listing, labels, sharding, seeded shuffling and last-batch policies.
#include "pipeline/readers/file_reader.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "pipeline/testing/test_images.h"

namespace kiln::pipeline {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

// Writes `per_class[i]` one-byte files into class folders "c0", "c1", ... (no decoding here).
void make_tree(const TempDir& dir, const std::vector<int>& per_class) {
  for (size_t c = 0; c < per_class.size(); ++c) {
    for (int i = 0; i < per_class[c]; ++i) {
      testing::write_bytes(dir.file(fmt::format("c{}/f{:03}.bin", c, i)), std::vector<uint8_t>{1});
    }
  }
}

std::vector<int64_t> entries_of(const std::vector<SampleRef>& refs) {
  std::vector<int64_t> out;
  for (const SampleRef& r : refs) out.push_back(r.entry);
  return out;
}

// Every sample of the current epoch, in order.
std::vector<int64_t> drain(FileReader& reader, int64_t batch_size) {
  std::vector<int64_t> out;
  for (auto b = reader.next_batch(batch_size); !b.empty(); b = reader.next_batch(batch_size)) {
    for (int64_t e : entries_of(b)) out.push_back(e);
  }
  return out;
}

TEST(FileReaderTest, FolderLabelsAreSortedSubfolderIndices) {
  TempDir dir;
  make_tree(dir, {2, 3});
  testing::write_bytes(dir.file("stray.bin"), std::vector<uint8_t>{1});  // not in a class folder
  testing::write_bytes(dir.file("c1/.hidden"), std::vector<uint8_t>{1});
  FileReaderOptions o;
  o.file_root = dir.path();
  auto reader = FileReader::open(o);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  ASSERT_EQ(reader->entries().size(), 5u);
  EXPECT_THAT(reader->entries()[0].path, ::testing::EndsWith("c0/f000.bin"));
  EXPECT_EQ(reader->entries()[1].label, 0);
  EXPECT_EQ(reader->entries()[2].label, 1);
  EXPECT_THAT(reader->entries()[4].path, ::testing::EndsWith("c1/f002.bin"));
  EXPECT_EQ(drain(*reader, 2), (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(FileReaderTest, FileListWithRelativePathsAndErrors) {
  TempDir dir;
  testing::write_bytes(dir.file("list.txt"),
                       std::vector<uint8_t>{'a', '.', 'j', 'p', 'g', ' ', '3', '\n', '#', '\n',
                                            'b', ' ', 'c', '.', 'p', 'n', 'g', '\t', '0', '\n'});
  FileReaderOptions o;
  o.file_list = dir.path() + "/list.txt";
  o.file_root = "/data";
  auto reader = FileReader::open(o);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  ASSERT_EQ(reader->entries().size(), 2u);
  EXPECT_EQ(reader->entries()[0].path, "/data/a.jpg");
  EXPECT_EQ(reader->entries()[0].label, 3);
  EXPECT_EQ(reader->entries()[1].path, "/data/b c.png");

  testing::write_bytes(dir.file("bad.txt"), std::vector<uint8_t>{'a', '.', 'j', 'p', 'g', '\n'});
  o.file_list = dir.path() + "/bad.txt";
  auto bad = FileReader::open(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("bad.txt\" line 1: expected \"path label\""));

  o.file_list = dir.path() + "/missing.txt";
  auto missing = FileReader::open(o);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("missing.txt"));

  FileReaderOptions no_root;
  no_root.file_root = dir.path() + "/nope";
  auto nope = FileReader::open(no_root);
  ASSERT_FALSE(nope.ok());
  EXPECT_THAT(nope.status().message(), HasSubstr("nope\" does not exist"));
}

TEST(FileReaderTest, ShardsCoverEverySampleExactlyOncePerEpoch) {
  TempDir dir;
  make_tree(dir, {7, 5, 11});  // 23 samples
  for (int64_t num_shards : {1, 2, 3, 4}) {
    for (int64_t epoch : {0, 1, 2}) {
      std::multiset<int64_t> seen;
      for (int64_t shard = 0; shard < num_shards; ++shard) {
        FileReaderOptions o;
        o.file_root = dir.path();
        o.shard_id = shard;
        o.num_shards = num_shards;
        o.random_shuffle = true;
        o.seed = 42;
        auto reader = FileReader::open(o);
        ASSERT_TRUE(reader.ok());
        reader->start_epoch(epoch);
        for (int64_t e : drain(*reader, 4)) seen.insert(e);
      }
      ASSERT_EQ(seen.size(), 23u);
      for (int64_t i = 0; i < 23; ++i) EXPECT_EQ(seen.count(i), 1u) << num_shards << " " << epoch;
    }
  }
}

TEST(FileReaderTest, ShuffleIsReproduciblePerSeedAndEpoch) {
  TempDir dir;
  make_tree(dir, {20, 20});
  auto order = [&](uint64_t seed, int64_t epoch) {
    FileReaderOptions o;
    o.file_root = dir.path();
    o.random_shuffle = true;
    o.seed = seed;
    auto reader = FileReader::open(o);
    KILN_CHECK(reader.ok());
    reader->start_epoch(epoch);
    return drain(*reader, 8);
  };
  std::vector<int64_t> a = order(1, 0);
  EXPECT_EQ(a, order(1, 0));
  EXPECT_NE(a, order(2, 0));
  EXPECT_NE(a, order(1, 1));
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(a, sorted);  // actually shuffled
  for (int64_t i = 0; i < 40; ++i) EXPECT_EQ(sorted[i], i);
}

TEST(FileReaderTest, ResetMovesToTheNextEpoch) {
  TempDir dir;
  make_tree(dir, {6});
  FileReaderOptions o;
  o.file_root = dir.path();
  o.random_shuffle = true;
  o.seed = 7;
  auto reader = FileReader::open(o);
  ASSERT_TRUE(reader.ok());
  std::vector<int64_t> e0 = drain(*reader, 4);
  EXPECT_TRUE(reader->next_batch(4).empty());
  reader->reset();
  EXPECT_EQ(reader->epoch(), 1);
  std::vector<int64_t> e1 = drain(*reader, 4);
  EXPECT_EQ(e1.size(), 6u);
  auto fresh = FileReader::open(o);
  fresh->start_epoch(1);
  EXPECT_EQ(drain(*fresh, 4), e1);
}

TEST(FileReaderTest, LastBatchPolicies) {
  TempDir dir;
  make_tree(dir, {10});
  auto batches = [&](LastBatchPolicy policy) {
    FileReaderOptions o;
    o.file_root = dir.path();
    o.last_batch_policy = policy;
    auto reader = FileReader::open(o);
    KILN_CHECK(reader.ok());
    std::vector<std::vector<SampleRef>> out;
    for (auto b = reader->next_batch(4); !b.empty(); b = reader->next_batch(4)) out.push_back(b);
    return out;
  };
  auto partial = batches(LastBatchPolicy::kPartial);
  ASSERT_EQ(partial.size(), 3u);
  EXPECT_EQ(entries_of(partial[2]), (std::vector<int64_t>{8, 9}));

  auto drop = batches(LastBatchPolicy::kDrop);
  ASSERT_EQ(drop.size(), 2u);
  EXPECT_EQ(entries_of(drop[1]), (std::vector<int64_t>{4, 5, 6, 7}));

  auto fill = batches(LastBatchPolicy::kFill);
  ASSERT_EQ(fill.size(), 3u);
  EXPECT_EQ(entries_of(fill[2]), (std::vector<int64_t>{8, 9, 0, 1}));
  EXPECT_FALSE(fill[2][1].padded);
  EXPECT_TRUE(fill[2][2].padded);
  EXPECT_EQ(fill[2][3].position, 11);

  EXPECT_FALSE(parse_last_batch_policy("pad").ok());
}

TEST(FileReaderTest, InvalidShardArguments) {
  TempDir dir;
  make_tree(dir, {2});
  FileReaderOptions o;
  o.file_root = dir.path();
  o.shard_id = 2;
  o.num_shards = 2;
  auto bad = FileReader::open(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("shard_id 2 must be in [0, num_shards 2)"));
  o.shard_id = 0;
  o.num_shards = 3;
  EXPECT_FALSE(FileReader::open(o).ok());  // 2 samples cannot fill 3 shards
}

}  // namespace
}  // namespace kiln::pipeline
