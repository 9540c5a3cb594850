// SPDX-License-Identifier: Apache-2.0
// Running the `kiln` binary from an e2e test: its exit code and everything it printed.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace kiln {

struct KilnRun {
  int exit_code;
  std::string output;  // stdout and stderr together
};

// Runs `KILN_CLI args` through the shell and waits for it.
inline KilnRun run_kiln(const std::string& args) {
  std::string command = std::string(KILN_CLI) + " " + args + " 2>&1";
  KilnRun r{-1, ""};
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) r.output.append(buffer, n);
  int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace kiln
