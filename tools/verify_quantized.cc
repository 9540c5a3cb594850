// SPDX-License-Identifier: Apache-2.0
// Comparing a quantized model with its fp32 original.
#include "tools/verify_quantized.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "compiler/onnx/importer.h"
#include "core/progress.h"
#include "tools/command.h"
#include "tools/model_io.h"

namespace kiln::tools {

namespace {

// Agreement of one output over every batch.
struct OutputStats {
  std::string name;
  double dot = 0, norm_ref = 0, norm_q = 0;
  double max_abs = 0;
  double max_ref = 0;  // max |fp32|, for the relative error
  int64_t rows = 0, agree = 0;
  int64_t labeled = 0, correct_ref = 0, correct_q = 0;

  double cosine() const {
    if (norm_ref == 0 && norm_q == 0) return 1.0;
    if (norm_ref == 0 || norm_q == 0) return 0.0;
    return dot / std::sqrt(norm_ref * norm_q);
  }
  double max_rel() const { return max_ref > 0 ? max_abs / max_ref : max_abs; }
  double top1() const { return rows > 0 ? 100.0 * static_cast<double>(agree) / rows : 100.0; }
  double accuracy(int64_t correct) const {
    return labeled > 0 ? 100.0 * static_cast<double>(correct) / labeled : 0.0;
  }
};

std::vector<double> as_doubles(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  visit_dtype(t.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, std::string>) {
      const T* p = t.data<T>();
      for (size_t i = 0; i < out.size(); ++i)
        out[i] = static_cast<double>(static_cast<float>(p[i]));
    }
  });
  return out;
}

int64_t argmax(const double* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

Status accumulate(OutputStats& s, const Tensor& ref, const Tensor& q,
                  const std::vector<int64_t>* labels, const std::string& source) {
  if (!(ref.shape() == q.shape())) {
    return internal_error(fmt::format("output \"{}\": fp32 gives {}, the quantized model {} ({})",
                                      s.name, ref.shape().to_string(), q.shape().to_string(),
                                      source));
  }
  const std::vector<double> a = as_doubles(ref);
  const std::vector<double> b = as_doubles(q);
  for (size_t i = 0; i < a.size(); ++i) {
    s.dot += a[i] * b[i];
    s.norm_ref += a[i] * a[i];
    s.norm_q += b[i] * b[i];
    s.max_abs = std::max(s.max_abs, std::abs(a[i] - b[i]));
    s.max_ref = std::max(s.max_ref, std::abs(a[i]));
  }
  const int64_t width = ref.rank() >= 1 ? ref.shape()[ref.rank() - 1] : 1;
  if (width < 2 || a.empty()) return Status();
  const int64_t rows = static_cast<int64_t>(a.size()) / width;
  if (labels != nullptr && !labels->empty() && static_cast<int64_t>(labels->size()) != rows) {
    return invalid_argument_error(fmt::format("\"{}\": {} labels for {} rows of output \"{}\"",
                                              source, labels->size(), rows, s.name));
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t x = argmax(a.data() + r * width, width);
    const int64_t y = argmax(b.data() + r * width, width);
    ++s.rows;
    s.agree += x == y ? 1 : 0;
    if (labels != nullptr && !labels->empty()) {
      const int64_t label = (*labels)[static_cast<size_t>(r)];
      ++s.labeled;
      s.correct_ref += x == label ? 1 : 0;
      s.correct_q += y == label ? 1 : 0;
    }
  }
  return Status();
}

// The model compiled for `target`, quantized when `quantized` (its int8 report into `report`,
// reusing `observed` ranges when given).
Result<std::shared_ptr<compiler::Executable>> build(
    const VerifyQuantizedOptions& o, bool quantized, const compiler::Target& target,
    compiler::Int8Report* report = nullptr,
    std::shared_ptr<const compiler::ObservedRanges> observed = nullptr) {
  compiler::ImportOptions import;
  KILN_ASSIGN_OR_RETURN(import.input_shapes, parse_input_shapes(o.input_shapes));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<compiler::Model> model,
                        compiler::import_onnx_file(o.model, import));
  std::shared_ptr<compiler::Graph> graph(std::move(model->graph));
  if (quantized) {
    KILN_RETURN_IF_ERROR(
        apply_quantization(*graph, o.quantize, target, report, std::move(observed)));
  }
  return compiler::compile(std::move(graph), target);
}

// The inputs of `batch` in the graph's input order.
Result<std::vector<compiler::Argument>> batch_args(const compiler::Graph& graph,
                                                   const InputBatch& batch) {
  std::vector<compiler::Argument> args;
  for (const compiler::Value* in : graph.inputs()) {
    auto found = batch.tensors.find(in->name());
    if (found == batch.tensors.end()) {
      return not_found_error(fmt::format("\"{}\" has no input \"{}\"", batch.source, in->name()));
    }
    args.emplace_back(found->second);
  }
  return args;
}

// One layer kept in float: the first output's agreement with fp32 then.
struct LayerStats {
  std::string layer;
  OutputStats stats;
};

// `given` plus NAME=AxBxC for each graph input of unknown dims that `given` does not name and
// whose tensors in `batches` all have that one shape.
std::vector<std::string> open_input_shapes(const std::vector<std::string>& given,
                                           const compiler::Graph& graph,
                                           const std::vector<InputBatch>& batches) {
  std::vector<std::string> shapes = given;
  for (const compiler::Value* in : graph.inputs()) {
    const bool named = std::any_of(given.begin(), given.end(), [&](const std::string& s) {
      return s.starts_with(in->name() + "=");
    });
    if (named || !in->type().is_tensor() || in->tensor_type().is_static()) continue;
    std::optional<Shape> shape;
    for (const InputBatch& batch : batches) {
      auto found = batch.tensors.find(in->name());
      if (found == batch.tensors.end() || (shape && *shape != found->second.shape())) {
        shape.reset();
        break;
      }
      shape = found->second.shape();
    }
    if (shape) shapes.push_back(fmt::format("{}={}", in->name(), fmt::join(shape->dims(), "x")));
  }
  return shapes;
}

std::string json_number(double v) {
  return std::isfinite(v) ? fmt::format("{:.6g}", v) : "null";
}

}  // namespace

int verify_quantized(const VerifyQuantizedOptions& o) {
  if (o.inputs.empty()) {
    return report_error(invalid_argument_error(
        "verify --fp16/--bf16/--int8 compares over a folder of inputs: pass --inputs DIR (.npy "
        "files, or images with --pipeline P.json)"));
  }
  auto target = compiler::make_target(o.target);
  if (!target.ok()) return report_error(target.status());
  auto fp32 = build(o, false, **target);
  if (!fp32.ok()) return report_error(fp32.status());
  auto batches = load_input_folder(o.inputs, o.pipeline, (*fp32)->graph());
  if (!batches.ok()) return report_error(batches.status());
  // Dims --input-shape leaves open take the batches' sizes when they all agree (int8 calibrates
  // on batches of its own, which may differ): a program of unknown shapes cannot be planned for
  // a device and would run off it, on the host.
  VerifyQuantizedOptions fixed = o;
  if (!o.quantize.int8) {
    fixed.input_shapes = open_input_shapes(o.input_shapes, (*fp32)->graph(), *batches);
  }
  if (fixed.input_shapes.size() != o.input_shapes.size()) {
    fp32 = build(fixed, false, **target);
    if (!fp32.ok()) return report_error(fp32.status());
  }
  compiler::Int8Report int8_report;
  auto quantized = build(fixed, true, **target, &int8_report);
  if (!quantized.ok()) return report_error(quantized.status());
  if (!o.labels.empty()) {
    Status s = attach_labels(o.labels, *batches);
    if (!s.ok()) return report_error(s);
  }
  std::vector<OutputStats> stats;
  for (const compiler::Value* v : (*fp32)->graph().outputs()) stats.push_back({.name = v->name()});
  std::vector<std::vector<compiler::Argument>> references;  // fp32's outputs, per batch
  for (const InputBatch& batch : *batches) {
    auto args = batch_args((*fp32)->graph(), batch);
    if (!args.ok()) return report_error(args.status());
    auto want = (*fp32)->run(*args);
    if (!want.ok()) return report_error(want.status());
    auto got = (*quantized)->run(std::move(args).value());
    if (!got.ok()) return report_error(got.status());
    for (size_t i = 0; i < stats.size(); ++i) {
      if (!(*want)[i].is_tensor()) continue;
      Status s = accumulate(stats[i], (*want)[i].tensor(), (*got)[i].tensor(),
                            i == 0 ? &batch.labels : nullptr, batch.source);
      if (!s.ok()) return report_error(s);
    }
    if (o.per_layer) references.push_back(std::move(want).value());
  }
  // --per-layer: each int8 layer kept in float alone, calibrated as above.
  std::vector<LayerStats> layers;
  if (o.per_layer && !stats.empty()) {
    ProgressBar bar("per layer");
    const auto& names = int8_report.quantized_names;
    for (size_t l = 0; l < names.size(); ++l) {
      VerifyQuantizedOptions one = fixed;
      one.quantize.exclude.push_back(names[l]);
      auto kept = build(one, true, **target, nullptr, int8_report.observed);
      if (!kept.ok()) return report_error(kept.status());
      LayerStats layer{names[l], {.name = stats[0].name}};
      for (size_t b = 0; b < batches->size(); ++b) {
        auto args = batch_args((*kept)->graph(), (*batches)[b]);
        if (!args.ok()) return report_error(args.status());
        auto got = (*kept)->run(std::move(args).value());
        if (!got.ok()) return report_error(got.status());
        if (!references[b][0].is_tensor()) continue;
        Status s = accumulate(layer.stats, references[b][0].tensor(), (*got)[0].tensor(),
                              &(*batches)[b].labels, (*batches)[b].source);
        if (!s.ok()) return report_error(s);
      }
      layers.push_back(std::move(layer));
      bar.update(static_cast<int64_t>(l + 1), static_cast<int64_t>(names.size()));
    }
    // The costliest first: the layer whose float form brings the output closest to fp32.
    std::stable_sort(layers.begin(), layers.end(), [](const LayerStats& a, const LayerStats& b) {
      return a.stats.cosine() > b.stats.cosine();
    });
  }
  const std::string precision = o.quantize.describe();
  bool pass = true;
  for (const OutputStats& s : stats) {
    if (s.rows > 0) pass &= s.top1() >= o.min_top1;
    pass &= s.cosine() >= o.min_cosine;
  }
  if (o.json) {
    std::string outputs;
    for (const OutputStats& s : stats) {
      outputs += fmt::format(
          "{}{{\"name\": \"{}\", \"cosine\": {}, \"max_abs_err\": {}, \"max_rel_err\": {}, "
          "\"rows\": {}, \"top1_agreement\": {}, \"labeled\": {}, \"accuracy_fp32\": {}, "
          "\"accuracy_quantized\": {}}}",
          outputs.empty() ? "" : ", ", json_escape(s.name), json_number(s.cosine()),
          json_number(s.max_abs), json_number(s.max_rel()), s.rows, json_number(s.top1()),
          s.labeled, s.labeled > 0 ? json_number(s.accuracy(s.correct_ref)) : "null",
          s.labeled > 0 ? json_number(s.accuracy(s.correct_q)) : "null");
    }
    std::string per_layer;
    for (const LayerStats& l : layers) {
      per_layer += fmt::format(
          "{}{{\"layer\": \"{}\", \"cosine\": {}, \"max_abs_err\": {}, \"top1_agreement\": {}}}",
          per_layer.empty() ? "" : ", ", json_escape(l.layer), json_number(l.stats.cosine()),
          json_number(l.stats.max_abs), l.stats.rows > 0 ? json_number(l.stats.top1()) : "null");
    }
    fmt::print(
        "{{\"model\": \"{}\", \"target\": \"{}\", \"precision\": \"{}\", \"batches\": {}, "
        "\"outputs\": [{}], \"pass\": {}{}}}\n",
        json_escape(o.model), o.target, json_escape(precision), batches->size(), outputs,
        pass ? "true" : "false",
        o.per_layer ? fmt::format(", \"per_layer\": [{}]", per_layer) : std::string());
  } else {
    fmt::print("{} vs fp32 on target {}, {} input batches from {}\n", precision, o.target,
               batches->size(), o.inputs);
    fmt::print("{:<20} {:>10} {:>12} {:>12} {:>22} {:>10} {:>10}\n", "output", "cosine",
               "max abs err", "max rel err", "top-1 agreement", "fp32 acc", "quant acc");
    for (const OutputStats& s : stats) {
      const std::string agree =
          s.rows > 0 ? fmt::format("{:.2f}% ({}/{})", s.top1(), s.agree, s.rows) : "-";
      const auto acc = [&](int64_t c) {
        return s.labeled > 0 ? fmt::format("{:.2f}%", s.accuracy(c)) : std::string("-");
      };
      fmt::print("{:<20} {:>10.6f} {:>12.4g} {:>12.4g} {:>22} {:>10} {:>10}\n", s.name, s.cosine(),
                 s.max_abs, s.max_rel(), agree, acc(s.correct_ref), acc(s.correct_q));
    }
    fmt::print("{}\n", pass ? "within the given limits" : "BELOW the given limits");
    if (!layers.empty()) {
      const OutputStats& all = stats[0];
      fmt::print(
          "\nper layer: output \"{}\" with one layer kept in float (all int8: cosine {:.6f}, max "
          "abs err {:.4g}), the costliest first\n",
          all.name, all.cosine(), all.max_abs);
      fmt::print("{:<40} {:>10} {:>12} {:>12} {:>16}\n", "layer kept in float", "cosine",
                 "of the loss", "max abs err", "top-1 agreement");
      const double loss = 1.0 - all.cosine();
      for (const LayerStats& l : layers) {
        // The share of the int8 model's cosine loss that keeping this layer in float removes.
        const double share = loss > 0 ? (l.stats.cosine() - all.cosine()) / loss : 0.0;
        fmt::print("{:<40} {:>10.6f} {:>11.1f}% {:>12.4g} {:>16}\n", l.layer, l.stats.cosine(),
                   100.0 * share, l.stats.max_abs,
                   l.stats.rows > 0 ? fmt::format("{:.2f}%", l.stats.top1()) : std::string("-"));
      }
    }
  }
  return pass ? 0 : 1;
}

}  // namespace kiln::tools
