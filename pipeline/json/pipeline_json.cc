// SPDX-License-Identifier: Apache-2.0
// Parses JSON pipelines (rocAL's six operations, or kiln's operator list) into a PipelineSpec.
#include "pipeline/json/pipeline_json.h"

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/mapped_file.h"

namespace kiln::pipeline {
namespace {

using rapidjson::Value;

const char* json_type_name(const Value& v) {
  if (v.IsNull()) return "null";
  if (v.IsBool()) return "a bool";
  if (v.IsInt64()) return "an integer";
  if (v.IsNumber()) return "a number";
  if (v.IsString()) return "a string";
  if (v.IsArray()) return "an array";
  return "an object";
}

// A JSON value as an operator argument: numbers, bools, strings and arrays of numbers or strings.
Result<ArgValue> to_arg_value(const Value& v, std::string_view where) {
  if (v.IsBool()) return ArgValue(v.GetBool());
  if (v.IsInt64()) return ArgValue(v.GetInt64());
  if (v.IsNumber()) return ArgValue(v.GetDouble());
  if (v.IsString()) return ArgValue(std::string(v.GetString(), v.GetStringLength()));
  if (v.IsArray()) {
    bool all_int = true;
    for (const Value& e : v.GetArray()) {
      if (!e.IsNumber()) {
        return invalid_argument_error(
            fmt::format("{}: expected an array of numbers, found an element that is {}", where,
                        json_type_name(e)));
      }
      all_int = all_int && e.IsInt64();
    }
    if (all_int) {
      std::vector<int64_t> out;
      for (const Value& e : v.GetArray()) out.push_back(e.GetInt64());
      return ArgValue(std::move(out));
    }
    std::vector<double> out;
    for (const Value& e : v.GetArray()) out.push_back(e.GetDouble());
    return ArgValue(std::move(out));
  }
  return invalid_argument_error(
      fmt::format("{}: expected a number, bool, string or array of numbers, found {}", where,
                  json_type_name(v)));
}

Result<std::vector<std::string>> to_strings(const Value& v, std::string_view where) {
  if (!v.IsArray()) {
    return invalid_argument_error(
        fmt::format("{}: expected an array of strings, found {}", where, json_type_name(v)));
  }
  std::vector<std::string> out;
  for (const Value& e : v.GetArray()) {
    if (!e.IsString()) {
      return invalid_argument_error(
          fmt::format("{}: expected an array of strings, found an element that is {}", where,
                      json_type_name(e)));
    }
    out.emplace_back(e.GetString(), e.GetStringLength());
  }
  return out;
}

Result<int64_t> to_int(const Value& v, std::string_view where) {
  if (!v.IsInt64()) {
    return invalid_argument_error(
        fmt::format("{}: expected an integer, found {}", where, json_type_name(v)));
  }
  return v.GetInt64();
}

Result<double> to_number(const Value& v, std::string_view where) {
  if (!v.IsNumber()) {
    return invalid_argument_error(
        fmt::format("{}: expected a number, found {}", where, json_type_name(v)));
  }
  return v.GetDouble();
}

Result<std::vector<double>> to_numbers(const Value& v, std::string_view where) {
  if (v.IsNumber()) return std::vector<double>{v.GetDouble()};
  if (!v.IsArray()) {
    return invalid_argument_error(
        fmt::format("{}: expected an array of numbers, found {}", where, json_type_name(v)));
  }
  std::vector<double> out;
  for (const Value& e : v.GetArray()) {
    KILN_ASSIGN_OR_RETURN(double d, to_number(e, where));
    out.push_back(d);
  }
  return out;
}

// Rejects keys of `object` outside `allowed`, naming the first unknown one and the valid ones.
Status check_keys(const Value& object, const std::set<std::string_view>& allowed,
                  std::string_view where) {
  for (const auto& m : object.GetObject()) {
    std::string_view key(m.name.GetString(), m.name.GetStringLength());
    if (!allowed.contains(key)) {
      return invalid_argument_error(fmt::format("{}: unknown key \"{}\" (expected one of: {})",
                                                where, key, fmt::join(allowed, ", ")));
    }
  }
  return Status();
}

// ---- rocAL's format ----

class RocalEntry {
 public:
  RocalEntry(const Value& v, std::string where) : v_(v), where_(std::move(where)) {}
  const std::string& where() const { return where_; }
  bool has(const char* key) const { return v_.HasMember(key); }
  std::string key_where(const char* key) const { return fmt::format("{}: \"{}\"", where_, key); }

  Result<int64_t> positive_int(const char* key) const {
    if (!has(key)) return missing(key);
    KILN_ASSIGN_OR_RETURN(int64_t value, to_int(v_[key], key_where(key)));
    if (value <= 0) {
      return invalid_argument_error(
          fmt::format("{}: expected a positive size, found {}", key_where(key), value));
    }
    return value;
  }
  Result<double> number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    return to_number(v_[key], key_where(key));
  }
  Result<std::vector<double>> numbers(const char* key, std::vector<double> fallback) const {
    if (!has(key)) return fallback;
    return to_numbers(v_[key], key_where(key));
  }
  Result<bool> flag(const char* key) const {
    if (!has(key)) return false;
    const Value& f = v_[key];
    if (f.IsBool()) return f.GetBool();
    if (f.IsInt64()) return f.GetInt64() != 0;
    return invalid_argument_error(
        fmt::format("{}: expected a bool or 0/1, found {}", key_where(key), json_type_name(f)));
  }

 private:
  Status missing(const char* key) const {
    return invalid_argument_error(fmt::format("{}: missing the key \"{}\"", where_, key));
  }
  const Value& v_;
  std::string where_;
};

OpSpec op_spec(std::string op, ArgMap args, std::string input, std::string output) {
  OpSpec spec;
  spec.op = std::move(op);
  spec.args = std::move(args);
  spec.inputs = {std::move(input)};
  spec.outputs = {std::move(output)};
  return spec;
}

// Appends the kiln operators of one rocAL operation, reading `in` and producing `out`.
Status add_rocal_operation(std::string_view operation, const RocalEntry& e, const std::string& in,
                           const std::string& out, std::vector<OpSpec>* ops) {
  const std::string mid = out + "_resized";
  if (operation == "Resize") {
    KILN_ASSIGN_OR_RETURN(int64_t w, e.positive_int("dest_width"));
    KILN_ASSIGN_OR_RETURN(int64_t h, e.positive_int("dest_height"));
    ops->push_back(op_spec("resize", {{"resize_x", w}, {"resize_y", h}}, in, out));
    return Status();
  }
  if (operation == "ResizeMirrorNormalize") {
    KILN_ASSIGN_OR_RETURN(int64_t w, e.positive_int("dest_width"));
    KILN_ASSIGN_OR_RETURN(int64_t h, e.positive_int("dest_height"));
    KILN_ASSIGN_OR_RETURN(std::vector<double> mean, e.numbers("mean", {0.0}));
    KILN_ASSIGN_OR_RETURN(std::vector<double> std_dev, e.numbers("std_dev", {1.0}));
    KILN_ASSIGN_OR_RETURN(bool mirror, e.flag("mirror"));
    ops->push_back(op_spec("resize", {{"resize_x", w}, {"resize_y", h}}, in, mid));
    ops->push_back(op_spec("crop_mirror_normalize",
                           {{"mean", mean},
                            {"std", std_dev},
                            {"mirror", int64_t{mirror}},
                            {"output_layout", std::string("HWC")}},
                           mid, out));
    return Status();
  }
  if (operation == "CropResizeFixed") {
    KILN_ASSIGN_OR_RETURN(int64_t w, e.positive_int("dest_width"));
    KILN_ASSIGN_OR_RETURN(int64_t h, e.positive_int("dest_height"));
    KILN_ASSIGN_OR_RETURN(double area, e.number("area", 1.0));
    KILN_ASSIGN_OR_RETURN(double aspect, e.number("aspect_ratio", 1.0));
    KILN_ASSIGN_OR_RETURN(double dx, e.number("x_center_drift", 0.0));
    KILN_ASSIGN_OR_RETURN(double dy, e.number("y_center_drift", 0.0));
    ops->push_back(op_spec("random_resized_crop",
                           {{"size", std::vector<int64_t>{h, w}},
                            {"random_area", std::vector<double>{area, area}},
                            {"random_aspect_ratio", std::vector<double>{aspect, aspect}},
                            {"crop_pos_x", std::clamp(0.5 + dx, 0.0, 1.0)},
                            {"crop_pos_y", std::clamp(0.5 + dy, 0.0, 1.0)}},
                           in, out));
    return Status();
  }
  if (operation == "CropMirrorNormalize") {
    KILN_ASSIGN_OR_RETURN(int64_t w, e.positive_int("crop_width"));
    KILN_ASSIGN_OR_RETURN(int64_t h, e.positive_int("crop_height"));
    KILN_ASSIGN_OR_RETURN(double x, e.number("start_x", 0.5));
    KILN_ASSIGN_OR_RETURN(double y, e.number("start_y", 0.5));
    KILN_ASSIGN_OR_RETURN(std::vector<double> mean, e.numbers("mean", {0.0}));
    KILN_ASSIGN_OR_RETURN(std::vector<double> std_dev, e.numbers("std_dev", {1.0}));
    KILN_ASSIGN_OR_RETURN(bool mirror, e.flag("mirror"));
    ops->push_back(op_spec("crop_mirror_normalize",
                           {{"crop", std::vector<int64_t>{h, w}},
                            {"crop_pos_x", x},
                            {"crop_pos_y", y},
                            {"mean", mean},
                            {"std", std_dev},
                            {"mirror", int64_t{mirror}},
                            {"output_layout", std::string("HWC")}},
                           in, out));
    return Status();
  }
  if (operation == "CropFixed") {
    KILN_ASSIGN_OR_RETURN(int64_t w, e.positive_int("crop_width"));
    KILN_ASSIGN_OR_RETURN(int64_t h, e.positive_int("crop_height"));
    KILN_ASSIGN_OR_RETURN(double x, e.number("crop_pos_x", 0.5));
    KILN_ASSIGN_OR_RETURN(double y, e.number("crop_pos_y", 0.5));
    ops->push_back(op_spec(
        "crop", {{"crop", std::vector<int64_t>{h, w}}, {"crop_pos_x", x}, {"crop_pos_y", y}}, in,
        out));
    return Status();
  }
  if (operation == "ResizeCropMirrorFixed") {
    KILN_ASSIGN_OR_RETURN(int64_t w, e.positive_int("dest_width"));
    KILN_ASSIGN_OR_RETURN(int64_t h, e.positive_int("dest_height"));
    KILN_ASSIGN_OR_RETURN(int64_t crop_w, e.positive_int("crop_w"));
    KILN_ASSIGN_OR_RETURN(int64_t crop_h, e.positive_int("crop_h"));
    KILN_ASSIGN_OR_RETURN(bool mirror, e.flag("mirror"));
    ops->push_back(op_spec("resize", {{"resize_x", w}, {"resize_y", h}}, in, mid));
    ops->push_back(op_spec("crop_mirror_normalize",
                           {{"crop", std::vector<int64_t>{crop_h, crop_w}},
                            {"mirror", int64_t{mirror}},
                            {"output_layout", std::string("HWC")},
                            {"dtype", std::string("uint8")}},
                           mid, out));
    return Status();
  }
  return invalid_argument_error(fmt::format(
      "{}: unknown operation \"{}\" (expected Resize, ResizeMirrorNormalize, CropResizeFixed, "
      "CropMirrorNormalize, CropFixed or ResizeCropMirrorFixed)",
      e.where(), operation));
}

const std::map<std::string_view, std::set<std::string_view>>& rocal_keys() {
  static const std::map<std::string_view, std::set<std::string_view>> keys = {
      {"Resize", {"operation", "dest_width", "dest_height", "is_output"}},
      {"ResizeMirrorNormalize",
       {"operation", "dest_width", "dest_height", "mean", "std_dev", "is_output", "mirror"}},
      {"CropResizeFixed",
       {"operation", "dest_width", "dest_height", "area", "aspect_ratio", "x_center_drift",
        "y_center_drift", "is_output"}},
      {"CropMirrorNormalize",
       {"operation", "crop_depth", "crop_height", "crop_width", "start_x", "start_y", "start_z",
        "mean", "std_dev", "is_output", "mirror"}},
      {"CropFixed",
       {"operation", "crop_width", "crop_height", "crop_depth", "crop_pos_x", "crop_pos_y",
        "crop_pos_z", "is_output"}},
      {"ResizeCropMirrorFixed",
       {"operation", "dest_width", "dest_height", "crop_h", "crop_w", "is_output", "mirror"}},
  };
  return keys;
}

Result<PipelineSpec> parse_rocal(const Value& root, std::string_view source) {
  PipelineSpec spec;
  spec.format = "rocal";
  KILN_RETURN_IF_ERROR(check_keys(root, {"pipeline"}, fmt::format("pipeline \"{}\"", source)));
  const Value& list = root["pipeline"];
  if (!list.IsArray() || list.Empty()) {
    return invalid_argument_error(
        fmt::format("pipeline \"{}\": \"pipeline\" must be a non-empty array of operations, "
                    "found {}",
                    source, list.IsArray() ? "an empty array" : json_type_name(list)));
  }
  spec.ops.push_back({"readers.file", {}, {}, {"encoded", "label"}, {}});
  spec.ops.push_back(op_spec("decoders.image", {}, "encoded", "decoded"));
  std::string previous = "decoded";
  std::vector<std::string> marked;
  for (rapidjson::SizeType i = 0; i < list.Size(); ++i) {
    const Value& entry = list[i];
    std::string where = fmt::format("pipeline \"{}\" entry #{}", source, i);
    if (!entry.IsObject()) {
      return invalid_argument_error(
          fmt::format("{}: expected an object, found {}", where, json_type_name(entry)));
    }
    if (!entry.HasMember("operation") || !entry["operation"].IsString()) {
      return invalid_argument_error(fmt::format("{}: missing the string key \"operation\"", where));
    }
    std::string_view operation(entry["operation"].GetString(),
                               entry["operation"].GetStringLength());
    where += fmt::format(" ({})", operation);
    RocalEntry e(entry, where);
    auto keys = rocal_keys().find(operation);
    if (keys != rocal_keys().end()) KILN_RETURN_IF_ERROR(check_keys(entry, keys->second, where));
    const std::string out = fmt::format("output{}", i);
    KILN_RETURN_IF_ERROR(add_rocal_operation(operation, e, previous, out, &spec.ops));
    KILN_ASSIGN_OR_RETURN(bool is_output, e.flag("is_output"));
    if (is_output) marked.push_back(out);
    previous = out;
  }
  spec.options.outputs = marked.empty() ? std::vector<std::string>{previous} : marked;
  spec.options.outputs.push_back("label");
  return spec;
}

// ---- kiln's format ----

Result<PipelineSpec> parse_kiln(const Value& root, std::string_view source) {
  PipelineSpec spec;
  spec.format = "kiln";
  const std::string top = fmt::format("pipeline \"{}\"", source);
  KILN_RETURN_IF_ERROR(check_keys(root,
                                  {"batch_size", "num_threads", "prefetch_queue_depth", "seed",
                                   "bad_data", "outputs", "operators"},
                                  top));
  PipelineOptions& o = spec.options;
  auto int_option = [&](const char* key, auto* target) -> Status {
    if (!root.HasMember(key)) return Status();
    KILN_ASSIGN_OR_RETURN(int64_t v, to_int(root[key], fmt::format("{}: \"{}\"", top, key)));
    *target = static_cast<std::remove_pointer_t<decltype(target)>>(v);
    return Status();
  };
  KILN_RETURN_IF_ERROR(int_option("batch_size", &o.batch_size));
  KILN_RETURN_IF_ERROR(int_option("num_threads", &o.num_threads));
  KILN_RETURN_IF_ERROR(int_option("prefetch_queue_depth", &o.prefetch_queue_depth));
  KILN_RETURN_IF_ERROR(int_option("seed", &o.seed));
  if (root.HasMember("bad_data")) {
    const Value& v = root["bad_data"];
    std::string_view policy = v.IsString() ? v.GetString() : "";
    if (policy != "skip" && policy != "error") {
      return invalid_argument_error(
          fmt::format("{}: \"bad_data\": expected \"skip\" or \"error\"", top));
    }
    o.bad_data = policy == "skip" ? BadDataPolicy::kSkip : BadDataPolicy::kError;
  }

  if (!root.HasMember("operators") || !root["operators"].IsArray() || root["operators"].Empty()) {
    return invalid_argument_error(
        fmt::format("{}: \"operators\" must be a non-empty array of operators", top));
  }
  // Friendly name -> the unique tensor name of its latest producer.
  std::map<std::string, std::string, std::less<>> latest;
  std::set<std::string, std::less<>> used;
  auto resolve = [&](const std::string& name) {
    auto it = latest.find(name);
    return it == latest.end() ? name : it->second;
  };
  const Value& list = root["operators"];
  for (rapidjson::SizeType i = 0; i < list.Size(); ++i) {
    const Value& entry = list[i];
    std::string where = fmt::format("{} operator #{}", top, i);
    if (!entry.IsObject()) {
      return invalid_argument_error(
          fmt::format("{}: expected an object, found {}", where, json_type_name(entry)));
    }
    if (!entry.HasMember("op") || !entry["op"].IsString()) {
      return invalid_argument_error(fmt::format("{}: missing the string key \"op\"", where));
    }
    OpSpec op;
    op.op = entry["op"].GetString();
    where += fmt::format(" ({})", op.op);
    KILN_RETURN_IF_ERROR(
        check_keys(entry, {"op", "args", "inputs", "outputs", "arg_inputs", "device"}, where));
    if (entry.HasMember("device")) {
      const Value& device = entry["device"];
      const std::string_view name =
          device.IsString() ? std::string_view(device.GetString(), device.GetStringLength())
                            : std::string_view();
      if (name != "cpu" && name != "gpu") {
        return invalid_argument_error(
            fmt::format("{}: \"device\" must be \"cpu\" or \"gpu\"", where));
      }
      op.gpu = name == "gpu";
    }
    const OperatorSchema* schema = find_operator_schema(op.op);
    if (schema == nullptr) {
      std::vector<std::string_view> names;
      for (const OperatorSchema* s : operator_schemas()) names.push_back(s->name);
      return invalid_argument_error(fmt::format("{}: unknown operator \"{}\" (known: {})", where,
                                                op.op, fmt::join(names, ", ")));
    }
    if (entry.HasMember("args")) {
      const Value& args = entry["args"];
      if (!args.IsObject()) {
        return invalid_argument_error(
            fmt::format("{}: \"args\" must be an object, found {}", where, json_type_name(args)));
      }
      for (const auto& m : args.GetObject()) {
        std::string name(m.name.GetString(), m.name.GetStringLength());
        KILN_ASSIGN_OR_RETURN(ArgValue value,
                              to_arg_value(m.value, fmt::format("{}: arg \"{}\"", where, name)));
        op.args.emplace(std::move(name), std::move(value));
      }
    }
    std::vector<std::string> inputs = schema->inputs;
    if (entry.HasMember("inputs")) {
      KILN_ASSIGN_OR_RETURN(inputs, to_strings(entry["inputs"], where + ": \"inputs\""));
    }
    for (const std::string& name : inputs) op.inputs.push_back(resolve(name));
    if (entry.HasMember("arg_inputs")) {
      const Value& a = entry["arg_inputs"];
      if (!a.IsObject()) {
        return invalid_argument_error(fmt::format("{}: \"arg_inputs\" must be an object", where));
      }
      for (const auto& m : a.GetObject()) {
        if (!m.value.IsString()) {
          return invalid_argument_error(fmt::format("{}: \"arg_inputs\".\"{}\" must name a tensor",
                                                    where, m.name.GetString()));
        }
        op.arg_inputs.emplace(m.name.GetString(), resolve(m.value.GetString()));
      }
    }
    std::vector<std::string> outputs = schema->outputs;
    if (entry.HasMember("outputs")) {
      KILN_ASSIGN_OR_RETURN(outputs, to_strings(entry["outputs"], where + ": \"outputs\""));
    }
    for (const std::string& name : outputs) {
      std::string unique = name;
      for (int k = 1; used.contains(unique); ++k) unique = fmt::format("{}@{}", name, k);
      used.insert(unique);
      latest[name] = unique;
      op.outputs.push_back(unique);
    }
    spec.ops.push_back(std::move(op));
  }
  std::vector<std::string> outputs{"images", "label"};
  if (root.HasMember("outputs")) {
    KILN_ASSIGN_OR_RETURN(outputs, to_strings(root["outputs"], top + ": \"outputs\""));
  }
  for (const std::string& name : outputs) o.outputs.push_back(resolve(name));
  return spec;
}

}  // namespace

Result<PipelineSpec> parse_pipeline_json(std::string_view text, std::string_view source) {
  rapidjson::Document doc;
  doc.Parse(text.data(), text.size());
  if (doc.HasParseError()) {
    size_t offset = std::min(doc.GetErrorOffset(), text.size());
    size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + offset, '\n'));
    size_t line_start = text.rfind('\n', offset == 0 ? 0 : offset - 1);
    size_t column = offset - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
    return invalid_argument_error(
        fmt::format("pipeline \"{}\": invalid JSON at line {}, column {}: {}", source, line, column,
                    rapidjson::GetParseError_En(doc.GetParseError())));
  }
  if (!doc.IsObject()) {
    return invalid_argument_error(fmt::format(
        "pipeline \"{}\": expected a JSON object with \"pipeline\" (rocAL) or \"operators\" "
        "(kiln), found {}",
        source, json_type_name(doc)));
  }
  if (doc.HasMember("pipeline")) return parse_rocal(doc, source);
  if (doc.HasMember("operators")) return parse_kiln(doc, source);
  return invalid_argument_error(
      fmt::format("pipeline \"{}\": expected the key \"pipeline\" (rocAL's format) or "
                  "\"operators\" (kiln's format)",
                  source));
}

Result<PipelineSpec> load_pipeline_json(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::open(path));
  std::string_view text(reinterpret_cast<const char*>(file->data()), file->size());
  return parse_pipeline_json(text, path);
}

}  // namespace kiln::pipeline
