// SPDX-License-Identifier: Apache-2.0
// KILN_CHECK: aborts with file:line on a broken invariant (a bug), never on bad user input.
#pragma once

#include <string_view>

namespace kiln::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* condition,
                               std::string_view message);
}  // namespace kiln::detail

// KILN_CHECK(cond) or KILN_CHECK(cond, message): the check is always on, in every build type.
#define KILN_CHECK(cond, ...)                                                              \
  do {                                                                                     \
    if (!(cond)) [[unlikely]] {                                                            \
      ::kiln::detail::check_failed(__FILE__, __LINE__, #cond, std::string_view{__VA_ARGS__}); \
    }                                                                                      \
  } while (false)
