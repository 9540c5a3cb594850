// SPDX-License-Identifier: Apache-2.0
// The `kiln` command-line tool: installs the spdlog and progress sinks, takes the global options
// (--log-level, --version) and dispatches to a subcommand.
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <utility>
#include <vector>

#include "core/env.h"
#include "core/logging.h"
#include "core/progress.h"
#include "tools/command.h"
#include "tools/version_info.h"

namespace {

void install_log_sink() {
  auto logger = spdlog::stderr_color_mt("kiln");
  logger->set_pattern("kiln %^%l%$: %v");
  logger->set_level(spdlog::level::trace);  // kiln's own level filters first
  kiln::set_log_sink([logger](kiln::LogLevel level, std::string_view message) {
    constexpr spdlog::level::level_enum kLevels[] = {spdlog::level::trace, spdlog::level::debug,
                                                     spdlog::level::info,  spdlog::level::warn,
                                                     spdlog::level::err,   spdlog::level::off};
    logger->log(kLevels[static_cast<int>(level)], "{}", message);
  });
}

// --log-level's names: KILN_LOG_LEVEL's, with "warn" as the short form of "warning".
constexpr const char* kLogLevels = "trace, debug, info, warn (or warning), error, off";

}  // namespace

namespace kiln::tools {
int report_error(const Status& status) {
  fmt::print(stderr, "kiln: {}\n", status.message());
  return 1;
}
}  // namespace kiln::tools

int main(int argc, char** argv) {
  install_log_sink();
  kiln::set_progress_sink(kiln::terminal_progress_sink());  // libraries report, the CLI draws
  CLI::App app{"kiln: compiles neural networks, prepares their inputs and serves them"};
  // The global options may come before or after the subcommand's name (`kiln --log-level debug
  // run m.onnx` and `kiln run m.onnx --log-level debug`): subcommands hand options they do not
  // know to their parent. Set before the subcommands are added, which inherit it.
  app.fallthrough();
  app.require_subcommand(0, 1);
  std::string log_level;
  bool version = false;
  bool version_json = false;
  app.add_option("--log-level", log_level,
                 fmt::format("log verbosity, over KILN_LOG_LEVEL: {}", kLogLevels))
      ->check(CLI::Validator([](const std::string& name) { return kiln::log_level_problem(name); },
                             "LEVEL", "log level"));
  app.add_flag("--version", version, "print the version and the facts of this build, then exit");
  CLI::Option* json_option =
      app.add_flag("--json", version_json, "with --version: print them as one JSON object");

  std::vector<std::pair<CLI::App*, kiln::tools::CommandAction>> commands;
  auto add = [&](auto adder) {
    kiln::tools::CommandAction action = adder(app);
    commands.emplace_back(app.get_subcommands({}).back(), std::move(action));
  };
  add(kiln::tools::add_run_command);
  add(kiln::tools::add_verify_command);
  add(kiln::tools::add_compile_command);
  add(kiln::tools::add_perf_command);
  add(kiln::tools::add_print_command);
  add(kiln::tools::add_ops_command);
  add(kiln::tools::add_pipeline_command);
  add(kiln::tools::add_devices_command);
  add(kiln::tools::add_env_command);
  add(kiln::tools::add_serve_command);
  add(kiln::tools::add_loadgen_command);

  CLI11_PARSE(app, argc, argv);
  if (!log_level.empty()) {
    kiln::set_log_level(kiln::parse_log_level(log_level, kiln::LogLevel::kWarning));
  } else if (const std::string env = kiln::env_flag_string(kiln::EnvFlag::kLogLevel);
             !kiln::log_level_problem(env).empty()) {
    // As KILN_TARGET: a variable set to what it does not take is an error, not a quiet default.
    fmt::print(stderr, "kiln: KILN_LOG_LEVEL={}: {} (or unset it)\n", env,
               kiln::log_level_problem(env));
    return 1;
  }
  if (version) {
    const kiln::tools::BuildFacts facts = kiln::tools::build_facts();
    fmt::print("{}",
               version_json ? kiln::tools::version_json(facts) : kiln::tools::version_text(facts));
    return 0;
  }
  for (auto& [sub, action] : commands) {
    if (!sub->parsed()) continue;
    // A subcommand with --json of its own takes it after its name; this one reached the top.
    if (json_option->count() > 0) {
      CLI::App* leaf = sub;  // the innermost subcommand given: `pipeline run`
      std::string name = sub->get_name();
      while (!leaf->get_subcommands().empty()) {
        leaf = leaf->get_subcommands().front();
        name += " " + leaf->get_name();
      }
      return kiln::tools::report_error(kiln::invalid_argument_error(
          leaf->get_option_no_throw("--json") != nullptr
              ? fmt::format("--json goes after the subcommand: kiln {} ... --json", name)
              : fmt::format("--json: kiln {} has no JSON output (--json goes with --version, or "
                            "after run, verify, compile, perf, print, ops, pipeline run/bench/ops, "
                            "devices, env or loadgen)",
                            name)));
    }
    return action();
  }
  if (json_option->count() > 0) {
    return kiln::tools::report_error(
        kiln::invalid_argument_error("--json goes with --version or after a subcommand"));
  }
  return kiln::tools::report_error(kiln::invalid_argument_error(
      "a subcommand is required (run, verify, compile, ...; kiln --help lists them)"));
}
