// SPDX-License-Identifier: Apache-2.0
// COCO instances files: images, boxes, category labels and image ids (DALI's readers.coco).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "pipeline/readers/file_reader.h"

namespace kiln::pipeline {

struct CocoOptions {
  std::string file_root;         // folder the images' file_name are relative to
  std::string annotations_file;  // instances JSON
  bool ltrb = false;             // boxes as [left, top, right, bottom]; else [x, y, width, height]
  bool ratio = false;            // coordinates relative to the image size; else pixels
  bool skip_empty = false;       // leave out images without (kept) boxes
  double size_threshold = 0.1;   // drop boxes narrower or shorter than this, in pixels
  bool include_iscrowd = true;   // keep annotations marked iscrowd = 1
  bool avoid_class_remapping = false;  // labels are the category ids; else 1..N in id order
};

// The annotations of one image, in the order of the instances file.
struct CocoImage {
  int32_t image_id = 0;
  int64_t width = 0;  // from the instances file
  int64_t height = 0;
  std::vector<float> boxes;  // 4 per box, as the options ask
  std::vector<int32_t> labels;
};

struct CocoSet {
  std::vector<FileEntry> entries;  // one per image, sorted by image id; label = index in images
  std::vector<CocoImage> images;
};

// Parses the instances file. Errors name the file and the entry (bad JSON with its offset, a
// missing or mistyped field, an annotation of an unknown image or category).
Result<CocoSet> read_coco(const CocoOptions& options);

}  // namespace kiln::pipeline
