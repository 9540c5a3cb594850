// SPDX-License-Identifier: Apache-2.0
// COCO instances parsing: images sorted by id, boxes filtered and converted, categories remapped.
#include "pipeline/readers/coco.h"

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>

#include "core/mapped_file.h"

namespace kiln::pipeline {
namespace {

using rapidjson::Value;

// The member `key` of `obj` as an integer; else an error naming `where`.
Result<int64_t> int_field(const Value& obj, const char* key, const std::string& where) {
  auto it = obj.FindMember(key);
  if (it == obj.MemberEnd() || !it->value.IsInt64()) {
    return invalid_argument_error(fmt::format("{}: \"{}\" must be an integer", where, key));
  }
  return it->value.GetInt64();
}

Result<const Value*> array_field(const Value& obj, const char* key, const std::string& where) {
  auto it = obj.FindMember(key);
  if (it == obj.MemberEnd() || !it->value.IsArray()) {
    return invalid_argument_error(fmt::format("{}: \"{}\" must be an array", where, key));
  }
  return &it->value;
}

}  // namespace

Result<CocoSet> read_coco(const CocoOptions& options) {
  const std::string& file = options.annotations_file;
  KILN_ASSIGN_OR_RETURN(std::string text, read_file(file));
  rapidjson::Document doc;
  doc.Parse(text.data(), text.size());
  if (doc.HasParseError()) {
    return invalid_argument_error(fmt::format("coco annotations \"{}\": bad JSON at byte {}: {}",
                                              file, doc.GetErrorOffset(),
                                              rapidjson::GetParseError_En(doc.GetParseError())));
  }
  const std::string top = fmt::format("coco annotations \"{}\"", file);
  if (!doc.IsObject()) return invalid_argument_error(top + ": expected a JSON object");
  KILN_ASSIGN_OR_RETURN(const Value* images, array_field(doc, "images", top));
  KILN_ASSIGN_OR_RETURN(const Value* annotations, array_field(doc, "annotations", top));
  KILN_ASSIGN_OR_RETURN(const Value* categories, array_field(doc, "categories", top));

  // Categories: ids in increasing order map to 1..N (0 stays the background class).
  std::map<int64_t, int32_t> category_label;
  for (rapidjson::SizeType i = 0; i < categories->Size(); ++i) {
    const std::string where = fmt::format("{} categories[{}]", top, i);
    const Value& c = (*categories)[i];
    if (!c.IsObject()) return invalid_argument_error(where + ": expected an object");
    KILN_ASSIGN_OR_RETURN(int64_t id, int_field(c, "id", where));
    category_label[id] = 0;
  }
  int32_t next_label = 1;
  for (auto& [id, label] : category_label) {
    label = options.avoid_class_remapping ? static_cast<int32_t>(id) : next_label++;
  }

  CocoSet set;
  std::map<int64_t, size_t> image_index;
  std::vector<std::string> file_names;
  for (rapidjson::SizeType i = 0; i < images->Size(); ++i) {
    const std::string where = fmt::format("{} images[{}]", top, i);
    const Value& im = (*images)[i];
    if (!im.IsObject()) return invalid_argument_error(where + ": expected an object");
    KILN_ASSIGN_OR_RETURN(int64_t id, int_field(im, "id", where));
    KILN_ASSIGN_OR_RETURN(int64_t width, int_field(im, "width", where));
    KILN_ASSIGN_OR_RETURN(int64_t height, int_field(im, "height", where));
    auto name = im.FindMember("file_name");
    if (name == im.MemberEnd() || !name->value.IsString()) {
      return invalid_argument_error(where + ": \"file_name\" must be a string");
    }
    if (width <= 0 || height <= 0) {
      return invalid_argument_error(
          fmt::format("{}: width {} and height {} must be positive", where, width, height));
    }
    if (!image_index.emplace(id, set.images.size()).second) {
      return invalid_argument_error(fmt::format("{}: image id {} appears twice", where, id));
    }
    CocoImage image;
    image.image_id = static_cast<int32_t>(id);
    image.width = width;
    image.height = height;
    set.images.push_back(std::move(image));
    file_names.emplace_back(name->value.GetString(), name->value.GetStringLength());
  }

  for (rapidjson::SizeType i = 0; i < annotations->Size(); ++i) {
    const std::string where = fmt::format("{} annotations[{}]", top, i);
    const Value& a = (*annotations)[i];
    if (!a.IsObject()) return invalid_argument_error(where + ": expected an object");
    KILN_ASSIGN_OR_RETURN(int64_t image_id, int_field(a, "image_id", where));
    KILN_ASSIGN_OR_RETURN(int64_t category, int_field(a, "category_id", where));
    KILN_ASSIGN_OR_RETURN(const Value* bbox, array_field(a, "bbox", where));
    auto crowd = a.FindMember("iscrowd");
    const bool is_crowd =
        crowd != a.MemberEnd() && crowd->value.IsInt64() && crowd->value.GetInt64() != 0;
    auto im = image_index.find(image_id);
    if (im == image_index.end()) {
      return invalid_argument_error(
          fmt::format("{}: image_id {} is not in \"images\"", where, image_id));
    }
    auto cat = category_label.find(category);
    if (cat == category_label.end()) {
      return invalid_argument_error(
          fmt::format("{}: category_id {} is not in \"categories\"", where, category));
    }
    if (bbox->Size() != 4 ||
        !std::all_of(bbox->Begin(), bbox->End(), [](const Value& v) { return v.IsNumber(); })) {
      return invalid_argument_error(where + ": \"bbox\" must be 4 numbers [x, y, width, height]");
    }
    if (is_crowd && !options.include_iscrowd) continue;
    double x = (*bbox)[0].GetDouble(), y = (*bbox)[1].GetDouble();
    double w = (*bbox)[2].GetDouble(), h = (*bbox)[3].GetDouble();
    if (w < options.size_threshold || h < options.size_threshold) continue;
    CocoImage& image = set.images[im->second];
    if (options.ltrb) {
      w += x;
      h += y;
    }
    if (options.ratio) {
      const auto iw = static_cast<double>(image.width), ih = static_cast<double>(image.height);
      x /= iw;
      w /= iw;
      y /= ih;
      h /= ih;
    }
    for (double v : {x, y, w, h}) image.boxes.push_back(static_cast<float>(v));
    image.labels.push_back(cat->second);
  }

  // Images in increasing id order (the order of the file is arbitrary); skip_empty drops those
  // without boxes.
  std::vector<size_t> order(set.images.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return set.images[a].image_id < set.images[b].image_id; });
  std::vector<CocoImage> sorted;
  for (size_t i : order) {
    if (options.skip_empty && set.images[i].labels.empty()) continue;
    FileEntry entry;
    entry.path = (std::filesystem::path(options.file_root) / file_names[i]).string();
    entry.label = static_cast<int32_t>(sorted.size());
    set.entries.push_back(std::move(entry));
    sorted.push_back(std::move(set.images[i]));
  }
  set.images = std::move(sorted);
  if (set.entries.empty()) {
    return invalid_argument_error(
        fmt::format("{}: no images{}", top, options.skip_empty ? " with boxes (skip_empty)" : ""));
  }
  return set;
}

}  // namespace kiln::pipeline
