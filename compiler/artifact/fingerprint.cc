// SPDX-License-Identifier: Apache-2.0
// Device fingerprints from cpuid/xgetbv and the oneDNN library version.
#include "compiler/artifact/fingerprint.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/strings.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#ifdef KILN_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

namespace kiln::compiler {

namespace {

#if defined(__x86_64__)
uint64_t xgetbv0() {
  uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}
#endif

}  // namespace

std::string_view kiln_version() {
  return KILN_VERSION_STRING;
}

std::vector<std::string> cpu_isa_flags() {
  std::vector<std::string> flags;
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return flags;
  const unsigned c1 = c;
  auto bit = [](unsigned reg, int n) { return ((reg >> n) & 1u) != 0; };
  if (bit(c1, 20)) flags.push_back("sse4_2");
  const bool osxsave = bit(c1, 27);
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6;                 // xmm and ymm state
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask, zmm state
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;         // tile config and data
  if (os_avx && bit(c1, 28)) flags.push_back("avx");
  unsigned b7 = 0, c7 = 0, d7 = 0, a71 = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    b7 = b;
    c7 = c;
    d7 = d;
    if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) a71 = a;
  }
  if (os_avx) {
    if (bit(b7, 5)) flags.push_back("avx2");
    if (bit(c1, 12)) flags.push_back("fma");
    if (bit(c1, 29)) flags.push_back("f16c");
    if (bit(a71, 4)) flags.push_back("avx_vnni");
  }
  if (os_avx512) {
    if (bit(b7, 16)) flags.push_back("avx512f");
    if (bit(b7, 17)) flags.push_back("avx512dq");
    if (bit(b7, 30)) flags.push_back("avx512bw");
    if (bit(b7, 31)) flags.push_back("avx512vl");
    if (bit(c7, 11)) flags.push_back("avx512_vnni");
    if (bit(a71, 5)) flags.push_back("avx512_bf16");
    if (bit(d7, 23)) flags.push_back("avx512_fp16");
  }
  if (os_amx) {
    if (bit(d7, 24)) flags.push_back("amx_tile");
    if (bit(d7, 25)) flags.push_back("amx_int8");
    if (bit(d7, 22)) flags.push_back("amx_bf16");
  }
#endif
  return flags;
}

Fingerprint device_fingerprint(std::string_view target) {
  Fingerprint fp;
  if (target == "ref") return fp;
#if defined(__x86_64__)
  fp.emplace_back("arch", "x86_64");
#elif defined(__aarch64__)
  fp.emplace_back("arch", "aarch64");
#else
  fp.emplace_back("arch", "unknown");
#endif
  std::string isa;
  for (const std::string& f : cpu_isa_flags()) isa += (isa.empty() ? "" : ",") + f;
  fp.emplace_back("cpu_isa", isa);
#ifdef KILN_HAVE_DNNL
  if (target == "cpu") {
    const dnnl_version_t* v = dnnl_version();
    fp.emplace_back("onednn", fmt::format("{}.{}.{}", v->major, v->minor, v->patch));
  }
#endif
  return fp;
}

std::string fingerprint_mismatch(const Fingerprint& stored, const Fingerprint& current) {
  auto find = [](const Fingerprint& fp, const std::string& key) -> const std::string* {
    for (const auto& [k, v] : fp) {
      if (k == key) return &v;
    }
    return nullptr;
  };
  for (const auto& [key, value] : stored) {
    const std::string* here = find(current, key);
    if (key == "cpu_isa") {
      std::vector<std::string> have = split_commas(here ? *here : "");
      std::vector<std::string> missing;
      for (const std::string& flag : split_commas(value)) {
        if (std::find(have.begin(), have.end(), flag) == have.end()) missing.push_back(flag);
      }
      if (!missing.empty()) {
        return fmt::format("was compiled for a CPU with {}; this CPU lacks {}",
                           fmt::join(missing, ", "), missing.size() == 1 ? "it" : "them");
      }
      continue;
    }
    if (here == nullptr) {
      return fmt::format("was compiled with {} {}; this build has no {}", key, value, key);
    }
    if (*here != value) {
      return fmt::format("was compiled with {} {}; this machine has {} {}", key, value, key, *here);
    }
  }
  return "";
}

}  // namespace kiln::compiler
