// SPDX-License-Identifier: Apache-2.0
// PNG decoding through libspng, to 8-bit RGB, BGR or gray.
#include <fmt/format.h>
#include <spng.h>

#include <memory>

#include "pipeline/decoders/codecs.h"
#include "pipeline/kernels/buffer.h"

namespace kiln::pipeline::detail {
namespace {

struct CtxDeleter {
  void operator()(spng_ctx* ctx) const { spng_ctx_free(ctx); }
};
using Ctx = std::unique_ptr<spng_ctx, CtxDeleter>;

Status png_error(std::string_view path, int code) {
  return data_loss_error(
      fmt::format("image \"{}\": corrupt or truncated PNG: {}", path, spng_strerror(code)));
}

Result<Ctx> open(std::span<const uint8_t> bytes, std::string_view path, spng_ihdr* ihdr) {
  Ctx ctx(spng_ctx_new(0));
  if (!ctx) return resource_exhausted_error(fmt::format("image \"{}\": out of memory", path));
  spng_set_image_limits(ctx.get(), 65535, 65535);
  spng_set_chunk_limits(ctx.get(), 64u << 20, 64u << 20);
  if (int rc = spng_set_png_buffer(ctx.get(), bytes.data(), bytes.size()); rc != 0) {
    return png_error(path, rc);
  }
  if (int rc = spng_get_ihdr(ctx.get(), ihdr); rc != 0) return png_error(path, rc);
  if (int64_t{ihdr->width} * ihdr->height > kMaxImagePixels) {
    return invalid_argument_error(
        fmt::format("image \"{}\": unsupported PNG size {}x{}", path, ihdr->width, ihdr->height));
  }
  return ctx;
}

}  // namespace

Result<ImageInfo> png_info(std::span<const uint8_t> bytes, std::string_view path) {
  spng_ihdr ihdr{};
  KILN_ASSIGN_OR_RETURN(Ctx ctx, open(bytes, path, &ihdr));
  return ImageInfo{ImageFormat::kPng, ihdr.width, ihdr.height};
}

Result<Tensor> decode_png(std::span<const uint8_t> bytes, std::string_view path,
                          ColorFormat color) {
  spng_ihdr ihdr{};
  KILN_ASSIGN_OR_RETURN(Ctx ctx, open(bytes, path, &ihdr));
  const int64_t h = ihdr.height, w = ihdr.width;
  const bool native_gray = ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE && ihdr.bit_depth <= 8;
  const bool want_gray = color == ColorFormat::kGray;
  const int fmt = want_gray && native_gray ? SPNG_FMT_G8 : SPNG_FMT_RGB8;
  size_t size = 0;
  if (int rc = spng_decoded_image_size(ctx.get(), fmt, &size); rc != 0) return png_error(path, rc);
  const int64_t decoded_channels = fmt == SPNG_FMT_G8 ? 1 : 3;
  KILN_CHECK(size == static_cast<size_t>(h * w * decoded_channels), "spng decoded size");
  KILN_ASSIGN_OR_RETURN(Tensor decoded,
                        kernels::allocate_uninitialized(DType::kU8, Shape{h, w, decoded_channels}));
  if (int rc = spng_decode_image(ctx.get(), decoded.data<uint8_t>(), size, fmt, 0); rc != 0) {
    return png_error(path, rc);
  }
  if (color == ColorFormat::kRGB || fmt == SPNG_FMT_G8) return decoded;
  uint8_t* p = decoded.data<uint8_t>();
  const int64_t pixels = h * w;
  if (color == ColorFormat::kBGR) {
    for (int64_t i = 0; i < pixels; ++i) std::swap(p[i * 3], p[i * 3 + 2]);
    return decoded;
  }
  KILN_ASSIGN_OR_RETURN(Tensor gray, kernels::allocate_uninitialized(DType::kU8, Shape{h, w, 1}));
  uint8_t* g = gray.data<uint8_t>();
  for (int64_t i = 0; i < pixels; ++i) {
    // ITU-R BT.601 luma in 16-bit fixed point, as libjpeg computes it.
    uint32_t y = 19595u * p[i * 3] + 38470u * p[i * 3 + 1] + 7471u * p[i * 3 + 2] + 32768u;
    g[i] = static_cast<uint8_t>(y >> 16);
  }
  return gray;
}

}  // namespace kiln::pipeline::detail
