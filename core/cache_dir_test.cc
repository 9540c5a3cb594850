// SPDX-License-Identifier: Apache-2.0
// Tests for the cache root: KILN_CACHE_DIR, then XDG_CACHE_HOME, then HOME.
#include "core/cache_dir.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace kiln {
namespace {

// Sets (or unsets, for nullopt) a variable for the scope, then puts back what was there.
class ScopedVar {
 public:
  ScopedVar(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    set(value);
  }
  ~ScopedVar() { set(old_); }
  ScopedVar(const ScopedVar&) = delete;
  ScopedVar& operator=(const ScopedVar&) = delete;

 private:
  void set(const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name_, value->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  const char* name_;
  std::optional<std::string> old_;
};

TEST(CacheRoot, KilnCacheDirWins) {
  ScopedVar kiln("KILN_CACHE_DIR", "/var/cache/kiln-here");
  ScopedVar xdg("XDG_CACHE_HOME", "/xdg");
  ScopedVar home("HOME", "/home/someone");
  EXPECT_EQ(cache_root(), "/var/cache/kiln-here");
}

TEST(CacheRoot, ThenXdgThenHome) {
  ScopedVar kiln("KILN_CACHE_DIR", "");  // set but empty counts as unset
  ScopedVar xdg("XDG_CACHE_HOME", "/xdg");
  ScopedVar home("HOME", "/home/someone");
  EXPECT_EQ(cache_root(), "/xdg/kiln");
  {
    ScopedVar no_xdg("XDG_CACHE_HOME", std::nullopt);
    EXPECT_EQ(cache_root(), "/home/someone/.cache/kiln");
    ScopedVar no_home("HOME", std::nullopt);
    EXPECT_EQ(cache_root(), "/tmp/.cache/kiln");
  }
  ScopedVar empty_xdg("XDG_CACHE_HOME", "");
  EXPECT_EQ(cache_root(), "/home/someone/.cache/kiln");
}

}  // namespace
}  // namespace kiln
