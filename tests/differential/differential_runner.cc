// SPDX-License-Identifier: Apache-2.0
// differential_runner: random models of every pattern a target specializes, run on ref and on the
// target under each of its lowering configurations; counts per pattern, non-zero exit on any
// mismatch.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <map>

#include "core/logging.h"
#include "tests/differential/case.h"
#include "tests/differential/runner.h"

namespace {

using kiln::differential::Case;
using kiln::differential::CaseResult;
using kiln::differential::Pattern;
using kiln::differential::RunnerOptions;

struct Counts {
  int cases = 0;
  int passed = 0;
  int failed = 0;
  int invalid = 0;
  int configs = 0;
  double worst_ok = 0;
  double seconds = 0;
  std::string first_invalid;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Runs random models of each pattern a target specializes on ref and on the target under "
      "every lowering configuration (docs/differential.md)"};
  RunnerOptions options;
  uint64_t seed_begin = 0;
  uint64_t seed_end = 10;
  std::vector<std::string> names;
  std::string save_dir;
  int print_limit = 3;
  bool list = false;
  bool verbose = false;
  app.add_option("--target", options.target, "the target to check against ref: cpu or cuda")
      ->capture_default_str();
  app.add_option("--seed-begin", seed_begin, "first seed (each seed is one case per pattern)")
      ->capture_default_str();
  app.add_option("--seed-end", seed_end, "one past the last seed")->capture_default_str();
  app.add_option("--pattern", names, "run only these patterns (repeat or comma-separate)")
      ->delimiter(',');
  app.add_option("--save-failures", save_dir,
                 "write each failing case here as model.onnx, inputs (.npy) and the kiln verify "
                 "command");
  app.add_flag("--all-combinations", options.all_combinations,
               "every combination of the target's lowering variables, not the chosen few");
  app.add_option("--threads", options.threads, "intra-op threads of each run (0: the cores)")
      ->capture_default_str();
  app.add_option("--tolerance", options.tolerance.range_fraction,
                 "allowed error as a fraction of each output's range (and of each value)")
      ->capture_default_str();
  app.add_option("--print", print_limit, "describe at most this many failures per pattern")
      ->capture_default_str();
  app.add_flag("--coverage", options.coverage, "count the cpu program steps the cases ran");
  app.add_flag("--all-loads", options.all_loads,
               "load each artifact under every configuration, not only its own and the next");
  app.add_flag("--bf16", options.bf16,
               "convert each model with quantize_bf16 first (ref runs the same bf16 model)");
  bool no_artifacts = false;
  app.add_flag("--no-artifacts", no_artifacts,
               "do not also save each executable as an artifact and run it loaded");
  app.add_flag("--list", list, "list the patterns and what each covers");
  app.add_flag("-v,--verbose", verbose,
               "print every case (its model before it runs) and its result");
  CLI11_PARSE(app, argc, argv);
  options.tolerance.value_fraction = options.tolerance.range_fraction;
  options.artifacts = !no_artifacts;
  kiln::set_log_level(kiln::LogLevel::kError);

  if (list) {
    for (const Pattern& p : kiln::differential::patterns()) {
      fmt::print("{:<16} {}\n", p.name, p.covers);
    }
    return 0;
  }
  std::vector<const Pattern*> chosen;
  for (const std::string& name : names) {
    const Pattern* p = kiln::differential::find_pattern(name);
    if (p == nullptr) {
      std::string known;
      for (const Pattern& q : kiln::differential::patterns()) {
        known += (known.empty() ? "" : ", ") + std::string(q.name);
      }
      fmt::print(stderr, "differential: unknown pattern \"{}\"; the patterns are: {}\n", name,
                 known);
      return 2;
    }
    chosen.push_back(p);
  }
  if (chosen.empty()) {
    for (const Pattern& p : kiln::differential::patterns()) chosen.push_back(&p);
  }
  if (seed_end < seed_begin) {
    fmt::print(stderr, "differential: --seed-end {} is before --seed-begin {}\n", seed_end,
               seed_begin);
    return 2;
  }
  if (kiln::Status available = kiln::differential::target_available(options.target);
      !available.ok()) {
    if (available.code() == kiln::StatusCode::kNotFound) {
      fmt::print(stderr, "differential: {}\n", available.message());
      return 2;
    }
    fmt::print("differential: skipped: {}\n", available.message());
    return 0;
  }

  fmt::print(
      "differential: target {}, seeds [{}, {}), {} patterns, tolerance {:g} of the range{}\n",
      options.target, seed_begin, seed_end, chosen.size(), options.tolerance.range_fraction,
      options.bf16 ? " (0.03 for the bf16 models)" : "");
  std::map<std::string, int> steps;
  std::vector<Counts> counts(chosen.size());
  for (size_t p = 0; p < chosen.size(); ++p) {
    Counts& n = counts[p];
    const auto start = std::chrono::steady_clock::now();
    for (uint64_t seed = seed_begin; seed < seed_end; ++seed) {
      const Case c = kiln::differential::make_case(*chosen[p], seed);
      if (verbose) {
        // Before it runs, so that a crash still names the case (and shows it).
        fmt::print("{} seed {}:\n{}", c.pattern, seed, kiln::differential::print_case(c));
        std::fflush(stdout);
      }
      const CaseResult r = kiln::differential::run_case(c, options);
      ++n.cases;
      n.configs += r.configs;
      for (const auto& [step, count] : r.steps) steps[step] += count;
      if (!r.invalid.empty()) {
        ++n.invalid;
        if (n.first_invalid.empty()) n.first_invalid = fmt::format("seed {}: {}", seed, r.invalid);
        if (verbose) fmt::print("{} seed {}: invalid: {}\n", c.pattern, seed, r.invalid);
        continue;
      }
      if (r.failures.empty()) {
        ++n.passed;
        n.worst_ok = std::max(n.worst_ok, r.worst_ok_ratio);
        if (verbose) fmt::print("{} seed {}: ok ({} configurations)\n", c.pattern, seed, r.configs);
        continue;
      }
      ++n.failed;
      if (n.failed <= print_limit) {
        for (const auto& f : r.failures) {
          fmt::print("{}\n", kiln::differential::describe(c, f, options));
          break;  // the first is described in full; the others by their line below
        }
      }
      for (const auto& f : r.failures) {
        fmt::print("FAIL {} seed {} [{}] {}\n", c.pattern, seed, f.config,
                   f.what.substr(0, f.what.find('\n')));
      }
      if (!save_dir.empty()) {
        if (kiln::Status s =
                kiln::differential::save_case(c, &r.failures.front(), options, save_dir);
            !s.ok()) {
          fmt::print(stderr, "differential: {}\n", s.message());
          return 2;
        }
      }
    }
    n.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  fmt::print("\n{:<16} {:>6} {:>7} {:>7} {:>8} {:>8} {:>9} {:>8}\n", "pattern", "cases", "passed",
             "failed", "invalid", "configs", "worst ok", "seconds");
  Counts total;
  for (size_t p = 0; p < chosen.size(); ++p) {
    const Counts& n = counts[p];
    fmt::print("{:<16} {:>6} {:>7} {:>7} {:>8} {:>8} {:>9.3f} {:>8.1f}\n", chosen[p]->name, n.cases,
               n.passed, n.failed, n.invalid, n.configs, n.worst_ok, n.seconds);
    total.cases += n.cases;
    total.passed += n.passed;
    total.failed += n.failed;
    total.invalid += n.invalid;
    total.configs += n.configs;
    total.worst_ok = std::max(total.worst_ok, n.worst_ok);
    total.seconds += n.seconds;
  }
  fmt::print("{:<16} {:>6} {:>7} {:>7} {:>8} {:>8} {:>9.3f} {:>8.1f}\n", "total", total.cases,
             total.passed, total.failed, total.invalid, total.configs, total.worst_ok,
             total.seconds);
  for (size_t p = 0; p < chosen.size(); ++p) {
    if (!counts[p].first_invalid.empty()) {
      fmt::print("note: {} cases of {} were not run (ref rejects the model); first: {}\n",
                 counts[p].invalid, chosen[p]->name, counts[p].first_invalid);
    }
  }
  if (options.coverage) {
    fmt::print("\ncpu program steps run (class:kind, times):\n");
    for (const auto& [step, count] : steps) fmt::print("  {:<60} {}\n", step, count);
  }
  fmt::print("{}\n", total.failed == 0
                         ? "differential: all cases agree with ref"
                         : fmt::format("differential: {} cases differ from ref", total.failed));
  return total.failed == 0 ? 0 : 1;
}
