// SPDX-License-Identifier: Apache-2.0
// `kiln perf`: compile a model, warm up, time runs (median, p90, throughput) and show where the
// time goes, by op kind and by step.
#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include "compiler/artifact/artifact.h"
#include "compiler/runtime/plan.h"
#include "compiler/targets/target.h"
#include "core/gpu.h"
#include "tools/command.h"
#include "tools/compile_model.h"
#include "tools/model_io.h"
#include "tools/quantize_flags.h"
#include "tools/target_option.h"

namespace kiln::tools {

namespace {

using Clock = std::chrono::steady_clock;
using Ms = std::chrono::duration<double, std::milli>;

struct Options {
  std::string model;
  std::string target;  // resolved from `target_option` (an artifact names its own)
  TargetOption target_option;
  int threads = 0;
  int iterations = 20;
  int warmup = 3;
  int top = 15;
  int profile_runs = -1;  // -1: 5, or --iterations where fewer
  bool json = false;
  bool device_io = false;
  // NAME=VALUE: also compile with that environment variable, runs alternating.
  std::string ab;
  bool turns = false;  // timed runs in turns asked for on standard input
  bool cache = false;  // an .onnx model through the compile cache (compile time not measured)
  ModelInputOptions inputs;
  QuantizeFlags quantize;
};

// The inputs uploaded to GPU memory and room for the outputs, for Executable::run_device; checks
// that a device run gives what `host_outputs` (run()'s) holds.
struct DeviceArguments {
  std::vector<std::shared_ptr<void>> memory;
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
  std::vector<size_t> output_bytes;
};

Result<DeviceArguments> upload(const std::vector<compiler::Argument>& inputs,
                               const std::vector<compiler::Argument>& host_outputs) {
  DeviceArguments d;
  for (const compiler::Argument& a : inputs) {
    if (!a.is_tensor()) return invalid_argument_error("--device-io: an input is not a tensor");
    const Tensor& t = a.tensor();
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<void> p, gpu_alloc(t.nbytes()));
    KILN_RETURN_IF_ERROR(gpu_upload(p.get(), t.raw_data(), t.nbytes()));
    d.inputs.push_back(p.get());
    d.memory.push_back(std::move(p));
  }
  for (const compiler::Argument& a : host_outputs) {
    if (!a.is_tensor()) return invalid_argument_error("--device-io: an output is not a tensor");
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<void> p, gpu_alloc(a.tensor().nbytes()));
    d.outputs.push_back(p.get());
    d.output_bytes.push_back(a.tensor().nbytes());
    d.memory.push_back(std::move(p));
  }
  return d;
}

Status check_device_outputs(const DeviceArguments& d,
                            const std::vector<compiler::Argument>& host_outputs) {
  for (size_t i = 0; i < d.outputs.size(); ++i) {
    std::vector<uint8_t> got(d.output_bytes[i]);
    KILN_RETURN_IF_ERROR(gpu_download(got.data(), d.outputs[i], got.size()));
    if (std::memcmp(got.data(), host_outputs[i].tensor().raw_data(), got.size()) != 0) {
      return internal_error(
          fmt::format("--device-io: output {} of the device-resident run differs from run()'s", i));
    }
  }
  return Status();
}

// The q-quantile of sorted values (nearest rank).
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const auto i = static_cast<size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

size_t peak_rss_bytes() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<size_t>(usage.ru_maxrss) * 1024;
}

// The CPU time (user + system, every thread) the process has used so far, in ms.
double process_cpu_ms() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
  return ms(usage.ru_utime) + ms(usage.ru_stime);
}

// One step's median and minimum time over the profiled runs (steps are the same in every run).
// On a busy machine the minimum is the steadier figure: other work only ever adds to a step.
struct StepRow {
  std::string node;
  std::string kind;
  double ms;
  double min_ms;
  std::string runs_on;
};
struct KindRow {
  std::string kind;
  int steps = 0;
  double ms = 0;
  double min_ms = 0;
};

std::vector<StepRow> median_steps(const std::vector<compiler::RunProfile>& profiles) {
  std::vector<StepRow> rows;
  if (profiles.empty()) return rows;
  const size_t n = profiles.front().steps.size();
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> times;
    for (const auto& p : profiles) {
      if (i < p.steps.size()) times.push_back(p.steps[i].ms);
    }
    std::sort(times.begin(), times.end());
    const auto& step = profiles.front().steps[i];
    rows.push_back({step.node, step.kind, quantile(times, 0.5), times.front(), step.runs_on});
  }
  return rows;
}

std::vector<KindRow> by_kind(const std::vector<StepRow>& steps) {
  std::map<std::string, KindRow> kinds;
  for (const StepRow& s : steps) {
    KindRow& k = kinds[s.kind];
    k.kind = s.kind;
    ++k.steps;
    k.ms += s.ms;
    k.min_ms += s.min_ms;
  }
  std::vector<KindRow> rows;
  for (auto& [name, row] : kinds) rows.push_back(row);
  std::sort(rows.begin(), rows.end(),
            [](const KindRow& a, const KindRow& b) { return a.ms > b.ms; });
  return rows;
}

// Where the time of the steps goes: what runs them (StepTime::runs_on), their count and medians
// added up, slowest first.
std::vector<KindRow> by_runs_on(const std::vector<StepRow>& steps) {
  std::map<std::string, KindRow> where;
  for (const StepRow& s : steps) {
    KindRow& w = where[s.runs_on.empty() ? "unknown" : s.runs_on];
    w.kind = s.runs_on.empty() ? "unknown" : s.runs_on;
    ++w.steps;
    w.ms += s.ms;
    w.min_ms += s.min_ms;
  }
  std::vector<KindRow> rows;
  for (auto& [name, row] : where) rows.push_back(row);
  std::sort(rows.begin(), rows.end(),
            [](const KindRow& a, const KindRow& b) { return a.ms > b.ms; });
  return rows;
}

// The kinds of the steps that run on `runs_on`, slowest first, with their time: "Concat 0.012,
// Slice 0.004".
std::string kinds_on(const std::vector<StepRow>& steps, std::string_view runs_on) {
  std::vector<StepRow> on;
  for (const StepRow& s : steps) {
    if (s.runs_on == runs_on) on.push_back(s);
  }
  const std::vector<KindRow> kinds = by_kind(on);
  std::string text;
  for (const KindRow& k : kinds) {
    text += fmt::format("{}{} {:.3f}", text.empty() ? "" : ", ", k.kind, k.ms);
  }
  return text;
}

// A loaded artifact's executable; loaded again (`load_ms` updated) when --threads is given.
Result<std::shared_ptr<compiler::Executable>> load_for_perf(const Options& opts,
                                                            PreparedModel&& prepared) {
  if (opts.threads == 0) return std::move(prepared.executable);
  prepared.executable.reset();
  const auto start = Clock::now();
  KILN_ASSIGN_OR_RETURN(compiler::LoadedArtifact loaded,
                        compiler::load_artifact(opts.model, opts.threads));
  prepared.load_ms = Ms(Clock::now() - start).count();
  return std::move(loaded.executable);
}

// --ab NAME=VALUE: compiles the model a second time with NAME=VALUE set (a KILN_* choice read at
// compile time) and times the two executables alternately, run by run, so that both see the same
// moments of a machine whose speed drifts; prints each one's median and the median of the
// per-pair time ratios (with / without).
Result<std::string> run_ab(const Options& opts, compiler::Executable& as_is,
                           const compiler::Target& target,
                           const std::vector<compiler::Argument>& inputs) {
  const size_t eq = opts.ab.find('=');
  if (eq == std::string::npos || eq == 0) {
    return invalid_argument_error(
        fmt::format("perf: --ab \"{}\" is not NAME=VALUE (e.g. KILN_CPU_CONV1X1=onednn)", opts.ab));
  }
  const std::string name = opts.ab.substr(0, eq);
  const char* old = std::getenv(name.c_str());
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  setenv(name.c_str(), opts.ab.c_str() + eq + 1, 1);
  Result<std::shared_ptr<compiler::Executable>> with = invalid_argument_error("not compiled");
  Result<PreparedModel> prepared = prepare_model(opts.model, opts.inputs);
  if (prepared.ok() && prepared->model) {
    std::shared_ptr<compiler::Graph> graph(std::move(prepared->model->graph));
    Status quantized = apply_quantization(*graph, opts.quantize, target);
    compiler::CompileOptions compile_options;
    compile_options.threads = opts.threads;
    with = quantized.ok() ? compiler::compile(graph, target, compile_options)
                          : Result<std::shared_ptr<compiler::Executable>>(quantized);
  } else if (prepared.ok()) {
    with = invalid_argument_error("perf: --ab compiles an .onnx model, not a .kiln artifact");
  } else {
    with = prepared.status();
  }
  if (saved) {
    setenv(name.c_str(), saved->c_str(), 1);
  } else {
    unsetenv(name.c_str());
  }
  KILN_RETURN_IF_ERROR(with.status());
  for (int i = 0; i < std::max(opts.warmup, 1); ++i) {
    KILN_RETURN_IF_ERROR((*with)->run(inputs).status());
  }
  std::vector<double> a, b, ratio;
  for (int i = 0; i < opts.iterations; ++i) {
    for (int side = 0; side < 2; ++side) {
      compiler::Executable& exe = (side == 0) == (i % 2 == 0) ? as_is : **with;
      const auto start = Clock::now();
      KILN_RETURN_IF_ERROR(exe.run(inputs).status());
      ((&exe == &as_is) ? a : b).push_back(Ms(Clock::now() - start).count());
    }
    ratio.push_back(b.back() / a.back());
  }
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  std::sort(ratio.begin(), ratio.end());
  return fmt::format(
      "--ab {}: median {:.3f} ms as is, {:.3f} ms with it; per-pair ratio (with / as is) median "
      "{:.3f}, p10 {:.3f}, p90 {:.3f} over {} pairs\n",
      opts.ab, quantile(a, 0.5), quantile(b, 0.5), quantile(ratio, 0.5), quantile(ratio, 0.1),
      quantile(ratio, 0.9), ratio.size());
}

// --turns: reads a count of runs per line from standard input and has `turn` time that many (it
// prints their times), until the input ends; at least one turn.
Status run_turns(const std::function<Status(int)>& turn) {
  std::string line;
  int turns = 0;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    char* end = nullptr;
    const long n = std::strtol(line.c_str(), &end, 10);
    if (end == line.c_str() || *end != '\0' || n < 1 || n > 1000000) {
      return invalid_argument_error(fmt::format(
          "perf --turns: \"{}\" on standard input is no count of runs; write a positive number "
          "per line (e.g. 10), and end the input to finish",
          line));
    }
    Status ran = turn(static_cast<int>(n));
    if (!ran.ok()) return ran;
    ++turns;
  }
  if (turns == 0) {
    return invalid_argument_error(
        "perf --turns: standard input ended before the first turn; write a count of runs per "
        "line (e.g. 10)");
  }
  return Status();
}

int run_perf(Options opts) {
  if (opts.iterations < 1 || opts.warmup < 0 || opts.threads < 0) {
    return report_error(invalid_argument_error(
        "perf: --iterations must be at least 1, --warmup and --threads at least 0"));
  }
  auto prepared = prepare_model(opts.model, opts.inputs);
  if (!prepared.ok()) return report_error(prepared.status());
  // An artifact runs on the target it was compiled for: --target may only repeat it.
  if (prepared->executable) {
    if (opts.target_option.was_given() && opts.target_option.given != prepared->artifact.target) {
      return report_error(invalid_argument_error(fmt::format(
          "{} was compiled for target {}; it cannot run on --target {}: drop --target, or "
          "compile the .onnx model for {} with kiln compile",
          opts.model, prepared->artifact.target, opts.target_option.given,
          opts.target_option.given)));
    }
    opts.target = prepared->artifact.target;
  } else {
    auto resolved = resolve_target(opts.target_option);
    if (!resolved.ok()) return report_error(resolved.status());
    opts.target = resolved->name;
  }
  if (opts.inputs.batch > 0) {
    const compiler::Graph& g =
        prepared->executable ? prepared->executable->graph() : *prepared->model->graph;
    for (const compiler::Value* in : g.inputs()) {
      const auto& t = in->tensor_type();
      if (!t.has_rank()) continue;
      // A dynamic batch dim takes any --batch (an artifact compiled without one keeps it).
      const bool other_batch =
          t.rank() < 1 || ((*t.dims)[0].known() && (*t.dims)[0].value != opts.inputs.batch);
      if (other_batch) {
        return report_error(invalid_argument_error(fmt::format(
            "--batch {}: input \"{}\" has the fixed shape {}; export the model with a dynamic "
            "batch dim, or give the shape with --input-shape",
            opts.inputs.batch, in->name(), t.to_string())));
      }
    }
  }
  if (opts.device_io && opts.target != "cuda") {
    return report_error(invalid_argument_error(fmt::format(
        "perf: --device-io keeps arguments in GPU memory; target {} runs on host memory (use "
        "--target cuda, or leave --device-io out)",
        opts.target)));
  }
  auto target = compiler::make_target(opts.target);
  if (!target.ok()) return report_error(target.status());
  compiler::CompileOptions compile_options;
  compile_options.threads = opts.threads;
  std::shared_ptr<compiler::Graph> graph(
      prepared->model && !opts.cache ? std::move(prepared->model->graph) : nullptr);
  if (graph) {
    Status quantized = apply_quantization(*graph, opts.quantize, **target);
    if (!quantized.ok()) return report_error(quantized);
  }
  const auto compile_start = Clock::now();
  // A .kiln artifact was loaded (finalized) by prepare_model: its load time is reported instead.
  // With --cache, a hit reports the cached artifact's load time.
  Result<std::shared_ptr<compiler::Executable>> exe = internal_error("not compiled");
  bool loaded = !graph;
  if (graph) {
    exe = compiler::compile(graph, **target, compile_options);
  } else if (prepared->model) {
    CompileChoice choice;
    choice.target = opts.target;
    choice.options = compile_options;
    if (opts.quantize.any()) {
      choice.rewrite = [q = opts.quantize](compiler::Graph& g, const compiler::Target& t) {
        return apply_quantization(g, q, t);
      };
      choice.rewrite_flags = opts.quantize.as_options();
    }
    choice.data_hash = opts.quantize.data_hash();
    choice.use_cache = !opts.quantize.int8 || choice.data_hash != 0;
    Result<CompiledForRun> compiled = compile_for_run(opts.model, *prepared, choice);
    if (!compiled.ok()) return report_error(compiled.status());
    exe = std::move(compiled->executable);
    loaded = compiled->from_cache;
  } else {
    exe = load_for_perf(opts, std::move(*prepared));
  }
  if (!exe.ok()) return report_error(exe.status());
  const double compile_ms =
      !loaded || prepared->model ? Ms(Clock::now() - compile_start).count() : prepared->load_ms;
  const char* compile_what = loaded ? "load" : "compile";
  const std::string target_name((*exe)->target());  // an artifact's own target
  // What ran it: the GPU's name for the cuda target, "cpu" (the host) for the others.
  std::string device = "cpu";
  if (target_name == "cuda") {
    std::vector<GpuInfo> gpus = list_gpus();
    if (!gpus.empty()) device = gpus.front().name;
  }
  const std::vector<compiler::Argument>& inputs = prepared->inputs;

  double first_ms = 0;
  std::vector<compiler::Argument> host_outputs;
  for (int i = 0; i < std::max(opts.warmup, 1); ++i) {
    const auto start = Clock::now();
    auto out = (*exe)->run(inputs);
    if (!out.ok()) return report_error(out.status());
    if (i == 0) first_ms = Ms(Clock::now() - start).count();
    host_outputs = std::move(out).value();
  }
  // One timed run: through host tensors, or (--device-io) on arguments already in GPU memory.
  std::function<Status()> run_once = [&]() { return (*exe)->run(inputs).status(); };
  DeviceArguments device_args;
  if (opts.device_io) {
    auto uploaded = upload(inputs, host_outputs);
    if (!uploaded.ok()) return report_error(uploaded.status());
    device_args = std::move(uploaded).value();
    Status ran = (*exe)->run_device(device_args.inputs, device_args.outputs);
    if (ran.ok()) ran = check_device_outputs(device_args, host_outputs);
    if (!ran.ok()) return report_error(ran);
    run_once = [&]() { return (*exe)->run_device(device_args.inputs, device_args.outputs); };
  }
  std::vector<double> times;
  const double cpu_start = process_cpu_ms();
  auto time_runs = [&](int n) -> Status {
    for (int i = 0; i < n; ++i) {
      const auto start = Clock::now();
      Status ran = run_once();
      if (!ran.ok()) return ran;
      times.push_back(Ms(Clock::now() - start).count());
    }
    return Status();
  };
  if (opts.turns) {
    // A driver alternating this process with another runtime's asks for each turn's runs.
    Status turned = run_turns([&](int n) {
      const size_t before = times.size();
      const double turn_cpu = process_cpu_ms();
      Status ran = time_runs(n);
      if (ran.ok()) {
        fmt::print("{{\"turn_times_ms\":[{:.4f}],\"cpu_ms_per_run\":{:.4f}}}\n",
                   fmt::join(times.begin() + static_cast<std::ptrdiff_t>(before), times.end(), ","),
                   (process_cpu_ms() - turn_cpu) / n);
        std::fflush(stdout);
      }
      return ran;
    });
    if (!turned.ok()) return report_error(turned);
  } else {
    Status ran = time_runs(opts.iterations);
    if (!ran.ok()) return report_error(ran);
  }
  const int iterations = static_cast<int>(times.size());
  // CPU time per run: the work done, which other load on the machine changes far less than the
  // latency (while idle threads block rather than spin, OMP_WAIT_POLICY=PASSIVE).
  const double cpu_ms_per_run = (process_cpu_ms() - cpu_start) / iterations;
  std::vector<compiler::RunProfile> profiles;
  const int profile_runs = opts.profile_runs >= 0 ? opts.profile_runs : std::min(iterations, 5);
  for (int i = 0; i < profile_runs; ++i) {
    compiler::RunProfile profile;
    auto out = (*exe)->run_profiled(inputs, profile);
    if (!out.ok()) return report_error(out.status());
    profiles.push_back(std::move(profile));
  }
  std::string ab_line;
  if (!opts.ab.empty()) {
    if (opts.json || opts.device_io || opts.turns) {
      return report_error(invalid_argument_error(
          "perf: --ab prints a table; leave out --json, --device-io and --turns"));
    }
    Result<std::string> ab = run_ab(opts, **exe, **target, inputs);
    if (!ab.ok()) return report_error(ab.status());
    ab_line = std::move(ab).value();
  }
  const std::vector<double> in_order = times;
  std::sort(times.begin(), times.end());
  const double median = quantile(times, 0.5);
  const double p90 = quantile(times, 0.9);
  // The samples a run takes: --batch, else the first dim of the first input when it has more
  // than one (an artifact compiled with --batch 256 runs 256 samples a run).
  int64_t batch = opts.inputs.batch > 0 ? opts.inputs.batch : 1;
  if (opts.inputs.batch <= 0 && !inputs.empty() && inputs[0].is_tensor() &&
      inputs[0].tensor().shape().rank() >= 2) {
    batch = inputs[0].tensor().shape()[0];
  }
  const double throughput = median > 0 ? 1000.0 * static_cast<double>(batch) / median : 0.0;
  const std::vector<StepRow> steps = median_steps(profiles);
  const std::vector<KindRow> kinds = by_kind(steps);
  double step_total = 0;
  double step_min_total = 0;
  for (const StepRow& s : steps) {
    step_total += s.ms;
    step_min_total += s.min_ms;
  }
  const std::vector<KindRow> where = by_runs_on(steps);
  // Why no step was timed: a graph the target cannot plan runs on its interpreter.
  const std::string interpreted = profile_runs > 0 && steps.empty()
                                      ? compiler::runtime::why_not_plannable((*exe)->graph())
                                      : std::string();

  if (opts.json) {
    std::string kinds_json;
    for (const KindRow& k : kinds) {
      kinds_json +=
          fmt::format("{}{{\"kind\":\"{}\",\"steps\":{},\"ms\":{:.4f},\"min_ms\":{:.4f}}}",
                      kinds_json.empty() ? "" : ",", json_escape(k.kind), k.steps, k.ms, k.min_ms);
    }
    std::string steps_json;
    for (const StepRow& s : steps) {
      steps_json += fmt::format(
          "{}{{\"node\":\"{}\",\"kind\":\"{}\",\"ms\":{:.4f},\"min_ms\":{:.4f},"
          "\"runs_on\":\"{}\"}}",
          steps_json.empty() ? "" : ",", json_escape(s.node), json_escape(s.kind), s.ms, s.min_ms,
          json_escape(s.runs_on));
    }
    std::string where_json;
    for (const KindRow& w : where) {
      where_json += fmt::format(
          "{}{{\"runs_on\":\"{}\",\"steps\":{},\"ms\":{:.4f},\"min_ms\":{:.4f},"
          "\"kinds\":\"{}\"}}",
          where_json.empty() ? "" : ",", json_escape(w.kind), w.steps, w.ms, w.min_ms,
          json_escape(kinds_on(steps, w.kind)));
    }
    fmt::print(
        "{{\"runtime\":\"kiln\",\"model\":\"{}\",\"target\":\"{}\",\"device\":\"{}\","
        "\"batch\":{},\"device_io\":{},\"threads\":{},\"iterations\":{},\"warmup\":{},"
        "\"{}_ms\":{:.3f},"
        "\"first_run_ms\":{:.3f},"
        "\"median_ms\":{:.4f},\"p90_ms\":{:.4f},\"min_ms\":{:.4f},\"throughput_per_s\":{:.3f},"
        "\"cpu_ms_per_run\":{:.4f},"
        "\"times_ms\":[{:.4f}],\"peak_rss_bytes\":{},\"kinds\":[{}],\"steps\":[{}],"
        "\"step_ms\":{:.4f},\"where\":[{}],\"interpreted\":\"{}\"}}\n",
        json_escape(opts.model), json_escape(target_name), json_escape(device), batch,
        opts.device_io ? "true" : "false", opts.threads, iterations, opts.warmup, compile_what,
        compile_ms, first_ms, median, p90, times.front(), throughput, cpu_ms_per_run,
        fmt::join(in_order, ","), peak_rss_bytes(), kinds_json, steps_json, step_total, where_json,
        json_escape(interpreted));
    return 0;
  }
  fmt::print("{} on {} ({}): batch {}, threads {}, {} runs after {} warm-up{}\n", opts.model,
             target_name, device, batch,
             opts.threads == 0 ? std::string("default") : std::to_string(opts.threads), iterations,
             opts.warmup, opts.device_io ? ", inputs and outputs in GPU memory" : "");
  fmt::print("{} {:.1f} ms, first run {:.2f} ms\n", compile_what, compile_ms, first_ms);
  fmt::print("latency median {:.3f} ms, p90 {:.3f} ms, min {:.3f} ms; throughput {:.1f}/s\n",
             median, p90, times.front(), throughput);
  fmt::print("cpu time {:.3f} ms per run (all threads)\n", cpu_ms_per_run);
  fmt::print("peak RSS {:.1f} MiB\n", static_cast<double>(peak_rss_bytes()) / (1 << 20));
  fmt::print("{}", ab_line);
  if (profile_runs == 0) return 0;
  if (steps.empty()) {
    if (!interpreted.empty()) {
      fmt::print("(no steps to time: the interpreter runs the graph, as {})\n", interpreted);
    } else {
      fmt::print("(the {} target does not time its steps)\n", target_name);
    }
    return 0;
  }
  // The steps' medians leave out what runs between them (setting up, handing over, allocating
  // outputs): the latency's remainder, spread over the steps.
  fmt::print(
      "\nwhere the time goes ({} steps add up to {:.3f} ms of the {:.3f} ms median; the "
      "other {:.3f} ms, {:.1f} us a step, is between steps)\n",
      steps.size(), step_total, median, std::max(0.0, median - step_total),
      1000.0 * std::max(0.0, median - step_total) / static_cast<double>(steps.size()));
  fmt::print("{:<10} {:>6} {:>10} {:>6}  {}\n", "runs on", "steps", "ms", "%", "kinds (ms)");
  for (const KindRow& w : where) {
    fmt::print("{:<10} {:>6} {:>10.3f} {:>6.1f}  {}\n", w.kind, w.steps, w.ms,
               step_total > 0 ? 100.0 * w.ms / step_total : 0.0, kinds_on(steps, w.kind));
  }
  fmt::print(
      "\ntime by kind (median and minimum of {} profiled runs; steps add up to {:.3f} ms, their "
      "minimums to {:.3f} ms)\n",
      profiles.size(), step_total, step_min_total);
  fmt::print("{:<32} {:>6} {:>10} {:>6} {:>10}\n", "kind", "steps", "ms", "%", "min ms");
  for (const KindRow& k : kinds) {
    fmt::print("{:<32} {:>6} {:>10.3f} {:>6.1f} {:>10.3f}\n", k.kind, k.steps, k.ms,
               step_total > 0 ? 100.0 * k.ms / step_total : 0.0, k.min_ms);
  }
  std::vector<StepRow> slowest = steps;
  std::stable_sort(slowest.begin(), slowest.end(),
                   [](const StepRow& a, const StepRow& b) { return a.ms > b.ms; });
  if (static_cast<int>(slowest.size()) > opts.top) slowest.resize(static_cast<size_t>(opts.top));
  fmt::print("\nslowest {} steps (by median)\n{:>10} {:>10} {:<24} {}\n", slowest.size(), "ms",
             "min ms", "kind", "node");
  for (const StepRow& s : slowest) {
    fmt::print("{:>10.3f} {:>10.3f} {:<24} {}\n", s.ms, s.min_ms, s.kind, s.node);
  }
  return 0;
}

}  // namespace

CommandAction add_perf_command(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "perf", "Time a compiled model: median/p90 latency, throughput, time per op kind and step");
  cmd->add_option("model", opts->model, "the .onnx model")->required();
  add_target_option(cmd, &opts->target_option,
                    "the target to compile for (an artifact runs on its own; --target may only "
                    "repeat it)");
  cmd->add_option("--batch", opts->inputs.batch,
                  "size of every dynamic input dim (the batch) not given by --input-shape");
  cmd->add_option("--threads", opts->threads, "intra-op threads; 0: the physical cores")
      ->capture_default_str();
  cmd->add_option("--iterations", opts->iterations, "timed runs")->capture_default_str();
  cmd->add_option("--warmup", opts->warmup, "untimed runs first")->capture_default_str();
  cmd->add_option("--top", opts->top, "rows of the slowest-steps table")->capture_default_str();
  cmd->add_option("--profile-runs", opts->profile_runs,
                  "runs timed step by step after the timed runs, for the per-kind and per-step "
                  "tables (median and minimum; default 5, or --iterations where fewer); 0 skips "
                  "them")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--input", opts->inputs.inputs, "NAME=FILE.npy; inputs not given are random");
  cmd->add_option("--input-shape", opts->inputs.input_shapes,
                  "NAME=1x3x224x224 for a dynamic input");
  cmd->add_flag("--json", opts->json, "print one line of JSON instead of the tables");
  cmd->add_flag("--device-io", opts->device_io,
                "cuda: time runs on inputs and outputs already in GPU memory (run_device), as "
                "frameworks are timed; the default copies host tensors in and out");
  cmd->add_option("--ab", opts->ab,
                  "NAME=VALUE: also compile with this environment variable set (e.g. "
                  "KILN_CPU_CONV1X1=onednn) and time both alternately, run by run: each one's "
                  "median and the median per-pair ratio, steady on a machine whose speed drifts");
  cmd->add_flag("--turns", opts->turns,
                "time runs in turns instead of --iterations: read a count per line from standard "
                "input, run that many and print their times as a line of JSON, until the input "
                "ends (then the usual report over all of them); for a driver alternating kiln "
                "with another runtime (bench/cpu_vs_ort)");
  add_quantize_flags(cmd, &opts->quantize, true);
  cmd->add_flag("--cache", opts->cache,
                "compile an .onnx model through the compile cache: a cached compile is loaded "
                "(and reported as load), a new one is cached (not with --ab)");
  return [opts] { return run_perf(*opts); };
}

}  // namespace kiln::tools
