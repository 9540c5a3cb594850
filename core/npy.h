// SPDX-License-Identifier: Apache-2.0
// numpy's .npy format: read and write every kiln dtype except string.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/tensor.h"

namespace kiln {

// Decodes a .npy file held in memory. `name` (a path, usually) appears in every error message.
// Accepts format versions 1-3, little- and big-endian data, C and Fortran order (the result is
// always C order). bf16 is the 2-byte void type "|V2" (what numpy writes for ml_dtypes.bfloat16).
// A truncated or malformed file is an invalid-argument error, never a crash.
Result<Tensor> parse_npy(std::span<const uint8_t> bytes, std::string_view name);
// Reads and decodes a .npy file.
Result<Tensor> read_npy(const std::string& path);

// Encodes a tensor as .npy (version 1.0, or 2.0 when the header needs it; little-endian, C order,
// header padded to 64 bytes). kString is not representable and gives an invalid-argument error.
Result<std::string> encode_npy(const TensorView& tensor);
// Encodes and writes atomically (temporary file + rename).
Status write_npy(const std::string& path, const TensorView& tensor);

}  // namespace kiln
