// SPDX-License-Identifier: Apache-2.0
// Tests' helper: an environment variable set for one scope.
#pragma once

#include <cstdlib>

namespace kiln::test {

// Sets `name` to `value` until the end of the scope, then unsets it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

}  // namespace kiln::test
