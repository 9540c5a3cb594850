// SPDX-License-Identifier: Apache-2.0
// The ref kernel of ImageDecoder: the format from the leading bytes, decoded to 8-bit RGB by
// libjpeg-turbo, libspng, libtiff, libwebp or OpenJPEG (BMP and PNM are read here).
#include <fmt/format.h>
#include <openjpeg.h>
#include <spng.h>
#include <tiffio.h>
#include <turbojpeg.h>
#include <webp/decode.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compiler/ops/image.h"
#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

namespace {

using namespace std::string_view_literals;

// A decoded image: height x width pixels of 3 (RGB) or 1 (gray) bytes.
struct Pixels {
  int64_t height = 0;
  int64_t width = 0;
  int channels = 3;
  std::vector<uint8_t> data;
};

using Bytes = std::span<const uint8_t>;

bool starts_with(Bytes b, std::string_view magic, size_t at = 0) {
  return b.size() >= at + magic.size() &&
         std::memcmp(b.data() + at, magic.data(), magic.size()) == 0;
}

Status corrupt(std::string_view format, std::string_view why) {
  return invalid_argument_error(fmt::format("the {} image does not decode: {}", format, why));
}

Result<Pixels> decode_jpeg(Bytes b) {
  std::unique_ptr<void, int (*)(tjhandle)> tj(tjInitDecompress(), tjDestroy);
  int w = 0, h = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(tj.get(), b.data(), static_cast<unsigned long>(b.size()), &w, &h,
                          &subsampling, &colorspace) != 0) {
    return corrupt("JPEG", tjGetErrorStr2(tj.get()));
  }
  Pixels p{h, w, colorspace == TJCS_GRAY ? 1 : 3, {}};
  p.data.resize(static_cast<size_t>(h) * static_cast<size_t>(w) * static_cast<size_t>(p.channels));
  if (tjDecompress2(tj.get(), b.data(), static_cast<unsigned long>(b.size()), p.data.data(), w, 0,
                    h, p.channels == 1 ? TJPF_GRAY : TJPF_RGB, TJFLAG_ACCURATEDCT) != 0) {
    return corrupt("JPEG", tjGetErrorStr2(tj.get()));
  }
  return p;
}

Result<Pixels> decode_png(Bytes b) {
  std::unique_ptr<spng_ctx, void (*)(spng_ctx*)> ctx(spng_ctx_new(0), spng_ctx_free);
  if (spng_set_png_buffer(ctx.get(), b.data(), b.size()) != 0) return corrupt("PNG", "no buffer");
  spng_ihdr ihdr{};
  if (int e = spng_get_ihdr(ctx.get(), &ihdr); e != 0) return corrupt("PNG", spng_strerror(e));
  size_t size = 0;
  if (int e = spng_decoded_image_size(ctx.get(), SPNG_FMT_RGB8, &size); e != 0) {
    return corrupt("PNG", spng_strerror(e));
  }
  Pixels p{ihdr.height, ihdr.width, 3, std::vector<uint8_t>(size)};
  if (int e = spng_decode_image(ctx.get(), p.data.data(), size, SPNG_FMT_RGB8, SPNG_DECODE_TRNS);
      e != 0) {
    return corrupt("PNG", spng_strerror(e));
  }
  return p;
}

Result<Pixels> decode_webp(Bytes b) {
  int w = 0, h = 0;
  uint8_t* rgb = WebPDecodeRGB(b.data(), b.size(), &w, &h);
  if (rgb == nullptr) return corrupt("WebP", "libwebp rejected it");
  Pixels p{h, w, 3,
           std::vector<uint8_t>(rgb, rgb + static_cast<size_t>(w) * static_cast<size_t>(h) * 3)};
  WebPFree(rgb);
  return p;
}

// libtiff reads from memory through these callbacks.
struct MemoryFile {
  Bytes bytes;
  toff_t at = 0;
};
tsize_t tiff_read(thandle_t h, tdata_t buf, tsize_t size) {
  auto* f = static_cast<MemoryFile*>(h);
  const auto n = static_cast<tsize_t>(std::min<toff_t>(
      static_cast<toff_t>(size), f->bytes.size() - std::min<toff_t>(f->at, f->bytes.size())));
  std::memcpy(buf, f->bytes.data() + f->at, static_cast<size_t>(n));
  f->at += static_cast<toff_t>(n);
  return n;
}
tsize_t tiff_write(thandle_t, tdata_t, tsize_t) {
  return 0;
}
toff_t tiff_seek(thandle_t h, toff_t off, int whence) {
  auto* f = static_cast<MemoryFile*>(h);
  if (whence == SEEK_CUR) off += f->at;
  if (whence == SEEK_END) off += f->bytes.size();
  f->at = off;
  return off;
}
int tiff_close(thandle_t) {
  return 0;
}
toff_t tiff_size(thandle_t h) {
  return static_cast<MemoryFile*>(h)->bytes.size();
}
int tiff_map(thandle_t, tdata_t*, toff_t*) {
  return 0;
}
void tiff_unmap(thandle_t, tdata_t, toff_t) {}

Result<Pixels> decode_tiff(Bytes b) {
  MemoryFile file{b};
  TIFFSetErrorHandler(nullptr);
  TIFFSetWarningHandler(nullptr);
  std::unique_ptr<TIFF, void (*)(TIFF*)> tif(
      TIFFClientOpen("image", "rm", &file, tiff_read, tiff_write, tiff_seek, tiff_close, tiff_size,
                     tiff_map, tiff_unmap),
      TIFFClose);
  if (tif == nullptr) return corrupt("TIFF", "libtiff cannot open it");
  uint32_t w = 0, h = 0;
  TIFFGetField(tif.get(), TIFFTAG_IMAGEWIDTH, &w);
  TIFFGetField(tif.get(), TIFFTAG_IMAGELENGTH, &h);
  if (w == 0 || h == 0 || static_cast<uint64_t>(w) * h > (uint64_t{1} << 30)) {
    return corrupt("TIFF", "it has no size or too large a one");
  }
  std::vector<uint32_t> rgba(static_cast<size_t>(w) * h);
  if (TIFFReadRGBAImageOriented(tif.get(), w, h, rgba.data(), ORIENTATION_TOPLEFT, 0) == 0) {
    return corrupt("TIFF", "libtiff cannot read its pixels");
  }
  Pixels p{h, w, 3, std::vector<uint8_t>(rgba.size() * 3)};
  for (size_t i = 0; i < rgba.size(); ++i) {
    p.data[3 * i] = static_cast<uint8_t>(TIFFGetR(rgba[i]));
    p.data[3 * i + 1] = static_cast<uint8_t>(TIFFGetG(rgba[i]));
    p.data[3 * i + 2] = static_cast<uint8_t>(TIFFGetB(rgba[i]));
  }
  return p;
}

// OpenJPEG reads from memory through these callbacks.
OPJ_SIZE_T opj_read(void* buf, OPJ_SIZE_T n, void* h) {
  auto* f = static_cast<MemoryFile*>(h);
  if (f->at >= f->bytes.size()) return static_cast<OPJ_SIZE_T>(-1);
  n = std::min<OPJ_SIZE_T>(n, f->bytes.size() - f->at);
  std::memcpy(buf, f->bytes.data() + f->at, n);
  f->at += n;
  return n;
}
OPJ_OFF_T opj_skip(OPJ_OFF_T n, void* h) {
  auto* f = static_cast<MemoryFile*>(h);
  f->at = static_cast<toff_t>(std::clamp<OPJ_OFF_T>(static_cast<OPJ_OFF_T>(f->at) + n, 0,
                                                    static_cast<OPJ_OFF_T>(f->bytes.size())));
  return n;
}
OPJ_BOOL opj_seek(OPJ_OFF_T n, void* h) {
  auto* f = static_cast<MemoryFile*>(h);
  if (n < 0 || static_cast<size_t>(n) > f->bytes.size()) return OPJ_FALSE;
  f->at = static_cast<toff_t>(n);
  return OPJ_TRUE;
}

Result<Pixels> decode_jpeg2000(Bytes b, bool codestream) {
  MemoryFile file{b};
  std::unique_ptr<opj_stream_t, void (*)(opj_stream_t*)> stream(
      opj_stream_create(1 << 16, OPJ_TRUE), opj_stream_destroy);
  opj_stream_set_user_data(stream.get(), &file, nullptr);
  opj_stream_set_user_data_length(stream.get(), b.size());
  opj_stream_set_read_function(stream.get(), opj_read);
  opj_stream_set_skip_function(stream.get(), opj_skip);
  opj_stream_set_seek_function(stream.get(), opj_seek);
  std::unique_ptr<opj_codec_t, void (*)(opj_codec_t*)> codec(
      opj_create_decompress(codestream ? OPJ_CODEC_J2K : OPJ_CODEC_JP2), opj_destroy_codec);
  opj_dparameters_t params;
  opj_set_default_decoder_parameters(&params);
  opj_image_t* raw = nullptr;
  if (!opj_setup_decoder(codec.get(), &params) ||
      !opj_read_header(stream.get(), codec.get(), &raw)) {
    if (raw != nullptr) opj_image_destroy(raw);
    return corrupt("JPEG 2000", "OpenJPEG cannot read its header");
  }
  std::unique_ptr<opj_image_t, void (*)(opj_image_t*)> image(raw, opj_image_destroy);
  if (!opj_decode(codec.get(), stream.get(), image.get()) ||
      !opj_end_decompress(codec.get(), stream.get())) {
    return corrupt("JPEG 2000", "OpenJPEG cannot decode it");
  }
  const opj_image_comp_t* c = image->comps;
  const int channels = image->numcomps >= 3 ? 3 : 1;
  for (int k = 0; k < channels; ++k) {
    if (c[k].w != c[0].w || c[k].h != c[0].h || c[k].data == nullptr) {
      return corrupt("JPEG 2000", "its components differ in size (subsampled)");
    }
  }
  Pixels p{c[0].h, c[0].w, channels, {}};
  const size_t n = static_cast<size_t>(p.height) * static_cast<size_t>(p.width);
  p.data.resize(n * static_cast<size_t>(channels));
  for (int k = 0; k < channels; ++k) {
    const int shift = static_cast<int>(c[k].prec) - 8;
    const int offset = c[k].sgnd ? 1 << (c[k].prec - 1) : 0;
    for (size_t i = 0; i < n; ++i) {
      int v = c[k].data[i] + offset;
      v = shift > 0 ? v >> shift : v << -shift;
      p.data[i * static_cast<size_t>(channels) + static_cast<size_t>(k)] =
          static_cast<uint8_t>(std::clamp(v, 0, 255));
    }
  }
  return p;
}

// BMP: uncompressed 24- and 32-bit, and 8-bit (or fewer) with a palette; bottom-up or top-down.
Result<Pixels> decode_bmp(Bytes b) {
  auto u32 = [&](size_t at) -> uint32_t {
    return at + 4 <= b.size()
               ? static_cast<uint32_t>(b[at] | b[at + 1] << 8 | b[at + 2] << 16 | b[at + 3] << 24)
               : 0;
  };
  auto u16 = [&](size_t at) -> uint32_t {
    return at + 2 <= b.size() ? static_cast<uint32_t>(b[at] | b[at + 1] << 8) : 0;
  };
  if (b.size() < 54) return corrupt("BMP", "it is shorter than its headers");
  const uint32_t offset = u32(10), header = u32(14);
  const auto width = static_cast<int32_t>(u32(18));
  const auto signed_height = static_cast<int32_t>(u32(22));
  const uint32_t bits = u16(28), compression = u32(30);
  if (width <= 0 || signed_height == 0 || width > (1 << 16) ||
      std::abs(signed_height) > (1 << 16)) {
    return corrupt("BMP", "its size is not valid");
  }
  if (compression != 0 && !(compression == 3 && bits == 32))
    return corrupt("BMP", "it is compressed");
  if (bits != 24 && bits != 32 && bits != 8 && bits != 4 && bits != 1) {
    return corrupt("BMP", fmt::format("{} bits per pixel are not supported", bits));
  }
  const int64_t height = std::abs(signed_height);
  const size_t row = ((static_cast<size_t>(width) * bits + 31) / 32) * 4;
  if (offset + row * static_cast<size_t>(height) > b.size())
    return corrupt("BMP", "its pixels are cut short");
  const size_t palette = 14 + header;
  Pixels p{height, width, 3, std::vector<uint8_t>(static_cast<size_t>(height * width) * 3)};
  for (int64_t y = 0; y < height; ++y) {
    const uint8_t* src =
        b.data() + offset + row * static_cast<size_t>(signed_height > 0 ? height - 1 - y : y);
    uint8_t* dst = p.data.data() + static_cast<size_t>(y * width) * 3;
    for (int64_t x = 0; x < width; ++x) {
      uint32_t bgr_at = 0;
      const uint8_t* bgr = nullptr;
      if (bits >= 24) {
        bgr = src + x * (bits / 8);
      } else {
        const size_t bit = static_cast<size_t>(x) * bits;
        const uint32_t index = (src[bit / 8] >> (8 - bits - bit % 8)) & ((1u << bits) - 1);
        bgr_at = static_cast<uint32_t>(palette + index * 4);
        if (bgr_at + 3 > b.size()) return corrupt("BMP", "its palette is cut short");
        bgr = b.data() + bgr_at;
      }
      dst[3 * x] = bgr[2];
      dst[3 * x + 1] = bgr[1];
      dst[3 * x + 2] = bgr[0];
    }
  }
  return p;
}

// PNM: P2/P5 (gray) and P3/P6 (RGB), maxval up to 255.
Result<Pixels> decode_pnm(Bytes b) {
  size_t at = 2;
  auto number = [&]() -> int64_t {
    while (at < b.size()) {
      if (b[at] == '#') {
        while (at < b.size() && b[at] != '\n') ++at;
      } else if (std::isspace(b[at])) {
        ++at;
      } else {
        break;
      }
    }
    int64_t v = -1;
    while (at < b.size() && std::isdigit(b[at]) && v < (int64_t{1} << 30))
      v = (v < 0 ? 0 : v * 10) + (b[at++] - '0');
    return v;
  };
  const char kind = static_cast<char>(b[1]);
  const int64_t w = number(), h = number(), maxval = number();
  if (w <= 0 || h <= 0 || maxval <= 0 || maxval > 255 || w * h > (int64_t{1} << 30)) {
    return corrupt("PNM", "its header is not valid (or its maxval is above 255)");
  }
  const int channels = kind == '3' || kind == '6' ? 3 : 1;
  Pixels p{h, w, channels, std::vector<uint8_t>(static_cast<size_t>(w * h * channels))};
  auto scale = [&](int64_t v) { return static_cast<uint8_t>((v * 255 + maxval / 2) / maxval); };
  if (kind == '5' || kind == '6') {
    ++at;  // the one whitespace after maxval
    if (at + p.data.size() > b.size()) return corrupt("PNM", "its pixels are cut short");
    for (size_t i = 0; i < p.data.size(); ++i) p.data[i] = scale(b[at + i]);
  } else {
    for (uint8_t& v : p.data) {
      const int64_t n = number();
      if (n < 0 || n > maxval) return corrupt("PNM", "a pixel value is missing or too large");
      v = scale(n);
    }
  }
  return p;
}

Result<Pixels> decode(Bytes b) {
  if (starts_with(b, "\xff\xd8\xff")) return decode_jpeg(b);
  if (starts_with(b, "\x89PNG\r\n\x1a\n")) return decode_png(b);
  if (starts_with(b, "RIFF") && starts_with(b, "WEBP", 8)) return decode_webp(b);
  if (starts_with(b, "II*\0"sv) || starts_with(b, "MM\0*"sv)) return decode_tiff(b);
  if (starts_with(b, "\0\0\0\x0cjP  \r\n\x87\n"sv)) return decode_jpeg2000(b, false);
  if (starts_with(b, "\xff\x4f\xff\x51")) return decode_jpeg2000(b, true);
  if (starts_with(b, "BM")) return decode_bmp(b);
  if (b.size() > 2 && b[0] == 'P' && b[1] >= '2' && b[1] <= '6' && b[1] != '4')
    return decode_pnm(b);
  return invalid_argument_error(
      "the bytes are not an image kiln decodes (BMP, JPEG, JPEG 2000, PNG, PNM, TIFF or WebP)");
}

}  // namespace

template <>
Status run_op(const ops::ImageDecoder& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  KILN_ASSIGN_OR_RETURN(
      Pixels p, ctx.named(decode(Bytes(x.data<uint8_t>(), static_cast<size_t>(x.numel())))));
  const int channels = op.pixel_format == "Grayscale" ? 1 : 3;
  KILN_ASSIGN_OR_RETURN(Tensor * y,
                        ctx.allocate_output(0, DType::kU8, Shape{p.height, p.width, channels}));
  uint8_t* out = y->data<uint8_t>();
  const size_t n = static_cast<size_t>(p.height * p.width);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* px = p.data.data() + i * static_cast<size_t>(p.channels);
    if (channels == 1) {
      // ITU-R 601 luma in 16-bit fixed point, rounded (as Pillow converts RGB to L).
      out[i] =
          p.channels == 1
              ? px[0]
              : static_cast<uint8_t>((px[0] * 19595 + px[1] * 38470 + px[2] * 7471 + 0x8000) >> 16);
    } else if (p.channels == 1) {
      std::fill_n(out + 3 * i, 3, px[0]);
    } else {
      const bool bgr = op.pixel_format == "BGR";
      out[3 * i] = px[bgr ? 2 : 0];
      out[3 * i + 1] = px[1];
      out[3 * i + 2] = px[bgr ? 0 : 2];
    }
  }
  return Status();
}

}  // namespace kiln::compiler::ref
