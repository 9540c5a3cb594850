// SPDX-License-Identifier: Apache-2.0
// Tests TFRecord reading: framing and checksums, Example parsing, the index, and a pipeline over
// a real TFRecord file of JPEG and PNG records.
#include "pipeline/readers/tfrecord.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "pipeline/decoders/image_decoder.h"
#include "pipeline/executor/pipeline.h"
#include "pipeline/testing/test_images.h"

namespace kiln::pipeline {
namespace {

using ::testing::HasSubstr;

void put_varint(std::vector<uint8_t>* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<uint8_t>(v));
}

void put_bytes(std::vector<uint8_t>* out, int field, std::span<const uint8_t> bytes) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | 2);
  put_varint(out, bytes.size());
  out->insert(out->end(), bytes.begin(), bytes.end());
}

std::span<const uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// A tf.train.Example with a bytes feature and an int64 feature (packed or not), written the way
// TensorFlow's protobuf serializer does.
std::vector<uint8_t> example(std::span<const uint8_t> image, int64_t label, bool packed) {
  std::vector<uint8_t> bytes_list, int64_list, f_image, f_label, entry1, entry2, features, ex;
  put_bytes(&bytes_list, 1, image);
  if (packed) {
    std::vector<uint8_t> values;
    put_varint(&values, static_cast<uint64_t>(label));
    put_bytes(&int64_list, 1, values);
  } else {
    put_varint(&int64_list, 1 << 3 | 0);
    put_varint(&int64_list, static_cast<uint64_t>(label));
  }
  put_bytes(&f_image, 1, bytes_list);
  put_bytes(&f_label, 3, int64_list);
  put_bytes(&entry1, 1, as_bytes("image/class/label"));
  put_bytes(&entry1, 2, f_label);
  put_bytes(&entry2, 1, as_bytes("image/encoded"));
  put_bytes(&entry2, 2, f_image);
  put_bytes(&features, 1, entry1);
  put_bytes(&features, 1, entry2);
  put_bytes(&ex, 1, features);
  return ex;
}

std::vector<uint8_t> frame(std::span<const uint8_t> payload) {
  std::vector<uint8_t> out(12);
  const uint64_t length = payload.size();
  std::memcpy(out.data(), &length, 8);
  const uint32_t length_crc = tfrecord_masked_crc(std::span<const uint8_t>(out.data(), 8));
  std::memcpy(out.data() + 8, &length_crc, 4);
  out.insert(out.end(), payload.begin(), payload.end());
  const uint32_t crc = tfrecord_masked_crc(payload);
  const auto* c = reinterpret_cast<const uint8_t*>(&crc);
  out.insert(out.end(), c, c + 4);
  return out;
}

TEST(TfRecordTest, Crc32cMatchesTheKnownValue) {
  // CRC-32C("123456789") = 0xe3069283, masked as TFRecord does.
  const uint32_t crc = 0xe3069283u;
  EXPECT_EQ(tfrecord_masked_crc(as_bytes("123456789")), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST(TfRecordTest, ParsesExamplesAndRejectsCorruptRecords) {
  const std::vector<uint8_t> image{1, 2, 3, 250};
  for (bool packed : {true, false}) {
    std::vector<uint8_t> record = frame(example(image, 42, packed));
    auto ex = parse_tfrecord_example(record, "image/encoded", "image/class/label", "r");
    ASSERT_TRUE(ex.ok()) << ex.status().to_string();
    EXPECT_EQ(std::vector<uint8_t>(ex->encoded.begin(), ex->encoded.end()), image);
    EXPECT_EQ(ex->label, 42);
  }
  std::vector<uint8_t> record = frame(example(image, 7, true));
  auto missing = parse_tfrecord_example(record, "image/jpeg", "label", "r");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no bytes feature \"image/jpeg\""));
  record[20] ^= 0x40;
  auto corrupt = parse_tfrecord_example(record, "image/encoded", "image/class/label", "r");
  ASSERT_FALSE(corrupt.ok());
  EXPECT_THAT(corrupt.status().message(), HasSubstr("payload checksum mismatch"));
  auto shortened = parse_tfrecord_example(std::span<const uint8_t>(record).first(30),
                                          "image/encoded", "image/class/label", "r");
  ASSERT_FALSE(shortened.ok());
  EXPECT_THAT(shortened.status().message(), HasSubstr("does not match"));
}

TEST(TfRecordTest, PipelineReadsRecordsLikeFilesAndSkipsCorruptOnes) {
  testing::TempDir dir;
  const std::string path = dir.file("data.tfrecord"), index = dir.file("data.idx");
  std::vector<std::vector<uint8_t>> pixels;
  std::vector<uint8_t> file;
  std::string index_text;
  for (int i = 0; i < 6; ++i) {
    const int w = 40 + 3 * i, h = 30 + i;
    pixels.push_back(testing::make_pixels(w, h, 3, testing::Pattern::kGradient));
    std::vector<uint8_t> encoded = i % 2 ? testing::encode_png(pixels.back(), w, h, 3)
                                         : testing::encode_jpeg(pixels.back(), w, h, 3);
    std::vector<uint8_t> record = frame(example(encoded, 100 + i, i % 3 == 0));
    if (i == 4) record[record.size() / 2] ^= 0xff;  // corrupt: reported and skipped
    index_text += fmt::format("{} {}\n", file.size(), record.size());
    file.insert(file.end(), record.begin(), record.end());
  }
  testing::write_bytes(path, file);
  testing::write_bytes(index, as_bytes(index_text));

  PipelineOptions options;
  options.batch_size = 6;
  options.num_threads = 2;
  options.outputs = {"images", "label"};
  std::vector<OpSpec> ops = {
      {"readers.tfrecord", {{"path", path}, {"index_path", index}}, {}, {"encoded", "label"}, {}},
      {"decoders.image", {}, {"encoded"}, {"images"}, {}},
  };
  auto p = Pipeline::create(options, ops);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto batch = (*p)->run();
  ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status().to_string();
  ASSERT_EQ((*batch)->paths.size(), 5u);
  EXPECT_EQ((*batch)->paths[0], path + "@0");
  const std::vector<int> kept{0, 1, 2, 3, 5};
  for (size_t k = 0; k < kept.size(); ++k) {
    const int i = kept[k];
    EXPECT_EQ((*batch)->outputs[1].samples[k].data<int32_t>()[0], 100 + i);
    const Tensor& img = (*batch)->outputs[0].samples[k];
    ASSERT_EQ(img.shape(), Shape({30 + i, 40 + 3 * i, 3}));
    if (i % 2) {  // PNG is lossless
      EXPECT_TRUE(std::equal(pixels[i].begin(), pixels[i].end(), img.data<uint8_t>()));
    }
  }
  ASSERT_EQ((*p)->bad_samples().size(), 1u);
  EXPECT_THAT((*p)->bad_samples()[0].reason, HasSubstr("checksum mismatch"));

  testing::write_bytes(index, as_bytes("0 12\n"));
  auto bad_index = Pipeline::create(options, ops);
  ASSERT_FALSE(bad_index.ok());
  EXPECT_THAT(bad_index.status().message(), HasSubstr("line 1: expected \"offset size\""));
}

}  // namespace
}  // namespace kiln::pipeline
