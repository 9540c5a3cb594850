// SPDX-License-Identifier: Apache-2.0
// config.toml parsing with toml++ (built without exceptions) and the checks across its keys.
#include "server/core/model_config.h"

// toml++ header-only and without exceptions (kiln code does not throw); only this file includes it.
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <set>

#include "core/mapped_file.h"

namespace kiln::server {

namespace {

std::string where(std::string_view source, const toml::node& node) {
  const toml::source_region& r = node.source();
  return fmt::format("{}:{}", source, r.begin.line);
}

Status unknown_key(std::string_view source, std::string_view table, std::string_view key,
                   const toml::node& node, std::string_view allowed) {
  return invalid_argument_error(fmt::format("{}: unknown key \"{}{}\"; the keys here are: {}",
                                            where(source, node), table, key, allowed));
}

Result<int64_t> get_int(std::string_view source, std::string_view key, const toml::node& node,
                        int64_t min_value) {
  // Asked only of an integer: toml++ converts a float it is asked for as an integer with a cast
  // that is undefined past int64's range (1e23).
  std::optional<int64_t> v = node.is_integer() ? node.value<int64_t>() : std::nullopt;
  if (!v) {
    return invalid_argument_error(
        fmt::format("{}: \"{}\" must be an integer", where(source, node), key));
  }
  if (*v < min_value) {
    return invalid_argument_error(fmt::format("{}: \"{}\" must be at least {}, got {}",
                                              where(source, node), key, min_value, *v));
  }
  return *v;
}

Result<std::string> get_string(std::string_view source, std::string_view key,
                               const toml::node& node) {
  if (!node.is_string()) {
    return invalid_argument_error(
        fmt::format("{}: \"{}\" must be a string", where(source, node), key));
  }
  return std::string(*node.value<std::string_view>());
}

Result<std::vector<int64_t>> get_int_array(std::string_view source, std::string_view key,
                                           const toml::node& node, int64_t min_value) {
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    return invalid_argument_error(
        fmt::format("{}: \"{}\" must be an array of integers", where(source, node), key));
  }
  std::vector<int64_t> out;
  for (const toml::node& element : *array) {
    KILN_ASSIGN_OR_RETURN(int64_t v, get_int(source, key, element, min_value));
    out.push_back(v);
  }
  return out;
}

Result<std::vector<TensorMetadata>> get_tensors(std::string_view source, std::string_view key,
                                                const toml::node& node) {
  const toml::array* array = node.as_array();
  if (array == nullptr || !array->is_array_of_tables()) {
    return invalid_argument_error(fmt::format("{}: \"{}\" must be an array of tables ([[{}]])",
                                              where(source, node), key, key));
  }
  std::vector<TensorMetadata> out;
  for (const toml::node& element : *array) {
    TensorMetadata t;
    bool has_name = false, has_type = false;
    for (const auto& [k, v] : *element.as_table()) {
      if (k == "name") {
        KILN_ASSIGN_OR_RETURN(t.name, get_string(source, "name", v));
        has_name = true;
      } else if (k == "datatype") {
        KILN_ASSIGN_OR_RETURN(std::string name, get_string(source, "datatype", v));
        std::optional<DType> d = parse_wire_dtype(name);
        if (!d) {
          return invalid_argument_error(
              fmt::format("{}: datatype \"{}\" is not a KServe datatype (FP32, INT64, UINT8, "
                          "BYTES, ...)",
                          where(source, v), name));
        }
        t.dtype = *d;
        has_type = true;
      } else if (k == "shape") {
        KILN_ASSIGN_OR_RETURN(t.shape, get_int_array(source, "shape", v, -1));
      } else {
        return unknown_key(source, fmt::format("{}.", key), k.str(), v, "name, datatype, shape");
      }
    }
    if (!has_name || !has_type) {
      return invalid_argument_error(
          fmt::format("{}: every [[{}]] needs a name and a datatype", where(source, element), key));
    }
    out.push_back(std::move(t));
  }
  return out;
}

Status parse_batching(std::string_view source, const toml::table& table, BatchingConfig& b) {
  for (const auto& [k, v] : table) {
    if (k == "preferred_batch_size") {
      KILN_ASSIGN_OR_RETURN(b.preferred_batch_size,
                            get_int_array(source, "preferred_batch_size", v, 1));
    } else if (k == "max_queue_delay_microseconds") {
      KILN_ASSIGN_OR_RETURN(b.max_queue_delay_microseconds, get_int(source, k.str(), v, 0));
    } else if (k == "max_queue_size") {
      KILN_ASSIGN_OR_RETURN(b.max_queue_size, get_int(source, k.str(), v, 0));
    } else if (k == "default_timeout_microseconds") {
      KILN_ASSIGN_OR_RETURN(b.default_timeout_microseconds, get_int(source, k.str(), v, 0));
    } else {
      return unknown_key(source, "dynamic_batching.", k.str(), v,
                         "preferred_batch_size, max_queue_delay_microseconds, max_queue_size, "
                         "default_timeout_microseconds");
    }
  }
  return Status();
}

Status parse_parameters(std::string_view source, const toml::table& table, Parameters& p) {
  for (const auto& [k, v] : table) {
    if (v.is_boolean()) {
      p.set(std::string(k.str()), *v.value<bool>());
    } else if (v.is_integer()) {
      p.set(std::string(k.str()), *v.value<int64_t>());
    } else if (v.is_floating_point()) {
      p.set(std::string(k.str()), *v.value<double>());
    } else if (v.is_string()) {
      p.set(std::string(k.str()), std::string(*v.value<std::string_view>()));
    } else {
      return invalid_argument_error(fmt::format(
          "{}: parameter \"{}\" must be a bool, number or string", where(source, v), k.str()));
    }
  }
  return Status();
}

Result<std::vector<std::pair<std::string, std::string>>> get_tensor_map(std::string_view source,
                                                                        std::string_view key,
                                                                        const toml::node& node) {
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    return invalid_argument_error(
        fmt::format("{}: \"steps.{}\" must be a table of model tensor = \"chain tensor\"",
                    where(source, node), key));
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [k, v] : *table) {
    KILN_ASSIGN_OR_RETURN(std::string value, get_string(source, k.str(), v));
    out.emplace_back(std::string(k.str()), std::move(value));
  }
  return out;
}

// [[steps]]: model, version, [steps.input_map], [steps.output_map].
Result<std::vector<ChainStep>> get_steps(std::string_view source, const toml::node& node) {
  const toml::array* array = node.as_array();
  if (array == nullptr || !array->is_array_of_tables()) {
    return invalid_argument_error(
        fmt::format("{}: \"steps\" must be an array of tables ([[steps]])", where(source, node)));
  }
  std::vector<ChainStep> out;
  for (const toml::node& element : *array) {
    ChainStep step;
    for (const auto& [k, v] : *element.as_table()) {
      if (k == "model") {
        KILN_ASSIGN_OR_RETURN(step.model, get_string(source, "model", v));
      } else if (k == "version") {
        if (v.is_integer()) {
          KILN_ASSIGN_OR_RETURN(int64_t version, get_int(source, "version", v, 0));
          step.version = std::to_string(version);
        } else {
          KILN_ASSIGN_OR_RETURN(step.version, get_string(source, "version", v));
        }
      } else if (k == "input_map") {
        KILN_ASSIGN_OR_RETURN(step.input_map, get_tensor_map(source, "input_map", v));
      } else if (k == "output_map") {
        KILN_ASSIGN_OR_RETURN(step.output_map, get_tensor_map(source, "output_map", v));
      } else {
        return unknown_key(source, "steps.", k.str(), v, "model, version, input_map, output_map");
      }
    }
    if (step.model.empty()) {
      return invalid_argument_error(
          fmt::format("{}: every [[steps]] needs a model", where(source, element)));
    }
    out.push_back(std::move(step));
  }
  return out;
}

// Appends the \u / \U escape of the UTF-8 character at t[i] and steps over it; false when the
// bytes there are not UTF-8.
bool append_escape(std::string_view t, size_t& i, std::string& out) {
  const unsigned char b = static_cast<unsigned char>(t[i]);
  const size_t n = b >= 0xC2 && b <= 0xDF   ? 2
                   : b >= 0xE0 && b <= 0xEF ? 3
                   : b >= 0xF0 && b <= 0xF4 ? 4
                                            : 0;
  if (n == 0 || i + n > t.size()) return false;
  uint32_t cp = b & (0xFFu >> (n + 1));
  for (size_t k = 1; k < n; ++k) {
    const unsigned char next = static_cast<unsigned char>(t[i + k]);
    if ((next & 0xC0) != 0x80) return false;
    cp = cp << 6 | (next & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF)) {
    return false;
  }
  out += cp > 0xFFFF ? fmt::format("\\U{:08X}", cp) : fmt::format("\\u{:04X}", cp);
  i += n;
  return true;
}

// `t` as the same TOML in ASCII alone: the non-ASCII characters of strings written as escapes (a
// literal string becomes a basic one), those of comments dropped. toml++ 3.3 (Debian's) must
// never see one: asking whether some of them (U+00A1 to U+0499, U+2D0E to U+3107, U+FC26 to
// U+FEFE) are whitespace, it reaches __builtin_unreachable, in valid text and in its error paths
// (found by fuzz_model_config: `x = [1, \u0322]`, `me = 422"(\ufef2`). Anywhere else, after a
// backslash, or not UTF-8, such a character is an error naming its line.
Result<std::string> ascii_toml(std::string_view t, std::string_view source) {
  std::string out;
  int64_t line = 1;
  const auto fail = [&] {
    return invalid_argument_error(
        fmt::format("{}:{}: a non-ASCII character outside a string or comment, after a "
                    "backslash, or not UTF-8; TOML allows none of these",
                    source, line));
  };
  const auto ascii = [](char c) { return static_cast<unsigned char>(c) <= 0x7F; };
  size_t i = 0;
  while (i < t.size()) {
    const char c = t[i];
    if (c == '#') {
      for (; i < t.size() && t[i] != '\n'; ++i) {
        if (ascii(t[i])) out += t[i];
      }
    } else if (c == '"' || c == '\'') {
      const std::string_view quotes = c == '"' ? R"(""")" : "'''";
      const bool multi = t.substr(i, 3) == quotes;
      const std::string_view end = multi ? quotes : quotes.substr(0, 1);
      i += end.size();
      std::string body;
      bool closed = false;
      while (i < t.size()) {
        const char b = t[i];
        if (c == '"' && b == '\\') {  // an escape or a line-ending backslash: ASCII either way
          size_t j = i + 1;
          while (j < t.size() && (t[j] == ' ' || t[j] == '\t')) ++j;
          if (j < t.size() && !ascii(t[j])) return fail();
          const size_t n = j > i + 1 ? j - i : std::min<size_t>(2, t.size() - i);
          const std::string_view part = t.substr(i, n);
          line += std::count(part.begin(), part.end(), '\n');
          body += part;
          i += n;
        } else if (b == '\n' && !multi) {
          break;  // unterminated: toml++ says so
        } else if (t.substr(i, end.size()) == end) {
          i += end.size();
          for (int extra = 0; multi && extra < 2 && i < t.size() && t[i] == c; ++extra, ++i) {
            body += c;  // up to two quotes before the closing three belong to the string
          }
          closed = true;
          break;
        } else if (!ascii(b)) {
          if (!append_escape(t, i, body)) return fail();
        } else {
          if (c == '\'' && (b == '\\' || b == '"')) body += '\\';  // literal to basic
          line += b == '\n';
          body += b;
          ++i;
        }
      }
      const std::string_view quote = multi ? R"(""")" : R"(")";
      out += quote;
      out += body;
      if (closed) out += quote;
    } else if (!ascii(c)) {
      return fail();
    } else {
      line += c == '\n';
      out += c;
      ++i;
    }
  }
  return out;
}

constexpr std::string_view kTopKeys =
    "name, backend, platform, instances, gpus, version_policy, max_batch_size, "
    "[dynamic_batching], "
    "[parameters], [[inputs]], [[outputs]], [[steps]]";

}  // namespace

Result<ModelConfig> parse_model_config(std::string_view text, std::string_view source) {
  std::string ascii_text;
  if (std::any_of(text.begin(), text.end(), [](char c) { return (c & 0x80) != 0; })) {
    KILN_ASSIGN_OR_RETURN(ascii_text, ascii_toml(text, source));
    text = ascii_text;
  }
  toml::parse_result parsed = toml::parse(text, source);
  if (!parsed) {
    const toml::parse_error& e = parsed.error();
    return invalid_argument_error(fmt::format("{}:{}:{}: {}", source, e.source().begin.line,
                                              e.source().begin.column, e.description()));
  }
  const toml::table& root = parsed.table();
  ModelConfig c;
  for (const auto& [k, v] : root) {
    if (k == "name") {
      KILN_ASSIGN_OR_RETURN(c.name, get_string(source, "name", v));
    } else if (k == "backend") {
      KILN_ASSIGN_OR_RETURN(c.backend, get_string(source, "backend", v));
    } else if (k == "platform") {
      KILN_ASSIGN_OR_RETURN(c.platform, get_string(source, "platform", v));
    } else if (k == "instances") {
      KILN_ASSIGN_OR_RETURN(c.instances, get_int(source, "instances", v, 1));
    } else if (k == "gpus") {
      KILN_ASSIGN_OR_RETURN(c.gpus, get_int_array(source, "gpus", v, 0));
    } else if (k == "version_policy") {
      KILN_ASSIGN_OR_RETURN(c.version_policy, get_string(source, "version_policy", v));
    } else if (k == "max_batch_size") {
      KILN_ASSIGN_OR_RETURN(c.batching.max_batch_size, get_int(source, "max_batch_size", v, 0));
    } else if (k == "dynamic_batching") {
      if (!v.is_table()) {
        return invalid_argument_error(
            fmt::format("{}: \"dynamic_batching\" must be a table", where(source, v)));
      }
      KILN_RETURN_IF_ERROR(parse_batching(source, *v.as_table(), c.batching));
    } else if (k == "parameters") {
      if (!v.is_table()) {
        return invalid_argument_error(
            fmt::format("{}: \"parameters\" must be a table", where(source, v)));
      }
      KILN_RETURN_IF_ERROR(parse_parameters(source, *v.as_table(), c.parameters));
    } else if (k == "inputs") {
      KILN_ASSIGN_OR_RETURN(c.inputs, get_tensors(source, "inputs", v));
    } else if (k == "outputs") {
      KILN_ASSIGN_OR_RETURN(c.outputs, get_tensors(source, "outputs", v));
    } else if (k == "steps") {
      KILN_ASSIGN_OR_RETURN(c.steps, get_steps(source, v));
    } else {
      return unknown_key(source, "", k.str(), v, kTopKeys);
    }
  }
  KILN_RETURN_IF_ERROR(validate_model_config(c, source));
  return c;
}

Status validate_model_config(ModelConfig& c, std::string_view source) {
  if (c.backend.empty()) {
    if (c.platform == "onnx_onnxv1" || c.platform == "migraphx_mxr" || c.platform == "kiln") {
      c.backend = "compiler";
    } else if (c.platform == "rocal_json" || c.platform == "kiln_pipeline") {
      c.backend = "pipeline";
    } else if (c.platform == "ensemble") {
      c.backend = "chain";
    } else if (c.platform.empty()) {
      return invalid_argument_error(
          fmt::format("{}: no backend; set backend = \"echo\", \"compiler\", \"pipeline\" or "
                      "\"chain\" (or platform = \"onnx_onnxv1\")",
                      source));
    } else {
      return invalid_argument_error(
          fmt::format("{}: platform \"{}\" is not served by kiln; use onnx_onnxv1, migraphx_mxr, "
                      "kiln, rocal_json, kiln_pipeline or ensemble, or set backend",
                      source, c.platform));
    }
  }
  if ((c.backend == "chain") != !c.steps.empty()) {
    return invalid_argument_error(
        c.steps.empty()
            ? fmt::format("{}: a chain needs [[steps]] (model, input_map, output_map)", source)
            : fmt::format("{}: [[steps]] belong to backend \"chain\", not \"{}\"", source,
                          c.backend));
  }
  if (c.version_policy != "latest" && c.version_policy != "all") {
    return invalid_argument_error(fmt::format(
        "{}: version_policy must be \"latest\" or \"all\", got \"{}\"", source, c.version_policy));
  }
  const BatchingConfig& b = c.batching;
  for (int64_t p : b.preferred_batch_size) {
    if (b.max_batch_size == 0 || p > b.max_batch_size) {
      return invalid_argument_error(fmt::format(
          "{}: preferred_batch_size {} exceeds max_batch_size {}", source, p, b.max_batch_size));
    }
  }
  std::set<int64_t> gpus;
  for (int64_t g : c.gpus) {
    if (!gpus.insert(g).second) {
      return invalid_argument_error(
          fmt::format("{}: gpus lists GPU {} twice; list each GPU once and set instances to the "
                      "threads per GPU",
                      source, g));
    }
  }
  std::set<std::string> names;
  for (const TensorMetadata& t : c.inputs) {
    if (!names.insert(t.name).second) {
      return invalid_argument_error(
          fmt::format("{}: input \"{}\" is declared twice", source, t.name));
    }
  }
  return Status();
}

int64_t instance_threads(const ModelConfig& config) {
  return std::max<int64_t>(1, config.instances) *
         std::max<int64_t>(1, static_cast<int64_t>(config.gpus.size()));
}

Result<ModelConfig> read_model_config(const std::filesystem::path& model_dir) {
  std::filesystem::path file = model_dir / "config.toml";
  std::filesystem::path pbtxt = model_dir / "config.pbtxt";
  std::string name = model_dir.filename().string();
  std::error_code ec;
  const bool toml = std::filesystem::exists(file, ec);
  if (!toml && !std::filesystem::exists(pbtxt, ec)) {
    return not_found_error(
        fmt::format("model \"{}\": {} is missing; every model folder needs a "
                    "config.toml or a Triton config.pbtxt (see docs/server.md)",
                    name, file.string()));
  }
  if (!toml) file = pbtxt;
  KILN_ASSIGN_OR_RETURN(std::string text, read_file(file.string()));
  KILN_ASSIGN_OR_RETURN(ModelConfig c, toml ? parse_model_config(text, file.string())
                                            : parse_model_config_pbtxt(text, file.string()));
  if (c.name.empty()) c.name = name;
  if (c.name != name) {
    return invalid_argument_error(
        fmt::format("{}: name \"{}\" differs from the folder name \"{}\"; they must match",
                    file.string(), c.name, name));
  }
  return c;
}

}  // namespace kiln::server
