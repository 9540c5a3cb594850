// SPDX-License-Identifier: Apache-2.0
// Box flips, overlaps and crops against hand-computed coordinates.
#include "pipeline/kernels/bbox.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::pipeline::kernels {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;

auto near(float a, float b, float c, float d) {
  constexpr float kEps = 1e-6f;
  return ElementsAre(FloatNear(a, kEps), FloatNear(b, kEps), FloatNear(c, kEps),
                     FloatNear(d, kEps));
}

TEST(BboxTest, FlipsMirrorBothLayouts) {
  std::vector<float> xywh{0.1f, 0.2f, 0.3f, 0.4f};
  flip_boxes(xywh, BoxLayout::kXYWH, true, false);
  EXPECT_THAT(xywh, near(0.6f, 0.2f, 0.3f, 0.4f));  // x' = 1 - 0.1 - 0.3
  flip_boxes(xywh, BoxLayout::kXYWH, false, true);
  EXPECT_THAT(xywh, near(0.6f, 0.4f, 0.3f, 0.4f));  // y' = 1 - 0.2 - 0.4
  std::vector<float> ltrb{0.1f, 0.2f, 0.4f, 0.6f};
  flip_boxes(ltrb, BoxLayout::kLTRB, true, true);
  EXPECT_THAT(ltrb, near(0.6f, 0.4f, 0.9f, 0.8f));
}

TEST(BboxTest, OverlapIsIouOrTheFractionOfTheBox) {
  const float box[4] = {0.0f, 0.0f, 0.5f, 0.5f};
  const RelWindow w{0.25, 0.25, 0.5, 0.5};
  // Intersection 0.25 x 0.25 = 0.0625; union 0.25 + 0.25 - 0.0625.
  EXPECT_NEAR(box_window_overlap(box, BoxLayout::kLTRB, w, false), 0.0625 / 0.4375, 1e-7);
  EXPECT_NEAR(box_window_overlap(box, BoxLayout::kLTRB, w, true), 0.25, 1e-7);
  const float empty[4] = {0.3f, 0.3f, 0.0f, 0.0f};  // xywh, zero size
  EXPECT_EQ(box_window_overlap(empty, BoxLayout::kXYWH, w, true), 0.0);
}

TEST(BboxTest, CropKeepsBoxesWhoseCentreIsInsideClipsAndMapsThem) {
  // Window [0.2, 0.7] x [0.1, 0.9].
  const RelWindow w{0.2, 0.1, 0.5, 0.8};
  const std::vector<float> boxes{
      0.1f,  0.2f, 0.5f,  0.4f,   // A: centre (0.3, 0.3) inside; left edge clipped to 0.2
      0.6f,  0.5f, 0.9f,  0.95f,  // B: centre x 0.75 > 0.7: dropped
      0.65f, 0.8f, 0.75f, 0.95f,  // C: centre x 0.7 on the border: kept, clipped right and bottom
  };
  std::vector<float> out;
  EXPECT_THAT(crop_boxes(boxes, BoxLayout::kLTRB, w, -1.0, &out), ElementsAre(0, 2));
  ASSERT_EQ(out.size(), 8u);
  // A: ((0.2-0.2)/0.5, (0.2-0.1)/0.8, (0.5-0.2)/0.5, (0.4-0.1)/0.8).
  EXPECT_THAT(std::vector<float>(out.begin(), out.begin() + 4), near(0.0f, 0.125f, 0.6f, 0.375f));
  // C: ((0.65-0.2)/0.5, (0.8-0.1)/0.8, 1, 1).
  EXPECT_THAT(std::vector<float>(out.begin() + 4, out.end()), near(0.9f, 0.875f, 1.0f, 1.0f));

  // By area: A has 0.06 / 0.08 = 0.75 inside, B 0.04 / 0.135, C 0.005 / 0.015.
  out.clear();
  EXPECT_THAT(crop_boxes(boxes, BoxLayout::kLTRB, w, 0.5, &out), ElementsAre(0));
  out.clear();
  EXPECT_THAT(crop_boxes(boxes, BoxLayout::kLTRB, w, 0.25, &out), ElementsAre(0, 1, 2));

  // The same box A as [x, y, width, height].
  out.clear();
  const std::vector<float> a_xywh{0.1f, 0.2f, 0.4f, 0.2f};
  EXPECT_THAT(crop_boxes(a_xywh, BoxLayout::kXYWH, w, -1.0, &out), ElementsAre(0));
  EXPECT_THAT(out, near(0.0f, 0.125f, 0.6f, 0.25f));
}

}  // namespace
}  // namespace kiln::pipeline::kernels
