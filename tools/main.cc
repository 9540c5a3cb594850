// SPDX-License-Identifier: Apache-2.0
// The `kiln` command-line tool: installs the spdlog and progress sinks and dispatches to a
// subcommand.
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <utility>
#include <vector>

#include "core/logging.h"
#include "core/progress.h"
#include "tools/command.h"
#include "tools/version.h"

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
  app.set_version_flag("--version", std::string("kiln ") + KILN_VERSION_STRING);
  app.require_subcommand(1);

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
  for (auto& [sub, action] : commands) {
    if (sub->parsed()) return action();
  }
  return 0;
}
