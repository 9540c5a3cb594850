// SPDX-License-Identifier: Apache-2.0
// Runs ONNX's backend test data (Debian's libonnx-testdata) on a kiln target and checks every
// output against the expected-failures file: a failure outside it, or a pass inside it, fails. An
// f16/bf16 output that misses the data is judged against float64 (f64_judge.h).
#include <CLI/CLI.hpp>
#include <execinfo.h>
#include <fmt/format.h>
#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "compiler/onnx/importer.h"
#include "compiler/onnx/tensor_proto.h"
#include "compiler/targets/target.h"
#include "core/logging.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "tests/onnx_backend/f64_judge.h"

namespace fs = std::filesystem;
using namespace kiln;
using namespace kiln::compiler;
using namespace kiln::onnx_backend;

namespace {

struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-5;
};

struct Outcome {
  bool passed = false;
  std::string reason;  // why it failed
  // Passed against float64: the outputs the judge accepted, with how far data and target are.
  std::vector<std::string> judged;
  std::vector<std::string> report;  // --f64-report: every f16/bf16 output against float64
};

// How the runner uses the float64 judge.
struct JudgeOptions {
  const Target* ref = nullptr;  // the ref target, which computes the float64 reference
  bool decide = false;          // judge an f16/bf16 output that misses the data
  bool report = false;          // measure every f16/bf16 output against float64, passing or not
};

// Whether the judge decides `a`: an f16 or bf16 tensor, or a sequence of them.
bool judged_type(const Argument& a) {
  auto half = [](const Tensor& t) { return t.dtype() == DType::kF16 || t.dtype() == DType::kBF16; };
  if (a.is_tensor()) return half(a.tensor());
  return a.is_sequence() && !a.sequence().empty() &&
         std::all_of(a.sequence().begin(), a.sequence().end(), half);
}

// Whether output `index` of `graph` comes straight from a Cast or CastLike: its rounding is the
// op's meaning, which the float64 reference (where the Cast widens instead) cannot judge.
bool converted_output(const Graph& graph, size_t index) {
  const Node* producer = graph.outputs()[index]->producer();
  return producer != nullptr &&
         (producer->kind() == OpKind::kCast || producer->kind() == OpKind::kCastLike);
}

Argument deep_copy(const Argument& a) {
  if (a.is_tensor()) return Argument(a.tensor().clone());
  if (!a.is_sequence()) return a;
  std::vector<Tensor> elements;
  for (const Tensor& t : a.sequence()) elements.push_back(t.clone());
  return Argument::sequence(std::move(elements));
}

template <class Proto>
Result<Proto> read_proto(const fs::path& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, read_file(path.string()));
  Proto proto;
  if (!proto.ParseFromString(bytes)) {
    return invalid_argument_error(fmt::format("{}: does not parse", path.string()));
  }
  return proto;
}

Result<Argument> read_argument(const fs::path& path, const ValueType& type) {
  const std::string what = path.filename().string();
  switch (type.kind()) {
    case ValueType::Kind::kTensor: {
      KILN_ASSIGN_OR_RETURN(auto proto, read_proto<onnx::TensorProto>(path));
      KILN_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(proto, path.parent_path().string(), what));
      // ONNX 1.12's test data stores bf16 tensors as UINT16 holding the raw bits.
      if (type.tensor().dtype == DType::kBF16 && t.dtype() == DType::kU16) {
        auto bits = std::make_shared<const Tensor>(std::move(t));
        t = Tensor::wrap(DType::kBF16, bits->shape(), bits->raw_data(), bits);
      }
      return Argument(std::move(t));
    }
    case ValueType::Kind::kSequence: {
      KILN_ASSIGN_OR_RETURN(auto proto, read_proto<onnx::SequenceProto>(path));
      std::vector<Tensor> elements;
      for (const auto& t : proto.tensor_values()) {
        KILN_ASSIGN_OR_RETURN(Tensor e, tensor_from_proto(t, "", what));
        elements.push_back(std::move(e));
      }
      return Argument::sequence(std::move(elements));
    }
    case ValueType::Kind::kOptional: {
      KILN_ASSIGN_OR_RETURN(auto proto, read_proto<onnx::OptionalProto>(path));
      if (proto.has_tensor_value()) {
        KILN_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(proto.tensor_value(), "", what));
        return Argument(std::move(t));
      }
      if (proto.has_sequence_value()) {
        std::vector<Tensor> elements;
        for (const auto& t : proto.sequence_value().tensor_values()) {
          KILN_ASSIGN_OR_RETURN(Tensor e, tensor_from_proto(t, "", what));
          elements.push_back(std::move(e));
        }
        return Argument::sequence(std::move(elements));
      }
      return Argument();
    }
  }
  return internal_error("unreachable");
}

// Compares one tensor; returns "" when equal within tolerance, else what differs.
std::string compare_tensor(const Tensor& expected, const Tensor& actual, const Tolerance& tol) {
  if (expected.dtype() != actual.dtype()) {
    return fmt::format("dtype {} expected, got {}", dtype_name(expected.dtype()), dtype_name(actual.dtype()));
  }
  if (!(expected.shape() == actual.shape())) {
    return fmt::format("shape {} expected, got {}", expected.shape().to_string(), actual.shape().to_string());
  }
  std::string diff;
  visit_dtype(expected.dtype(), [&]<class T>() {
    const T* e = expected.data<T>();
    const T* a = actual.data<T>();
    for (int64_t i = 0; i < expected.numel() && diff.empty(); ++i) {
      if constexpr (std::is_same_v<T, std::string>) {
        if (e[i] != a[i]) diff = fmt::format("element {}: \"{}\" expected, got \"{}\"", i, e[i], a[i]);
      } else if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
                           std::is_same_v<T, BFloat16>) {
        double x = static_cast<double>(static_cast<float>(e[i]));
        double y = static_cast<double>(static_cast<float>(a[i]));
        if constexpr (std::is_same_v<T, double>) {
          x = e[i];
          y = a[i];
        }
        if (std::isnan(x) && std::isnan(y)) continue;
        if (std::isinf(x) && x == y) continue;
        if (!(std::abs(x - y) <= tol.atol + tol.rtol * std::abs(x))) {
          diff = fmt::format("element {}: {} expected, got {}", i, x, y);
        }
      } else {
        if (!(e[i] == a[i])) {
          diff = fmt::format("element {}: {} expected, got {}", i, static_cast<int64_t>(e[i]),
                             static_cast<int64_t>(a[i]));
        }
      }
    }
  });
  return diff;
}

std::string compare(const Argument& expected, const Argument& actual, const Tolerance& tol) {
  if (expected.kind() != actual.kind()) {
    return fmt::format("{} expected, got {}", expected.to_string(), actual.to_string());
  }
  if (expected.is_tensor()) return compare_tensor(expected.tensor(), actual.tensor(), tol);
  if (expected.is_sequence()) {
    if (expected.sequence().size() != actual.sequence().size()) {
      return fmt::format("sequence of {} expected, got {}", expected.sequence().size(), actual.sequence().size());
    }
    for (size_t i = 0; i < expected.sequence().size(); ++i) {
      std::string d = compare_tensor(expected.sequence()[i], actual.sequence()[i], tol);
      if (!d.empty()) return fmt::format("sequence element {}: {}", i, d);
    }
  }
  return "";
}

// Random ops cannot match recorded values; their outputs are checked by dtype, shape and range.
bool has_random_op(const Graph& graph, bool* bernoulli) {
  bool any = false;
  for (const auto& node : graph.nodes()) {
    std::string_view n = node->op().name();
    if (n == "Bernoulli") *bernoulli = true;
    any |= n == "Bernoulli" || n == "RandomUniform" || n == "RandomUniformLike" ||
           n == "RandomNormal" || n == "RandomNormalLike" || n == "Multinomial";
  }
  return any;
}

std::string compare_random(const Argument& expected, const Argument& actual, bool bernoulli) {
  if (!expected.is_tensor() || !actual.is_tensor()) return "a tensor output expected";
  const Tensor& e = expected.tensor();
  const Tensor& a = actual.tensor();
  if (e.dtype() != a.dtype()) return fmt::format("dtype {} expected, got {}", dtype_name(e.dtype()), dtype_name(a.dtype()));
  if (!(e.shape() == a.shape())) return fmt::format("shape {} expected, got {}", e.shape().to_string(), a.shape().to_string());
  if (!bernoulli) return "";
  std::string diff;
  visit_dtype(a.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, std::string>) {
      for (int64_t i = 0; i < a.numel() && diff.empty(); ++i) {
        double v = static_cast<double>(static_cast<float>(a.data<T>()[i]));
        if (v != 0.0 && v != 1.0) diff = fmt::format("element {} is {}, not 0 or 1", i, v);
      }
    }
  });
  return diff;
}

// The test each worker thread is running, for the crash report below.
thread_local const char* running_test = nullptr;

// On a crash: the test the crashing thread was running and a backtrace (addresses resolve with
// `addr2line -Cfe onnx_backend_runner`), then the default action. Async-signal-safe calls only.
void report_crash(int sig) {
  const auto say = [](const char* text) { (void)!write(STDERR_FILENO, text, std::strlen(text)); };
  say("onnx_backend: crashed (signal ");
  say(sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : sig == SIGFPE ? "SIGFPE" : "SIGABRT");
  say(") while running ");
  say(running_test != nullptr ? running_test : "no test");
  say("\n");
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

Outcome run_test(const fs::path& dir, const Target& target, const JudgeOptions& judge) {
  auto fail = [](std::string reason) { return Outcome{false, std::move(reason)}; };
  Result<std::unique_ptr<Model>> model = import_onnx_file((dir / "model.onnx").string());
  if (!model.ok()) return fail("import: " + model.status().to_string());
  std::shared_ptr<Graph> graph(std::move((*model)->graph));
  bool bernoulli = false;
  const bool random = has_random_op(*graph, &bernoulli);
  std::vector<ValueType> input_types, output_types;
  for (const Value* v : graph->inputs()) input_types.push_back(v->type());
  for (const Value* v : graph->outputs()) output_types.push_back(v->type());
  std::vector<bool> conversions;
  for (size_t i = 0; i < graph->outputs().size(); ++i) {
    conversions.push_back(converted_output(*graph, i));
  }
  Result<std::shared_ptr<Executable>> exe = compile(graph, target);
  if (!exe.ok()) return fail("compile: " + exe.status().to_string());

  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  }
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return fail("no test_data_set_* folder");
  Outcome outcome{true, "", {}, {}};
  for (const fs::path& set : sets) {
    std::vector<Argument> inputs, expected;
    for (size_t i = 0; i < input_types.size(); ++i) {
      fs::path p = set / fmt::format("input_{}.pb", i);
      if (!fs::exists(p)) return fail(fmt::format("{} is missing", p.string()));
      Result<Argument> a = read_argument(p, input_types[i]);
      if (!a.ok()) return fail(a.status().to_string());
      inputs.push_back(std::move(a).value());
    }
    for (size_t i = 0; i < output_types.size(); ++i) {
      Result<Argument> a = read_argument(set / fmt::format("output_{}.pb", i), output_types[i]);
      if (!a.ok()) return fail(a.status().to_string());
      expected.push_back(std::move(a).value());
    }
    // The float64 reference runs on the same inputs, computed once per set when first needed.
    std::vector<Argument> kept;
    if ((judge.decide || judge.report) && !random) {
      for (const Argument& a : inputs) kept.push_back(deep_copy(a));
    }
    std::optional<Result<std::vector<Argument>>> f64;
    auto reference = [&]() -> const Result<std::vector<Argument>>& {
      if (!f64) f64 = float64_reference((dir / "model.onnx").string(), *judge.ref, std::move(kept));
      return *f64;
    };
    Result<std::vector<Argument>> actual = (*exe)->run(std::move(inputs));
    if (!actual.ok()) return fail("run: " + actual.status().to_string());
    for (size_t i = 0; i < expected.size(); ++i) {
      const std::string output = fmt::format("{}: output {} (\"{}\")", set.filename().string(), i,
                                             graph->outputs()[i]->name());
      std::string d = random ? compare_random(expected[i], (*actual)[i], bernoulli)
                             : compare(expected[i], (*actual)[i], Tolerance{});
      const bool half = !random && judged_type(expected[i]);
      if (half && conversions[i] && judge.decide && !d.empty()) {
        return fail(fmt::format(
            "{}: {}; not judged against float64: a Cast's output, whose rounding is the op itself",
            output, d));
      }
      if (!half || conversions[i] || !(judge.report || (judge.decide && !d.empty()))) {
        if (!d.empty()) return fail(fmt::format("{}: {}", output, d));
        continue;
      }
      const Result<std::vector<Argument>>& ref64 = reference();
      std::string figures;
      std::optional<Judgement> j;
      if (ref64.ok()) {
        j = judge_against_f64(expected[i], (*actual)[i], (*ref64)[i]);
        figures = fmt::format("data off by {:.3g} ulp, target by {:.3g} ulp", j->data_ulps,
                              j->target_ulps);
      }
      if (judge.report) {
        outcome.report.push_back(
            fmt::format("{}: {}", output, ref64.ok() ? figures : ref64.status().message()));
      }
      if (d.empty()) continue;
      if (!judge.decide) return fail(fmt::format("{}: {}", output, d));
      if (!ref64.ok()) return fail(fmt::format("{}: {}; {}", output, d, ref64.status().message()));
      if (!j->passed) return fail(fmt::format("{}: {}; against float64: {}", output, d, j->reason));
      outcome.judged.push_back(fmt::format("{}: {}", output, figures));
    }
  }
  return outcome;
}

// "name reason..." lines; '#' starts a comment line.
Result<std::map<std::string, std::string>> read_expected(const std::string& path) {
  std::map<std::string, std::string> out;
  if (path.empty()) return out;
  std::ifstream in(path);
  if (!in) return not_found_error(fmt::format("cannot read expected-failures file \"{}\"", path));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t space = line.find_first_of(" \t");
    std::string name = line.substr(0, space);
    std::string reason = space == std::string::npos ? "" : line.substr(line.find_first_not_of(" \t", space));
    out[name] = reason;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Runs ONNX's backend test data on a kiln target"};
  std::string data = "/usr/share/libonnx-testdata/data";
  std::string target_name = "ref";
  std::string expected_path;
  std::string filter;
  std::vector<std::string> kinds = {"node", "pytorch-converted", "pytorch-operator", "simple"};
  bool verbose = false;
  bool judge_f64 = true;
  bool f64_report = false;
  int threads = 0;
  app.add_option("--data", data, "the test data root (node/, simple/, ...)");
  app.add_option("--target", target_name, "the kiln target to run");
  app.add_option("--expected", expected_path, "file of expected failures: `test_name reason`");
  app.add_option("--filter", filter, "run only tests whose name matches this regex");
  app.add_option("--kinds", kinds, "which folders to run")->delimiter(',');
  app.add_option("--threads", threads, "tests run in parallel on this many threads (0: all cores)");
  app.add_flag("-v,--verbose", verbose, "print every test's result");
  app.add_flag("--judge-f64,!--no-judge-f64", judge_f64,
               "judge an f16/bf16 output that misses the data against the model's float64 "
               "reference (on by default; such passes are printed and counted apart)");
  app.add_flag("--f64-report", f64_report,
               "print how far the data and the target are from float64 for every f16/bf16 "
               "output, passing or not");
  CLI11_PARSE(app, argc, argv);
  set_log_level(LogLevel::kError);

  if (!fs::is_directory(data)) {
    fmt::print(stderr, "onnx_backend: the test data folder \"{}\" does not exist; install libonnx-testdata\n", data);
    return 2;
  }
  auto expected = read_expected(expected_path);
  if (!expected.ok()) {
    fmt::print(stderr, "onnx_backend: {}\n", expected.status().message());
    return 2;
  }
  auto target = make_target(target_name);
  if (!target.ok()) {
    fmt::print(stderr, "onnx_backend: {}\n", target.status().message());
    return 2;
  }
  auto ref = make_target("ref");
  if (!ref.ok()) {
    fmt::print(stderr, "onnx_backend: {}\n", ref.status().message());
    return 2;
  }
  JudgeOptions judge;
  judge.ref = ref->get();
  judge.decide = judge_f64;
  judge.report = f64_report;
  std::regex filter_re(filter.empty() ? ".*" : filter);

  struct Case {
    std::string kind;
    std::string name;
    fs::path dir;
    Outcome outcome;
  };
  std::vector<Case> cases;
  for (const std::string& kind : kinds) {
    if (!fs::is_directory(fs::path(data) / kind)) {
      fmt::print(stderr, "onnx_backend: \"{}\" has no {}/ folder\n", data, kind);
      return 2;
    }
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(fs::path(data) / kind)) {
      if (e.is_directory() && fs::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
    }
    std::sort(dirs.begin(), dirs.end());
    for (const fs::path& d : dirs) {
      std::string name = d.filename().string();
      if (std::regex_search(name, filter_re)) cases.push_back({kind, name, d, {}});
    }
  }

  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGABRT}) std::signal(sig, report_crash);
  void* warm[1];
  backtrace(warm, 1);  // loads libgcc's unwinder now, not inside the handler
  ThreadPool pool(threads);
  pool.parallel_for(static_cast<int64_t>(cases.size()), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      Case& c = cases[static_cast<size_t>(i)];
      running_test = c.name.c_str();
      c.outcome = run_test(c.dir, **target, judge);
    }
    running_test = nullptr;
  });

  struct Counts {
    int passed = 0, failed = 0, expected_failed = 0, unexpected_failed = 0, unexpected_passed = 0;
    int passed_f64 = 0;  // of `passed`: by the float64 judge
  };
  std::map<std::string, Counts> per_kind;
  std::vector<std::string> problems, judged;
  for (const Case& c : cases) {
    Counts& n = per_kind[c.kind];
    bool listed = expected->count(c.name) > 0;
    for (const std::string& line : c.outcome.report) fmt::print("f64 {} {}\n", c.name, line);
    if (c.outcome.passed) {
      ++n.passed;
      const std::string notes = fmt::format("{}", fmt::join(c.outcome.judged, "; "));
      if (!notes.empty()) {
        ++n.passed_f64;
        judged.push_back(fmt::format("PASSED AGAINST FLOAT64 {}: {}", c.name, notes));
      }
      if (listed) {
        ++n.unexpected_passed;
        problems.push_back(
            fmt::format("UNEXPECTED PASS {}{} (remove it from the expected failures)", c.name,
                        notes.empty() ? "" : " (against float64: " + notes + ")"));
      }
      if (verbose)
        fmt::print("pass {}{}\n", c.name,
                   notes.empty() ? "" : ": passed against float64: " + notes);
    } else {
      ++n.failed;
      if (listed) {
        ++n.expected_failed;
      } else {
        ++n.unexpected_failed;
        problems.push_back(fmt::format("FAIL {}: {}", c.name, c.outcome.reason));
      }
      if (verbose) fmt::print("fail {}: {}\n", c.name, c.outcome.reason);
    }
  }
  for (const std::string& j : judged) fmt::print("{}\n", j);
  for (const std::string& p : problems) fmt::print("{}\n", p);
  int total_pass = 0, total_f64 = 0, total_fail = 0, bad = 0;
  for (const auto& [kind, n] : per_kind) {
    fmt::print(
        "{:<18} {:4} passed ({} against float64), {:4} failed ({} expected, {} unexpected), "
        "{} unexpected passes\n",
        kind + ":", n.passed, n.passed_f64, n.failed, n.expected_failed, n.unexpected_failed,
        n.unexpected_passed);
    total_pass += n.passed;
    total_f64 += n.passed_f64;
    total_fail += n.failed;
    bad += n.unexpected_failed + n.unexpected_passed;
  }
  fmt::print("onnx_backend[{}]: {} passed ({} against float64{}), {} failed, {} not as expected\n",
             target_name, total_pass, total_f64, judge_f64 ? "" : ": judge off", total_fail, bad);
  return bad == 0 ? 0 : 1;
}
