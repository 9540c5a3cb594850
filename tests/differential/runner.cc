// SPDX-License-Identifier: Apache-2.0
// The differential tester's runs: ref against a target under each lowering configuration.
#include "tests/differential/runner.h"

#include <cxxabi.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>
#include <typeinfo>

#include "compiler/artifact/artifact.h"
#include "compiler/ir/printer.h"
#include "compiler/onnx/importer.h"
#include "compiler/quantize/quantize.h"
#include "core/env.h"
#include "core/npy.h"

#ifdef KILN_HAVE_DNNL
#include "compiler/targets/cpu/builder.h"
#include "compiler/targets/cpu/cpu_target.h"
#endif

namespace kiln::differential {

namespace {

using compiler::Argument;
using compiler::Executable;
using compiler::Graph;

// Sets variables for one scope and restores what they were (set or unset) after it.
class ScopedVariables {
 public:
  explicit ScopedVariables(const std::vector<std::pair<std::string, std::string>>& values) {
    for (const auto& [name, value] : values) {
      const char* before = std::getenv(name.c_str());
      saved_.emplace_back(name,
                          before != nullptr ? std::optional<std::string>(before) : std::nullopt);
      setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ~ScopedVariables() {
    for (const auto& [name, before] : saved_) {
      if (before) {
        setenv(name.c_str(), before->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }
  ScopedVariables(const ScopedVariables&) = delete;
  ScopedVariables& operator=(const ScopedVariables&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

bool has_op(const onnx::ModelProto& model, const std::string& op) {
  for (const auto& n : model.graph().node()) {
    if (n.op_type() == op) return true;
  }
  return false;
}

bool has_variable(std::string_view name) {
  for (const EnvFlagInfo& f : env_flags()) {
    if (f.variable == name) return true;
  }
  return false;
}

Config cpu_config(std::string name, bool interpret, const std::string& layout,
                  const std::string& conv1x1, const std::string& winograd,
                  const std::string& stem) {
  return {std::move(name),
          {{"KILN_CPU_INTERPRET", interpret ? "1" : "0"},
           {"KILN_CPU_CONV_LAYOUT", layout},
           {"KILN_CPU_CONV1X1", conv1x1},
           {"KILN_CPU_WINOGRAD", winograd},
           {"KILN_CPU_STEM", stem}}};
}

Result<std::unique_ptr<compiler::Model>> import(const Case& c) {
  const std::string bytes = c.model.SerializeAsString();
  return compiler::import_onnx_bytes(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), {},
      fmt::format("{}-{}.onnx", c.pattern, c.seed));
}

std::vector<Argument> fresh_inputs(const std::vector<Tensor>& values) {
  std::vector<Argument> inputs;
  for (const Tensor& t : values) inputs.emplace_back(t.clone());
  return inputs;
}

std::string demangled(const std::type_info& type) {
  int status = 0;
  char* name = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string s = status == 0 && name != nullptr ? name : type.name();
  std::free(name);
  // The class alone, without its namespaces and template arguments.
  s = s.substr(0, s.find('<'));
  const size_t colon = s.rfind("::");
  return colon == std::string::npos ? s : s.substr(colon + 2);
}

// The steps of a cpu executable's program ("Class:kind"), empty for other executables.
std::vector<std::string> program_steps(const Executable& exe) {
  std::vector<std::string> steps;
#ifdef KILN_HAVE_DNNL
  if (const compiler::cpu::Program* program = compiler::cpu_program(exe)) {
    for (const auto& step : program->steps()) {
      steps.push_back(demangled(typeid(*step)) + ":" + step->kind);
    }
  }
#else
  (void)exe;
#endif
  return steps;
}

// The outputs of the case's two runs (its inputs, then its second inputs) of one executable.
using Runs = std::vector<std::vector<Argument>>;

// Runs `exe` on the case's inputs, then on its second inputs, then (with `concurrent`) on both at
// once from two threads, as a server's callers do: runs 3 and 4 must give runs 1 and 2 again.
Result<Runs> run_twice(const Case& c, const Executable& exe, bool concurrent = false) {
  Runs runs;
  for (const std::vector<Tensor>* inputs : {&c.inputs, &c.second_inputs}) {
    Result<std::vector<Argument>> out = exe.run(fresh_inputs(*inputs));
    if (!out.ok()) {
      return out.status().with_context(fmt::format("run {}", runs.size() + 1));
    }
    runs.push_back(std::move(out).value());
  }
  if (!concurrent) return runs;
  Result<std::vector<Argument>> first = internal_error("not run");
  Result<std::vector<Argument>> second = internal_error("not run");
  std::thread other([&] { second = exe.run(fresh_inputs(c.second_inputs)); });
  first = exe.run(fresh_inputs(c.inputs));
  other.join();
  if (!first.ok()) return first.status().with_context("run 3");
  if (!second.ok()) return second.status().with_context("run 4");
  runs.push_back(std::move(first).value());
  runs.push_back(std::move(second).value());
  return runs;
}

Result<std::shared_ptr<Executable>> compile_case(const Case& c, const compiler::Target& target,
                                                 const compiler::CompileOptions& options,
                                                 bool bf16) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<compiler::Model> model, import(c));
  // The same bf16 graph for ref and the target: ref then specifies it.
  if (bf16) KILN_RETURN_IF_ERROR(compiler::quantize_bf16(*model->graph));
  return compiler::compile(std::shared_ptr<Graph>(std::move(model->graph)), target, options);
}

Result<Runs> compile_and_run(const Case& c, const compiler::Target& target,
                             const compiler::CompileOptions& options, bool bf16) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Executable> exe, compile_case(c, target, options, bf16));
  return run_twice(c, *exe);
}

// A file name of this process's for an artifact.
std::string artifact_path() {
  static int next = 0;
  return (std::filesystem::temp_directory_path() /
          fmt::format("kiln-differential-{}-{}.kiln", getpid(), next++))
      .string();
}

// Loads the artifact at `path` (under the variables in effect) and runs it twice.
Result<Runs> load_and_run(const Case& c, const std::string& path, int threads) {
  KILN_ASSIGN_OR_RETURN(compiler::LoadedArtifact loaded, compiler::load_artifact(path, threads));
  return run_twice(c, *loaded.executable);
}

// Compares the outputs of one run; adds a failure per output that differs.
void compare_run(const std::vector<Argument>& expected, const std::vector<Argument>& got,
                 size_t run, const Case& c, const RunnerOptions& options,
                 const std::vector<std::string>& steps, Failure f, CaseResult& result) {
  static constexpr const char* kRuns[] = {
      "", " (run 2, other inputs)", " (run 3, first inputs, at once with run 4 on another thread)",
      " (run 4, other inputs, at once with run 3 on another thread)"};
  const std::string which = kRuns[std::min<size_t>(run, 3)];
  if (got.size() != expected.size()) {
    f.what = fmt::format("{} outputs, ref gives {}{}", got.size(), expected.size(), which);
    result.failures.push_back(f);
    return;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const Argument& want = expected[i];
    const Argument& have = got[i];
    const std::string name = c.model.graph().output(static_cast<int>(i)).name();
    f.output = name;
    if (!want.is_tensor() || !have.is_tensor()) {
      if (want.to_string() != have.to_string()) {
        f.what = fmt::format("output {} (\"{}\"){}: {} vs ref {}", i, name, which, have.to_string(),
                             want.to_string());
        result.failures.push_back(f);
      }
      continue;
    }
    const Comparison cmp = compare(want.tensor(), have.tensor(), options.tolerance);
    if (cmp.ok) {
      result.worst_ok_ratio = std::max(result.worst_ok_ratio, cmp.worst_ratio);
      continue;
    }
    f.ratio = cmp.worst_ratio;
    if (!cmp.problem.empty()) {
      f.what = fmt::format("output {} (\"{}\"){}: {}", i, name, which, cmp.problem);
    } else {
      f.what = fmt::format(
          "output {} (\"{}\") {}{}: {} of {} elements off; worst {}: ref {:.7g}, got {:.7g}, "
          "|diff| {:.3g} > tolerance {:.3g} (range {:.4g})",
          i, name, want.tensor().shape().to_string(), which, cmp.bad, want.tensor().numel(),
          index_string(want.tensor().shape(), cmp.worst), cmp.ref, cmp.got,
          std::abs(cmp.got - cmp.ref), cmp.tolerance, cmp.range);
    }
    if (!steps.empty()) f.what += fmt::format("\n    program steps: {}", fmt::join(steps, ", "));
    result.failures.push_back(f);
  }
}

}  // namespace

std::string Config::env_string() const {
  std::string s;
  for (const auto& [name, value] : env)
    s += fmt::format("{}{}={}", s.empty() ? "" : " ", name, value);
  return s;
}

std::vector<Config> configs_for(const std::string& target, const onnx::ModelProto& model,
                                bool all_combinations) {
  std::vector<Config> configs;
  if (target == "cpu") {
    configs.push_back(cpu_config("interpret", true, "auto", "auto", "auto", "auto"));
    configs.push_back(cpu_config("auto", false, "auto", "auto", "auto", "auto"));
    if (!has_op(model, "Conv")) return configs;
    if (all_combinations) {
      for (const char* layout : {"any", "blocked16", "auto"}) {
        for (const char* c1 : {"auto", "own", "onednn"}) {
          for (const char* wino : {"auto", "own", "onednn"}) {
            for (const char* stem : {"auto", "onednn"}) {
              if (std::string(layout) == "auto" && std::string(c1) == "auto" &&
                  std::string(wino) == "auto" && std::string(stem) == "auto") {
                continue;  // "auto", above
              }
              configs.push_back(
                  cpu_config(fmt::format("{}/1x1={}/winograd={}/stem={}", layout, c1, wino, stem),
                             false, layout, c1, wino, stem));
            }
          }
        }
      }
      return configs;
    }
    // The layouts, and in the blocked one each own kernel on and off (auto picks between them
    // per convolution; both sides of each pick are run here).
    configs.push_back(cpu_config("any", false, "any", "auto", "auto", "auto"));
    configs.push_back(cpu_config("any/stem=onednn", false, "any", "auto", "auto", "onednn"));
    configs.push_back(cpu_config("blocked16", false, "blocked16", "auto", "auto", "auto"));
    configs.push_back(cpu_config("blocked16/own", false, "blocked16", "own", "own", "auto"));
    configs.push_back(
        cpu_config("blocked16/onednn", false, "blocked16", "onednn", "onednn", "onednn"));
    configs.push_back(cpu_config("blocked16/1x1=own/winograd=onednn/stem=onednn", false,
                                 "blocked16", "own", "onednn", "onednn"));
    configs.push_back(cpu_config("blocked16/1x1=onednn/winograd=own", false, "blocked16", "onednn",
                                 "own", "auto"));
    return configs;
  }
  if (target == "cuda") {
    configs.push_back({"default", {}});
    const std::vector<Config> variants = {
        {"layout=nhwc", {{"KILN_CUDA_LAYOUT", "nhwc"}}},
        {"layout=nchw", {{"KILN_CUDA_LAYOUT", "nchw"}}},
        {"no_graph", {{"KILN_CUDA_NO_GRAPH", "1"}}},
        {"no_nvrtc", {{"KILN_CUDA_NVRTC", "0"}}},
        {"no_attention", {{"KILN_CUDA_ATTENTION", "0"}}},
        {"no_gelu_epilogue", {{"KILN_CUDA_GELU_EPILOGUE", "0"}}},
    };
    for (const Config& v : variants) {
      if (has_variable(v.env[0].first)) configs.push_back(v);
    }
    return configs;
  }
  configs.push_back({"default", {}});
  return configs;
}

Status target_available(const std::string& target) {
  for (const std::string& name : compiler::target_names()) {
    if (name == target) return Status();
  }
  Result<std::unique_ptr<compiler::Target>> made = compiler::make_target(target);
  if (!made.ok()) return made.status();
  return unavailable_error(
      fmt::format("target {}: this machine cannot run it (no device); skipped", target));
}

CaseResult run_case(const Case& c, const RunnerOptions& given) {
  CaseResult result;
  RunnerOptions options = given;
  if (options.bf16) {
    // bf16 keeps 8 bits of mantissa: each op rounds to 1/256 of its value, and ref and the
    // target round at other points (oneDNN accumulates a convolution in f32 and rounds once).
    options.tolerance.range_fraction = std::max(options.tolerance.range_fraction, 0.03);
    options.tolerance.value_fraction = std::max(options.tolerance.value_fraction, 0.03);
  }
  if (const Pattern* p = find_pattern(c.pattern); p != nullptr && p->quantized) {
    options.tolerance.quantum_steps = std::max(options.tolerance.quantum_steps, 3.0);
  }
  Result<std::unique_ptr<compiler::Target>> ref_target = compiler::make_target("ref");
  Result<std::unique_ptr<compiler::Target>> target = compiler::make_target(options.target);
  if (!ref_target.ok() || !target.ok()) {
    result.invalid =
        !ref_target.ok() ? ref_target.status().to_string() : target.status().to_string();
    return result;
  }
  // ref runs the model as imported: the specification, without the passes under test.
  compiler::CompileOptions ref_options;
  ref_options.optimize = false;
  Result<Runs> expected = compile_and_run(c, **ref_target, ref_options, options.bf16);
  if (!expected.ok()) {
    result.invalid = "ref: " + expected.status().to_string();
    return result;
  }
  compiler::CompileOptions options_for_target;
  options_for_target.threads = options.threads;
  const std::vector<Config> configs =
      configs_for(options.target, c.model, options.all_combinations);
  for (size_t i = 0; i < configs.size(); ++i) {
    const Config& config = configs[i];
    ++result.configs;
    std::vector<std::string> steps;
    Result<Runs> got = internal_error("not run");
    const std::string path = artifact_path();
    Status saved = internal_error("not saved");
    {
      ScopedVariables env(config.env);
      Result<std::shared_ptr<Executable>> exe =
          compile_case(c, **target, options_for_target, options.bf16);
      if (exe.ok()) {
        steps = program_steps(**exe);
        got = run_twice(c, **exe, /*concurrent=*/true);
        if (options.artifacts) {
          compiler::ArtifactSource source;
          source.name = fmt::format("{}-{}.onnx", c.pattern, c.seed);
          saved = compiler::save_artifact(path, **exe, options_for_target, source);
        }
      } else {
        got = exe.status();
      }
    }
    if (options.coverage) {
      for (const std::string& s : steps) ++result.steps[s];
    }
    Failure f{config.name, config.env_string(), "", "", "", 0};
    if (!got.ok()) {
      f.what = "error: " + got.status().to_string();
      result.failures.push_back(f);
      continue;
    }
    for (size_t run = 0; run < got->size(); ++run) {
      compare_run((*expected)[run % 2], (*got)[run], run, c, options, steps, f, result);
    }
    if (!options.artifacts) continue;
    // The artifact, loaded under the variables it was compiled with (its packed weights used in
    // place) and under the next configuration's (packed under other choices, or unpacked).
    std::vector<const Config*> loads = {&config, &configs[(i + 1) % configs.size()]};
    if (options.all_loads) {
      loads.clear();
      for (const Config& other : configs) loads.push_back(&other);
    }
    for (const Config* load : loads) {
      Failure a{config.name + " -> artifact loaded under " + load->name,
                config.env_string(),
                load->env_string(),
                "",
                "",
                0};
      Result<Runs> loaded = saved.ok() ? Result<Runs>(internal_error("not loaded")) : saved;
      if (saved.ok()) {
        ScopedVariables env(load->env);
        loaded = load_and_run(c, path, options.threads);
      }
      if (!loaded.ok()) {
        a.what = "error: " + loaded.status().to_string();
        result.failures.push_back(a);
        continue;
      }
      for (size_t run = 0; run < loaded->size(); ++run) {
        compare_run((*expected)[run], (*loaded)[run], run, c, options, {}, a, result);
      }
    }
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  return result;
}

std::string print_case(const Case& c) {
  Result<std::unique_ptr<compiler::Model>> model = import(c);
  if (!model.ok()) return model.status().to_string() + "\n";
  return compiler::print_graph(*(*model)->graph);
}

std::string describe(const Case& c, const Failure& failure, const RunnerOptions& options) {
  const std::string graph = print_case(c);
  std::string flags;
  if (options.threads != 0) flags += fmt::format(" --threads {}", options.threads);
  if (options.bf16) flags += " --bf16";
  std::string env = failure.env.empty() ? "(no variables)" : failure.env;
  if (!failure.load_env.empty()) {
    env = "compiled with " + env + ", its artifact loaded with " + failure.load_env;
  }
  return fmt::format(
      "MISMATCH pattern {} seed {} on {} [{}]\n  {}\n  again: differential_runner --target {} "
      "--pattern {} --seed-begin {} --seed-end {}{} --save-failures /tmp/differential\n  with: "
      "{}\n  the model as imported:\n{}",
      c.pattern, c.seed, options.target, failure.config, failure.what, options.target, c.pattern,
      c.seed, c.seed + 1, flags, env, graph);
}

Status save_case(const Case& c, const Failure* failure, const RunnerOptions& options,
                 const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path folder = fs::path(dir) / fmt::format("{}-{}", c.pattern, c.seed);
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) {
    return invalid_argument_error(
        fmt::format("--save-failures: cannot create {}: {}", folder.string(), ec.message()));
  }
  {
    std::ofstream model(folder / "model.onnx", std::ios::binary);
    if (!c.model.SerializeToOstream(&model)) {
      return invalid_argument_error(
          fmt::format("--save-failures: cannot write {}", (folder / "model.onnx").string()));
    }
  }
  std::string inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const std::string file = c.input_names[i] + ".npy";
    KILN_RETURN_IF_ERROR(write_npy((folder / file).string(), c.inputs[i].view()));
    inputs += fmt::format(" --input {}={}", c.input_names[i], file);
    KILN_RETURN_IF_ERROR(
        write_npy((folder / (c.input_names[i] + ".run2.npy")).string(), c.second_inputs[i].view()));
  }
  const std::string env = failure != nullptr && !failure->env.empty() ? failure->env + " " : "";
  std::string command = fmt::format("{}kiln verify model.onnx --target {}{} --rtol {} --atol 1e-5",
                                    env, options.target, inputs, options.tolerance.value_fraction);
  if (failure != nullptr && !failure->load_env.empty()) {
    // Compiled under one configuration, its artifact loaded under another.
    command = fmt::format(
        "{}kiln compile model.onnx --target {} -o model.kiln\n  {} kiln verify model.kiln{} "
        "--rtol {} --atol 1e-5",
        env, options.target, failure->load_env, inputs, options.tolerance.value_fraction);
  }
  std::ofstream readme(folder / "README");
  readme << fmt::format(
      "differential case: pattern {} seed {}, target {}{}\n{}\n\nReproduce (from this "
      "folder):\n  {}\n"
      "A failure of a later run (\"run 2\" to \"run 4\") needs the runs before it: kiln verify "
      "runs once;\nthe *.run2.npy inputs are run 2's (and run 4's), for a program of your own.\n",
      c.pattern, c.seed, options.target,
      options.bf16
          ? " (its model converted by quantize_bf16 first: differential_runner --bf16 runs it so)"
          : "",
      failure != nullptr ? failure->config + ": " + failure->what : "", command);
  if (!readme) {
    return invalid_argument_error(
        fmt::format("--save-failures: cannot write {}", (folder / "README").string()));
  }
  return Status();
}

}  // namespace kiln::differential
