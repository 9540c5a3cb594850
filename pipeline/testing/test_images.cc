// SPDX-License-Identifier: Apache-2.0
// Test helpers: synthetic images encoded with libjpeg-turbo and libspng.
#include "pipeline/testing/test_images.h"

#include <gtest/gtest.h>
#include <spng.h>
#include <turbojpeg.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/check.h"

namespace kiln::pipeline::testing {

std::vector<uint8_t> make_pixels(int width, int height, int channels, Pattern pattern) {
  std::vector<uint8_t> p(static_cast<size_t>(width) * height * channels);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        uint8_t v;
        if (pattern == Pattern::kCheckerboard) {
          v = ((x / 8 + y / 8) % 2) ? 230 : 20;
        } else {
          int gx = width > 1 ? x * 255 / (width - 1) : 128;
          int gy = height > 1 ? y * 255 / (height - 1) : 128;
          v = static_cast<uint8_t>(c == 0 ? gx : c == 1 ? gy : (gx + gy) / 2);
        }
        p[(static_cast<size_t>(y) * width + x) * channels + c] = v;
      }
    }
  }
  return p;
}

std::vector<uint8_t> encode_jpeg(std::span<const uint8_t> pixels, int width, int height,
                                 int channels, int quality, int subsamp, int flags) {
  tjhandle handle = tjInitCompress();
  KILN_CHECK(handle != nullptr);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  int rc = tjCompress2(handle, pixels.data(), width, 0, height,
                       channels == 1 ? TJPF_GRAY : TJPF_RGB, &out, &size,
                       subsamp >= 0    ? subsamp
                       : channels == 1 ? TJSAMP_GRAY
                                       : TJSAMP_444,
                       quality, flags);
  KILN_CHECK(rc == 0, tjGetErrorStr2(handle));
  std::vector<uint8_t> bytes(out, out + size);
  tjFree(out);
  tjDestroy(handle);
  return bytes;
}

std::vector<uint8_t> encode_png(std::span<const uint8_t> pixels, int width, int height,
                                int channels) {
  spng_ctx* ctx = spng_ctx_new(SPNG_CTX_ENCODER);
  KILN_CHECK(ctx != nullptr);
  spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
  spng_ihdr ihdr{};
  ihdr.width = static_cast<uint32_t>(width);
  ihdr.height = static_cast<uint32_t>(height);
  ihdr.bit_depth = 8;
  ihdr.color_type = channels == 1 ? SPNG_COLOR_TYPE_GRAYSCALE : SPNG_COLOR_TYPE_TRUECOLOR;
  KILN_CHECK(spng_set_ihdr(ctx, &ihdr) == 0);
  int rc = spng_encode_image(ctx, pixels.data(), pixels.size(), SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
  KILN_CHECK(rc == 0, spng_strerror(rc));
  size_t size = 0;
  int err = 0;
  auto* buf = static_cast<uint8_t*>(spng_get_png_buffer(ctx, &size, &err));
  KILN_CHECK(buf != nullptr && err == 0);
  std::vector<uint8_t> bytes(buf, buf + size);
  std::free(buf);
  spng_ctx_free(ctx);
  return bytes;
}

void write_bytes(const std::string& path, std::span<const uint8_t> bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  KILN_CHECK(out.good(), "cannot write test file");
}

TempDir::TempDir() {
  std::string pattern = ::testing::TempDir() + "kiln_pipeline_XXXXXX";
  KILN_CHECK(mkdtemp(pattern.data()) != nullptr, "mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::file(const std::string& name) const {
  std::filesystem::path p = std::filesystem::path(path_) / name;
  std::filesystem::create_directories(p.parent_path());
  return p.string();
}

}  // namespace kiln::pipeline::testing
