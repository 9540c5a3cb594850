// SPDX-License-Identifier: Apache-2.0
// readers.coco on a tiny COCO set built here, and boxes following random_bbox_crop, slice and
// flips through a whole pipeline.
#include "pipeline/readers/coco.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <set>

#include "pipeline/executor/pipeline.h"
#include "pipeline/json/pipeline_json.h"
#include "pipeline/testing/test_images.h"

namespace kiln::pipeline {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;

void write_text(const std::string& path, const std::string& text) {
  testing::write_bytes(path, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

// Three images listed out of id order; categories 90, 5, 18 (labels 3, 1, 2 when remapped).
std::string write_small_set(const testing::TempDir& dir) {
  for (auto [name, w, h] : {std::tuple{"a.jpg", 64, 48}, {"b.jpg", 40, 30}, {"c.jpg", 20, 20}}) {
    testing::write_bytes(
        dir.file(std::string("images/") + name),
        testing::encode_jpeg(testing::make_pixels(w, h, 3, testing::Pattern::kGradient), w, h, 3));
  }
  const std::string json = R"({
    "images": [{"id": 7, "file_name": "a.jpg", "width": 64, "height": 48},
               {"id": 3, "file_name": "b.jpg", "width": 40, "height": 30},
               {"id": 12, "file_name": "c.jpg", "width": 20, "height": 20}],
    "categories": [{"id": 90, "name": "z"}, {"id": 5, "name": "a"}, {"id": 18, "name": "m"}],
    "annotations": [
      {"id": 1, "image_id": 3, "category_id": 18, "bbox": [4, 6, 10, 8], "iscrowd": 0},
      {"id": 2, "image_id": 3, "category_id": 5, "bbox": [20, 2, 0.05, 5], "iscrowd": 0},
      {"id": 3, "image_id": 7, "category_id": 90, "bbox": [16, 12, 32, 24], "iscrowd": 0},
      {"id": 4, "image_id": 3, "category_id": 90, "bbox": [1, 1, 2, 2], "iscrowd": 1}]})";
  write_text(dir.file("instances.json"), json);
  return dir.file("instances.json");
}

TEST(CocoTest, ReadsImagesInIdOrderWithBoxesLabelsAndIds) {
  testing::TempDir dir;
  CocoOptions o;
  o.file_root = dir.path() + "/images";
  o.annotations_file = write_small_set(dir);
  auto set = read_coco(o);
  ASSERT_TRUE(set.ok()) << set.status().to_string();
  ASSERT_EQ(set->images.size(), 3u);
  EXPECT_EQ(set->images[0].image_id, 3);
  EXPECT_EQ(set->images[1].image_id, 7);
  EXPECT_EQ(set->images[2].image_id, 12);
  EXPECT_EQ(set->entries[0].path, dir.path() + "/images/b.jpg");
  // The 0.05-pixel-wide box is under size_threshold; the crowd box stays by default.
  EXPECT_THAT(set->images[0].boxes, ElementsAre(4, 6, 10, 8, 1, 1, 2, 2));
  EXPECT_THAT(set->images[0].labels, ElementsAre(2, 3));
  EXPECT_THAT(set->images[1].labels, ElementsAre(3));
  EXPECT_TRUE(set->images[2].labels.empty());

  o.ltrb = true;
  o.ratio = true;
  o.include_iscrowd = false;
  o.skip_empty = true;
  o.avoid_class_remapping = true;
  set = read_coco(o);
  ASSERT_TRUE(set.ok()) << set.status().to_string();
  ASSERT_EQ(set->images.size(), 2u);  // id 12 has no boxes
  constexpr float kEps = 1e-6f;
  // [4 / 40, 6 / 30, (4 + 10) / 40, (6 + 8) / 30].
  EXPECT_THAT(set->images[0].boxes,
              ElementsAre(FloatNear(0.1f, kEps), FloatNear(0.2f, kEps), FloatNear(0.35f, kEps),
                          FloatNear(14.f / 30, kEps)));
  EXPECT_THAT(set->images[0].labels, ElementsAre(18));
  EXPECT_THAT(set->images[1].boxes, ElementsAre(FloatNear(0.25f, kEps), FloatNear(0.25f, kEps),
                                                FloatNear(0.75f, kEps), FloatNear(0.75f, kEps)));
}

TEST(CocoTest, BadAnnotationsNameTheEntry) {
  testing::TempDir dir;
  CocoOptions o;
  o.file_root = dir.path();
  o.annotations_file = dir.file("bad.json");
  write_text(o.annotations_file,
             R"({"images": [{"id": 1, "file_name": "x.jpg", "width": 4, "height": 4}],
                 "categories": [{"id": 1}],
                 "annotations": [{"image_id": 2, "category_id": 1, "bbox": [0, 0, 1, 1]}]})");
  auto set = read_coco(o);
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(set.status().message(), HasSubstr("annotations[0]: image_id 2 is not in"));
  write_text(o.annotations_file, R"({"images": [}")");
  set = read_coco(o);
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(set.status().message(), HasSubstr("bad JSON at byte"));
}

// Six PNG images of a grey background with rectangles filled in their category's colour.
constexpr std::array<std::array<uint8_t, 3>, 4> kColors{
    {{128, 128, 128}, {255, 0, 0}, {0, 255, 0}, {0, 0, 255}}};

struct PixelBox {
  int x, y, w, h, category;
};

std::string write_colored_set(const testing::TempDir& dir, std::vector<std::array<int, 2>>* sizes,
                              std::vector<std::vector<PixelBox>>* boxes) {
  std::string images, annotations;
  int ann_id = 0;
  for (int i = 0; i < 6; ++i) {
    const int w = 80 + 8 * i, h = 64 + 4 * i;
    std::vector<PixelBox> mine;
    for (int k = 0; k < 3 - i % 2; ++k) mine.push_back({3 + 25 * k, 5 + 12 * k, 20, 16, 1 + k});
    std::vector<uint8_t> px(static_cast<size_t>(w) * h * 3);
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        int cat = 0;
        for (const PixelBox& b : mine) {
          if (x >= b.x && x < b.x + b.w && y >= b.y && y < b.y + b.h) cat = b.category;
        }
        for (int c = 0; c < 3; ++c) px[(static_cast<size_t>(y) * w + x) * 3 + c] = kColors[cat][c];
      }
    }
    testing::write_bytes(dir.file(fmt::format("img/{}.png", i)), testing::encode_png(px, w, h, 3));
    images += fmt::format(R"({}{{"id": {}, "file_name": "{}.png", "width": {}, "height": {}}})",
                          i ? "," : "", 100 + i, i, w, h);
    for (const PixelBox& b : mine) {
      annotations += fmt::format(
          R"({}{{"id": {}, "image_id": {}, "category_id": {}, "bbox": [{}, {}, {}, {}]}})",
          ann_id ? "," : "", ann_id, 100 + i, b.category, b.x, b.y, b.w, b.h);
      ++ann_id;
    }
    sizes->push_back({w, h});
    boxes->push_back(std::move(mine));
  }
  write_text(dir.file("instances.json"),
             fmt::format(R"({{"images": [{}], "annotations": [{}], "categories": [{{"id": 1}}, )"
                         R"({{"id": 2}}, {{"id": 3}}]}})",
                         images, annotations));
  return dir.file("instances.json");
}

TEST(CocoTest, BoxesFollowRandomBboxCropSliceAndFlips) {
  testing::TempDir dir;
  std::vector<std::array<int, 2>> sizes;
  std::vector<std::vector<PixelBox>> pixel_boxes;
  const std::string annotations = write_colored_set(dir, &sizes, &pixel_boxes);
  std::vector<OpSpec> ops = {
      {"readers.coco",
       {{"file_root", dir.path() + "/img"},
        {"annotations_file", annotations},
        {"ltrb", true},
        {"ratio", true},
        {"random_shuffle", true}},
       {},
       {},
       {}},
      {"decoders.image", {}, {"encoded"}, {"decoded"}, {}},
      {"random_bbox_crop",
       {{"thresholds", std::vector<double>{0.0, 0.1, 0.3}},
        {"scaling", std::vector<double>{0.3, 1.0}},
        {"aspect_ratio", std::vector<double>{0.5, 2.0}},
        {"num_attempts", int64_t{20}}},
       {"bboxes", "labels"},
       {"anchor", "shape", "crop_boxes", "crop_labels"},
       {}},
      {"slice", {}, {"decoded", "anchor", "shape"}, {"cropped"}, {}},
      {"random.coin_flip", {}, {}, {"mirror"}, {}},
      {"flip", {}, {"cropped"}, {"flipped"}, {{"horizontal", "mirror"}}},
      {"bb_flip", {{"ltrb", true}}, {"crop_boxes"}, {"flipped_boxes"}, {{"horizontal", "mirror"}}},
  };
  PipelineOptions options;
  options.batch_size = 3;
  options.num_threads = 2;
  options.seed = 5;
  options.outputs = {"flipped", "flipped_boxes", "crop_labels", "image_ids",
                     "anchor",  "shape",         "mirror"};
  auto p = Pipeline::create(options, ops);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  int checked_boxes = 0, dropped = 0, crops = 0, flips = 0;
  for (int epoch = 0; epoch < 4; ++epoch) {
    std::set<int32_t> ids;
    while (true) {
      auto batch = (*p)->run();
      ASSERT_TRUE(batch.ok()) << batch.status().to_string();
      if (!*batch) break;
      const Batch& b = **batch;
      for (size_t s = 0; s < b.paths.size(); ++s) {
        const Tensor& image = b.outputs[0].samples[s];
        const Tensor& boxes = b.outputs[1].samples[s];
        const Tensor& labels = b.outputs[2].samples[s];
        const int32_t id = b.outputs[3].samples[s].data<int32_t>()[0];
        const float* anchor = b.outputs[4].samples[s].data<float>();
        const float* shape = b.outputs[5].samples[s].data<float>();
        const bool mirror = b.outputs[6].samples[s].data<int32_t>()[0] != 0;
        ids.insert(id);
        const int i = id - 100;
        const double iw = sizes[i][0], ih = sizes[i][1];
        // Expected boxes by hand: relative, kept when the centre is inside the window, clipped,
        // mapped to the window, mirrored.
        std::vector<float> expected;
        std::vector<int32_t> expected_labels;
        for (const PixelBox& pb : pixel_boxes[i]) {
          const double l = pb.x / iw, t = pb.y / ih, r = (pb.x + pb.w) / iw,
                       bt = (pb.y + pb.h) / ih;
          const double cx = (l + r) / 2, cy = (t + bt) / 2;
          if (cx < anchor[0] || cx > anchor[0] + shape[0] || cy < anchor[1] ||
              cy > anchor[1] + shape[1]) {
            ++dropped;
            continue;
          }
          double nl = (std::max<double>(l, anchor[0]) - anchor[0]) / shape[0];
          double nr = (std::min<double>(r, anchor[0] + shape[0]) - anchor[0]) / shape[0];
          const double nt = (std::max<double>(t, anchor[1]) - anchor[1]) / shape[1];
          const double nb = (std::min<double>(bt, anchor[1] + shape[1]) - anchor[1]) / shape[1];
          if (mirror) std::tie(nl, nr) = std::pair(1 - nr, 1 - nl);
          for (double v : {nl, nt, nr, nb}) expected.push_back(static_cast<float>(v));
          expected_labels.push_back(pb.category);
        }
        ASSERT_EQ(boxes.shape(), Shape({static_cast<int64_t>(expected_labels.size()), 4}));
        ASSERT_EQ(labels.numel(), static_cast<int64_t>(expected_labels.size()));
        ASSERT_FALSE(expected_labels.empty()) << "a crop must keep at least one box";
        crops += shape[0] < 1.0f || shape[1] < 1.0f;
        flips += mirror;
        for (size_t k = 0; k < expected_labels.size(); ++k) {
          EXPECT_EQ(labels.data<int32_t>()[k], expected_labels[k]);
          for (int c = 0; c < 4; ++c) {
            EXPECT_NEAR(boxes.data<float>()[k * 4 + c], expected[k * 4 + c], 1e-5);
          }
          // The image agrees: the box's centre pixel has its category's colour.
          const int64_t oh = image.shape()[0], ow = image.shape()[1];
          const float* bx = boxes.data<float>() + k * 4;
          if ((bx[2] - bx[0]) * ow < 4 || (bx[3] - bx[1]) * oh < 4) continue;
          const auto px = static_cast<int64_t>((bx[0] + bx[2]) / 2 * ow);
          const auto py = static_cast<int64_t>((bx[1] + bx[3]) / 2 * oh);
          const uint8_t* pixel = image.data<uint8_t>() + (py * ow + px) * 3;
          EXPECT_THAT(std::vector<uint8_t>(pixel, pixel + 3),
                      ElementsAre(kColors[expected_labels[k]][0], kColors[expected_labels[k]][1],
                                  kColors[expected_labels[k]][2]))
              << "image " << id << " box " << k;
          ++checked_boxes;
        }
      }
    }
    EXPECT_EQ(ids.size(), 6u);  // every image once per epoch
    (*p)->reset();
  }
  EXPECT_GT(checked_boxes, 20);
  EXPECT_GT(dropped, 0);
  EXPECT_GT(crops, 5);
  EXPECT_GT(flips, 2);
}

TEST(CocoTest, DetectionJsonPipelineOfTheDocsRuns) {
  testing::TempDir dir;
  std::vector<std::array<int, 2>> sizes;
  std::vector<std::vector<PixelBox>> boxes;
  const std::string annotations = write_colored_set(dir, &sizes, &boxes);
  const std::string json = fmt::format(R"({{
    "batch_size": 6, "num_threads": 2, "seed": 3,
    "operators": [
      {{"op": "readers.coco", "args": {{"file_root": "{}", "annotations_file": "{}",
                                      "ltrb": true, "ratio": true, "random_shuffle": true}}}},
      {{"op": "random_bbox_crop", "args": {{"thresholds": [0, 0.1, 0.3, 0.5, 0.7, 0.9],
                                          "scaling": [0.3, 1.0], "aspect_ratio": [0.5, 2.0]}}}},
      {{"op": "decoders.image_slice", "inputs": ["encoded", "anchor", "shape"]}},
      {{"op": "resize", "args": {{"resize_x": 30, "resize_y": 30}}}},
      {{"op": "random.coin_flip", "outputs": ["mirror"]}},
      {{"op": "flip", "arg_inputs": {{"horizontal": "mirror"}}}},
      {{"op": "bb_flip", "args": {{"ltrb": true}}, "arg_inputs": {{"horizontal": "mirror"}}}}
    ],
    "outputs": ["images", "bboxes", "labels"]}})",
                                       dir.path() + "/img", annotations);
  auto spec = parse_pipeline_json(json, "detection.json");
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  auto p = Pipeline::create(spec->options, spec->ops);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto batch = (*p)->run();
  ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status().to_string();
  const Batch& b = **batch;
  EXPECT_EQ(b.outputs[0].dense.shape(), Shape({6, 30, 30, 3}));
  for (size_t i = 0; i < 6; ++i) {
    const Tensor& bx = b.outputs[1].samples[i];
    ASSERT_EQ(bx.shape()[0], b.outputs[2].samples[i].shape()[0]);
    ASSERT_GT(bx.shape()[0], 0);
    for (int64_t k = 0; k < bx.numel(); ++k) {
      EXPECT_GE(bx.data<float>()[k], 0.0f);
      EXPECT_LE(bx.data<float>()[k], 1.0f);
    }
  }
}

TEST(CocoTest, ShardsCoverEveryImageOnce) {
  testing::TempDir dir;
  std::vector<std::array<int, 2>> sizes;
  std::vector<std::vector<PixelBox>> boxes;
  const std::string annotations = write_colored_set(dir, &sizes, &boxes);
  std::multiset<int32_t> ids;
  for (int64_t shard = 0; shard < 3; ++shard) {
    PipelineOptions options;
    options.batch_size = 4;
    options.outputs = {"image_ids"};
    auto p = Pipeline::create(options, {{"readers.coco",
                                         {{"file_root", dir.path() + "/img"},
                                          {"annotations_file", annotations},
                                          {"shard_id", shard},
                                          {"num_shards", int64_t{3}},
                                          {"random_shuffle", true}},
                                         {},
                                         {},
                                         {}}});
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    while (true) {
      auto batch = (*p)->run();
      ASSERT_TRUE(batch.ok());
      if (!*batch) break;
      for (const Tensor& t : (**batch).outputs[0].samples) ids.insert(t.data<int32_t>()[0]);
    }
  }
  EXPECT_THAT(ids, ElementsAre(100, 101, 102, 103, 104, 105));
}

}  // namespace
}  // namespace kiln::pipeline
