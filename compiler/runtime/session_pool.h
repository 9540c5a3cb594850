// SPDX-License-Identifier: Apache-2.0
// SessionPool: the per-caller sessions of one executable, reused across run() calls.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/status.h"

namespace kiln::compiler {

// Hands each concurrent caller a session no other call is using: an idle one from the pool, or a
// new one from `make`. Thread-safe; sessions given back are kept for the next caller.
template <class Session>
class SessionPool {
 public:
  using Factory = std::function<Result<std::unique_ptr<Session>>()>;
  explicit SessionPool(Factory make) : make_(std::move(make)) {}

  Result<std::unique_ptr<Session>> take() const {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!idle_.empty()) {
        std::unique_ptr<Session> s = std::move(idle_.back());
        idle_.pop_back();
        return s;
      }
    }
    return make_();
  }
  void give_back(std::unique_ptr<Session> session) const {
    std::lock_guard<std::mutex> lock(mutex_);
    idle_.push_back(std::move(session));
  }
  // Destroys the idle sessions now (an owner that must free them in some context first).
  void clear() const {
    std::lock_guard<std::mutex> lock(mutex_);
    idle_.clear();
  }

 private:
  Factory make_;
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<Session>> idle_;
};

}  // namespace kiln::compiler
