// SPDX-License-Identifier: Apache-2.0
// Winograd F(2x2, 3x3) and F(4x4, 3x3) convolution weights packed straight into oneDNN's wino
// layouts, several times faster than oneDNN 2.6's reorder (which transforms through a scratch
// copy), so artifacts can store the plain 3x3 weights (9/16 of the packed size) and pack them when
// they load.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace kiln::compiler::cpu {

// Whether pack_winograd() handles `src` -> `dst`: plain f32 OIHW (or GOIHW with one group) 3x3
// weights into an f32 wino_wei_aaOIoi, aaOio or aaOBiOo layout of alpha 4 (F(2x2, 3x3)) or an
// OBaaIBOIio one of alpha 6 (F(4x4, 3x3), which oneDNN runs at larger batches).
bool can_pack_winograd(const dnnl::memory::desc& src, const dnnl::memory::desc& dst);

// Writes `src` (laid out as `src_layout`) into `dst` (dst_layout.get_size() bytes) in `dst_layout`,
// the values oneDNN's reorder writes, to the bit: U = G g G^T per output and input channel, zero
// in the padding. Requires can_pack_winograd(src_layout, dst_layout).
void pack_winograd(const dnnl::memory::desc& src_layout, const float* src,
                   const dnnl::memory::desc& dst_layout, float* dst);

}  // namespace kiln::compiler::cpu
