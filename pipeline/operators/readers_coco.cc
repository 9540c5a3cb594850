// SPDX-License-Identifier: Apache-2.0
// readers.coco: (encoded, bboxes, labels, image_ids) samples from a COCO instances file.
#include "pipeline/operators/operators.h"
#include "pipeline/operators/readers_file.h"

namespace kiln::pipeline {

CocoOptions coco_options(const OpArgs& args) {
  CocoOptions o;
  o.file_root = args.get_string("file_root");
  o.annotations_file = args.get_string("annotations_file");
  o.ltrb = args.get_bool("ltrb");
  o.ratio = args.get_bool("ratio");
  o.skip_empty = args.get_bool("skip_empty");
  o.size_threshold = args.get_float("size_threshold");
  o.include_iscrowd = args.get_bool("include_iscrowd");
  o.avoid_class_remapping = args.get_bool("avoid_class_remapping");
  return o;
}

Result<FileReaderOptions> coco_reader_options(const OpArgs& args, uint64_t pipeline_seed) {
  FileReaderOptions o;
  KILN_RETURN_IF_ERROR(read_common_reader_args(args, pipeline_seed, &o));
  return o;
}

namespace detail {

const OperatorSchema& readers_coco_schema() {
  static const OperatorSchema schema{
      "readers.coco",
      "reads encoded images with their boxes, category labels and image ids from a COCO "
      "instances file",
      {},
      {"encoded", "bboxes", "labels", "image_ids"},
      with_common_reader_args({
          {"file_root", ArgType::kString, std::nullopt, "folder the images' file_name are in"},
          {"annotations_file", ArgType::kString, std::nullopt, "the instances JSON file"},
          {"ltrb", ArgType::kBool, false,
           "boxes as [left, top, right, bottom]; false: [x, y, width, height]"},
          {"ratio", ArgType::kBool, false,
           "box coordinates relative to the image size (needed by the box operators)"},
          {"skip_empty", ArgType::kBool, false, "leave out images without boxes"},
          {"size_threshold", ArgType::kFloat, 0.1,
           "drop boxes narrower or shorter than this many pixels"},
          {"include_iscrowd", ArgType::kBool, true, "keep annotations marked iscrowd"},
          {"avoid_class_remapping", ArgType::kBool, false,
           "labels are the category ids; false: 1..N in category id order"},
      })};
  return schema;
}

Result<std::unique_ptr<Operator>> make_readers_coco(OpArgs args) {
  KILN_RETURN_IF_ERROR(coco_reader_options(args, 0).status());
  if (args.get_float("size_threshold") < 0.0) {
    return invalid_argument_error("operator readers.coco: size_threshold must be >= 0");
  }
  return std::unique_ptr<Operator>(new ReaderOperator(std::move(args)));
}

}  // namespace detail
}  // namespace kiln::pipeline
