// SPDX-License-Identifier: Apache-2.0
// PNG decoding to 8-bit RGB, BGR or gray: 8-bit non-interlaced gray, gray-alpha, RGB and RGBA
// images inflate with libdeflate (one call into a buffer of the known size, faster than zlib's
// streaming inflate that libspng uses) and are unfiltered here; the rest, and anything this path
// finds wrong, go through libspng, which decodes or names the fault.
#include <fmt/format.h>
#include <libdeflate.h>
#include <spng.h>

#include <cstring>
#include <memory>
#include <optional>
#include <vector>

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

uint32_t big_endian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// The zlib stream of the image: its one IDAT chunk's data, or every IDAT's joined into `joined`.
// Only the plainest file takes this path: IHDR first, then consecutive IDATs, then IEND, every
// CRC right. Anything else -- another chunk (text, colour profiles, gamma: libspng checks their
// contents), a length past the end, a CRC that does not match, no IEND -- gives nullopt and goes
// to libspng, which decodes it or names the fault, so both paths accept the same files.
std::optional<std::span<const uint8_t>> idat_stream(std::span<const uint8_t> bytes,
                                                    std::vector<uint8_t>* joined) {
  std::vector<std::span<const uint8_t>> parts;
  size_t pos = 8;  // after the signature
  bool ended = false;
  for (int chunk = 0; pos + 12 <= bytes.size(); ++chunk) {
    const uint32_t length = big_endian32(bytes.data() + pos);
    if (length > bytes.size() - pos - 12) return std::nullopt;
    const uint8_t* type = bytes.data() + pos + 4;
    if (libdeflate_crc32(0, type, size_t{length} + 4) != big_endian32(type + 4 + length)) {
      return std::nullopt;
    }
    const bool ihdr = std::memcmp(type, "IHDR", 4) == 0;
    const bool idat = std::memcmp(type, "IDAT", 4) == 0;
    if (ihdr != (chunk == 0)) return std::nullopt;
    if (std::memcmp(type, "IEND", 4) == 0) {
      ended = length == 0;
      break;
    }
    if (idat) {
      // Consecutive: the chunk before was IHDR (none yet) or an IDAT.
      if (!parts.empty() && parts.back().data() + parts.back().size() + 12 != type + 4) {
        return std::nullopt;
      }
      parts.emplace_back(type + 4, length);
    } else if (!ihdr || !parts.empty()) {
      return std::nullopt;
    }
    pos += size_t{length} + 12;
  }
  if (!ended || parts.empty()) return std::nullopt;
  if (parts.size() == 1) return parts[0];
  joined->clear();
  for (std::span<const uint8_t> part : parts) {
    joined->insert(joined->end(), part.begin(), part.end());
  }
  return std::span<const uint8_t>(*joined);
}

// Reverses the PNG filters of `rows` rows of `stride` bytes (each after its filter byte) in place,
// `bpp` bytes per pixel. False for an unknown filter type.
bool unfilter(uint8_t* data, int64_t rows, int64_t stride, int bpp) {
  const uint8_t* prev = nullptr;
  for (int64_t y = 0; y < rows; ++y) {
    uint8_t* row = data + y * (stride + 1);
    const uint8_t filter = row[0];
    uint8_t* cur = row + 1;
    switch (filter) {
      case 0: break;
      case 1:  // sub
        for (int64_t i = bpp; i < stride; ++i) cur[i] = static_cast<uint8_t>(cur[i] + cur[i - bpp]);
        break;
      case 2:  // up
        if (prev) {
          for (int64_t i = 0; i < stride; ++i) cur[i] = static_cast<uint8_t>(cur[i] + prev[i]);
        }
        break;
      case 3:  // average
        for (int64_t i = 0; i < stride; ++i) {
          const int left = i >= bpp ? cur[i - bpp] : 0;
          const int up = prev ? prev[i] : 0;
          cur[i] = static_cast<uint8_t>(cur[i] + ((left + up) >> 1));
        }
        break;
      case 4:  // paeth
        for (int64_t i = 0; i < stride; ++i) {
          const int a = i >= bpp ? cur[i - bpp] : 0;
          const int b = prev ? prev[i] : 0;
          const int c = prev && i >= bpp ? prev[i - bpp] : 0;
          const int p = a + b - c;
          const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          const int predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          cur[i] = static_cast<uint8_t>(cur[i] + predictor);
        }
        break;
      default: return false;
    }
    prev = cur;
  }
  return true;
}

}  // namespace

std::optional<Tensor> decode_simple_png(std::span<const uint8_t> bytes, ColorFormat color) {
  // The signature, then IHDR: 13 bytes of width, height, bit depth, colour type, compression,
  // filter method and interlace method, and its CRC.
  static constexpr uint8_t kSignature[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() < 33 || std::memcmp(bytes.data(), kSignature, 8) != 0 ||
      big_endian32(bytes.data() + 8) != 13 || std::memcmp(bytes.data() + 12, "IHDR", 4) != 0 ||
      libdeflate_crc32(0, bytes.data() + 12, 17) != big_endian32(bytes.data() + 29)) {
    return std::nullopt;
  }
  const uint8_t* ihdr = bytes.data() + 16;
  const int64_t w = big_endian32(ihdr), h = big_endian32(ihdr + 4);
  if (w < 1 || h < 1 || w > 65535 || h > 65535 || w * h > kMaxImagePixels || ihdr[8] != 8 ||
      ihdr[10] != 0 || ihdr[11] != 0 || ihdr[12] != 0) {
    return std::nullopt;
  }
  int bpp = 0;
  switch (ihdr[9]) {
    case SPNG_COLOR_TYPE_GRAYSCALE: bpp = 1; break;
    case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA: bpp = 2; break;
    case SPNG_COLOR_TYPE_TRUECOLOR: bpp = 3; break;
    case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA: bpp = 4; break;
    default: return std::nullopt;
  }
  std::vector<uint8_t> joined;
  std::optional<std::span<const uint8_t>> stream = idat_stream(bytes, &joined);
  if (!stream) return std::nullopt;
  const int64_t stride = w * bpp;
  std::vector<uint8_t> raw(static_cast<size_t>((stride + 1) * h));
  struct Free {
    void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
  };
  thread_local std::unique_ptr<libdeflate_decompressor, Free> inflater(
      libdeflate_alloc_decompressor());
  // Exactly the size the header gives, the stream ending where the data ends; else libspng
  // decides (it reports a short or long stream).
  size_t consumed = 0;
  if (!inflater ||
      libdeflate_zlib_decompress_ex(inflater.get(), stream->data(), stream->size(), raw.data(),
                                    raw.size(), &consumed, nullptr) != LIBDEFLATE_SUCCESS ||
      consumed != stream->size()) {
    return std::nullopt;
  }
  if (!unfilter(raw.data(), h, stride, bpp)) return std::nullopt;
  const bool gray_in = bpp <= 2;
  const int64_t channels = color == ColorFormat::kGray ? 1 : 3;
  Result<Tensor> out = kernels::allocate_uninitialized(DType::kU8, Shape{h, w, channels});
  if (!out.ok()) return std::nullopt;
  for (int64_t y = 0; y < h; ++y) {
    const uint8_t* src = raw.data() + y * (stride + 1) + 1;
    uint8_t* dst = out->data<uint8_t>() + y * w * channels;
    if (gray_in) {
      // libspng's conversions: gray repeated into RGB, alpha dropped.
      for (int64_t x = 0; x < w; ++x) {
        for (int64_t c = 0; c < channels; ++c) dst[x * channels + c] = src[x * bpp];
      }
    } else if (color == ColorFormat::kGray) {
      for (int64_t x = 0; x < w; ++x) {
        const uint8_t* p = src + x * bpp;
        // ITU-R BT.601 luma in 16-bit fixed point, as the libspng path below computes it.
        const uint32_t luma = 19595u * p[0] + 38470u * p[1] + 7471u * p[2] + 32768u;
        dst[x] = static_cast<uint8_t>(luma >> 16);
      }
    } else if (color == ColorFormat::kBGR) {
      for (int64_t x = 0; x < w; ++x) {
        dst[x * 3] = src[x * bpp + 2];
        dst[x * 3 + 1] = src[x * bpp + 1];
        dst[x * 3 + 2] = src[x * bpp];
      }
    } else if (bpp == 3) {
      std::memcpy(dst, src, static_cast<size_t>(stride));
    } else {
      for (int64_t x = 0; x < w; ++x) std::memcpy(dst + x * 3, src + x * bpp, 3);
    }
  }
  return std::move(*out);
}

Result<ImageInfo> png_info(std::span<const uint8_t> bytes, std::string_view path) {
  spng_ihdr ihdr{};
  KILN_ASSIGN_OR_RETURN(Ctx ctx, open(bytes, path, &ihdr));
  return ImageInfo{ImageFormat::kPng, ihdr.width, ihdr.height};
}

Result<Tensor> decode_png(std::span<const uint8_t> bytes, std::string_view path,
                          ColorFormat color) {
  if (std::optional<Tensor> fast = decode_simple_png(bytes, color)) return std::move(*fast);
  return decode_png_with_libspng(bytes, path, color);
}

Result<Tensor> decode_png_with_libspng(std::span<const uint8_t> bytes, std::string_view path,
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
