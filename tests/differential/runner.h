// SPDX-License-Identifier: Apache-2.0
// Runs differential cases: ref (the specification) against a target under every choice of its
// KILN_* lowering variables, comparing every output.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "compiler/targets/target.h"
#include "core/status.h"
#include "tests/differential/case.h"
#include "tests/differential/compare.h"

namespace kiln::differential {

// One way of compiling for the target: the values of its lowering variables.
//
// The cpu target reads KILN_CPU_* when it compiles (choose_conv_layout, kernel_choice() and the
// stem's choice in ProgramBuilder::build, KILN_CPU_INTERPRET in finalize) and never while it runs,
// and it reads them afresh each time (core/env.h does not cache). So each choice runs in this
// process: the variables are set around compile() and restored after it, and the executable keeps
// the lowering it was built with. One process is also what lets the tester compile thousands of
// cases in minutes.
struct Config {
  std::string name;
  std::vector<std::pair<std::string, std::string>> env;
  // "KILN_CPU_CONV_LAYOUT=blocked16 KILN_CPU_CONV1X1=own ...": what to prefix a command with.
  std::string env_string() const;
};

// The configurations that matter for a model on `target`: for cpu, the interpreter, the planned
// program with every variable at auto, and the layouts and own-kernel choices (only where the
// model has a Conv: nothing else reads them); every combination with `all_combinations`. For
// cuda, the layouts and the switches that run steps another way. Other targets: their defaults.
std::vector<Config> configs_for(const std::string& target, const onnx::ModelProto& model,
                                bool all_combinations);

struct RunnerOptions {
  std::string target = "cpu";
  bool all_combinations = false;
  int threads = 0;  // CompileOptions::threads
  Tolerance tolerance;
  bool coverage = false;  // record which cpu steps ran (CaseResult::steps)
  // Also save each executable as an artifact and run it loaded, under its own configuration and
  // under the next one (with `all_loads`, under every configuration).
  bool artifacts = true;
  bool all_loads = false;
  // Convert each model with quantize_bf16 first (for ref and the target alike): the bf16 paths.
  bool bf16 = false;
};

// One way a configuration went wrong.
struct Failure {
  std::string config;
  std::string env;  // the variables it was compiled with
  // For an executable run from its artifact: the variables it was loaded with (else empty).
  std::string load_env;
  std::string what;  // a compile or run error, or the output that differs and its worst element
  std::string output;
  double ratio = 0;  // worst error / tolerance
};

struct CaseResult {
  // The case cannot be run by ref (its model is outside what kiln imports or ref runs): skipped,
  // with the reason.
  std::string invalid;
  std::vector<Failure> failures;
  double worst_ok_ratio = 0;  // the largest error / tolerance among passing outputs
  int configs = 0;
  // With RunnerOptions::coverage: "StepClass:kind" of every cpu program step run.
  std::map<std::string, int> steps;
};

// Runs one case on ref and on the target under each configuration. Errors only for problems of
// the tester itself; a target's compile or run errors are failures of the case.
CaseResult run_case(const Case& c, const RunnerOptions& options);

// A description of a failure that reproduces it: pattern, seed, configuration, the command that
// runs it again, the worst element and the graph as imported.
std::string describe(const Case& c, const Failure& failure, const RunnerOptions& options);

// The case's model as kiln imports it (printed IR), or why it does not import.
std::string print_case(const Case& c);

// Writes the case under `dir`/<pattern>-<seed>/: model.onnx, one .npy per input, and README with
// the `kiln verify` command (and variables) that reproduces the failure.
Status save_case(const Case& c, const Failure* failure, const RunnerOptions& options,
                 const std::string& dir);

// Whether `target` can run here: cpu where oneDNN was built in, cuda where a GPU is present;
// otherwise the reason it cannot.
Status target_available(const std::string& target);

}  // namespace kiln::differential
