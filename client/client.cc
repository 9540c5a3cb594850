// SPDX-License-Identifier: Apache-2.0
// What every client shares: waiting for the server to become ready.
#include "client/client.h"

#include <fmt/format.h>

#include <thread>

namespace kiln::client {

Status Client::wait_until_server_ready(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last = "it answered not ready";
  while (true) {
    Result<bool> ready = server_ready();
    if (ready.ok() && *ready) return Status();
    if (!ready.ok()) last = std::string(ready.status().message());
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return unavailable_error(
      fmt::format("the server was not ready within {} ms: {}", timeout.count(), last));
}

}  // namespace kiln::client
