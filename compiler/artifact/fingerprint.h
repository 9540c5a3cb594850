// SPDX-License-Identifier: Apache-2.0
// Device fingerprints: what a compiled artifact depends on in the machine and build it was made on.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::compiler {

// Ordered (key, value) pairs, e.g. {"cpu_isa", "avx2,avx512f,..."}, {"onednn", "2.6.3"}.
using Fingerprint = std::vector<std::pair<std::string, std::string>>;

// The kiln version this library was built as ("0.1.0").
std::string_view kiln_version();

// The instruction-set extensions of this CPU that kiln's kernels and oneDNN dispatch on, from
// cpuid and xgetbv (extensions the OS does not enable count as absent): "sse4_2", "avx", "avx2",
// "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "avx512_bf16",
// "avx512_fp16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16". Empty off x86-64.
std::vector<std::string> cpu_isa_flags();

// What an artifact compiled for `target` on this machine depends on: nothing for ref (portable);
// for cpu the architecture, the ISA flags and the oneDNN version.
Fingerprint device_fingerprint(std::string_view target);

// The first difference that makes an artifact made with `stored` unusable here (`current`), said
// so that a user understands it, e.g. "was compiled for a CPU with avx512_vnni; this CPU lacks it";
// empty when compatible. ISA flags this CPU has beyond the stored ones are compatible.
std::string fingerprint_mismatch(const Fingerprint& stored, const Fingerprint& current);

}  // namespace kiln::compiler
