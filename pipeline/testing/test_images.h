// SPDX-License-Identifier: Apache-2.0
// Test helpers: synthetic pixels, JPEG/PNG encoders and a self-deleting temporary folder.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kiln::pipeline::testing {

enum class Pattern { kGradient, kCheckerboard };

// h x w x c uint8 pixels, deterministic: a smooth gradient (different per channel) or an 8-pixel
// checkerboard.
std::vector<uint8_t> make_pixels(int width, int height, int channels, Pattern pattern);

// tjCompress2 at `quality` with TurboJPEG chroma subsampling `subsamp` (TJSAMP_*; -1: 4:4:4, or
// gray for 1 channel) and `flags` (e.g. TJFLAG_PROGRESSIVE). Aborts on encoder failure.
std::vector<uint8_t> encode_jpeg(std::span<const uint8_t> pixels, int width, int height,
                                 int channels, int quality = 95, int subsamp = -1, int flags = 0);
// An 8-bit PNG (gray or RGB) via libspng. Aborts on encoder failure.
std::vector<uint8_t> encode_png(std::span<const uint8_t> pixels, int width, int height,
                                int channels);

void write_bytes(const std::string& path, std::span<const uint8_t> bytes);

// A fresh folder under the test temporary directory, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  // path() + "/" + name, creating the parent folders.
  std::string file(const std::string& name) const;

 private:
  std::string path_;
};

}  // namespace kiln::pipeline::testing
