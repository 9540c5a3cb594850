// SPDX-License-Identifier: Apache-2.0
// The batch grid: samples to RGB tiles, tiles into one canvas, the canvas to PNG via libspng.
#include "pipeline/executor/batch_grid.h"

#include <fmt/format.h>
#include <spng.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

namespace kiln::pipeline {
namespace {

struct Tile {
  int64_t height = 0;
  int64_t width = 0;
  std::vector<uint8_t> rgb;  // height * width * 3
};

bool is_channels(int64_t n) {
  return n == 1 || n == 3;
}

Result<Tile> to_tile(const Tensor& sample, size_t index) {
  if (sample.rank() != 3 || (sample.dtype() != DType::kU8 && sample.dtype() != DType::kF32)) {
    return invalid_argument_error(fmt::format(
        "batch grid: sample #{} is a {} {}: expected an image [H, W, C] or [C, H, W] of uint8 or "
        "float32",
        index, dtype_name(sample.dtype()), sample.shape().to_string()));
  }
  const Shape& s = sample.shape();
  // HWC unless only the first dimension looks like a channel count.
  const bool chw = is_channels(s[0]) && !is_channels(s[2]);
  const int64_t c = chw ? s[0] : s[2], h = chw ? s[1] : s[0], w = chw ? s[2] : s[1];
  if (!is_channels(c) || h == 0 || w == 0) {
    return invalid_argument_error(fmt::format(
        "batch grid: sample #{} {} has {} channels: expected 1 or 3", index, s.to_string(), c));
  }
  auto value = [&](int64_t y, int64_t x, int64_t ch) -> float {
    const int64_t i = chw ? (ch * h + y) * w + x : (y * w + x) * c + ch;
    return sample.dtype() == DType::kU8 ? static_cast<float>(sample.data<uint8_t>()[i])
                                        : sample.data<float>()[i];
  };
  float lo = 0.0f, scale = 1.0f;
  if (sample.dtype() == DType::kF32) {
    auto values = sample.span<float>();
    auto [mn, mx] = std::minmax_element(values.begin(), values.end());
    lo = *mn;
    scale = *mx > *mn ? 255.0f / (*mx - *mn) : 0.0f;
  }
  Tile tile{h, w, std::vector<uint8_t>(static_cast<size_t>(h * w * 3))};
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t ch = 0; ch < 3; ++ch) {
        float v = (value(y, x, c == 1 ? 0 : ch) - lo) * scale;
        tile.rgb[static_cast<size_t>((y * w + x) * 3 + ch)] =
            static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
      }
    }
  }
  return tile;
}

}  // namespace

Status save_batch_grid(const TensorList& images, const std::string& path) {
  if (images.samples.empty()) return invalid_argument_error("batch grid: the batch is empty");
  std::vector<Tile> tiles;
  int64_t cell_h = 0, cell_w = 0;
  for (size_t i = 0; i < images.samples.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Tile tile, to_tile(images.samples[i], i));
    cell_h = std::max(cell_h, tile.height);
    cell_w = std::max(cell_w, tile.width);
    tiles.push_back(std::move(tile));
  }
  constexpr int64_t kGap = 2;
  const auto n = static_cast<int64_t>(tiles.size());
  const auto cols = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(n))));
  const int64_t rows = (n + cols - 1) / cols;
  const int64_t width = cols * cell_w + (cols + 1) * kGap;
  const int64_t height = rows * cell_h + (rows + 1) * kGap;
  std::vector<uint8_t> canvas(static_cast<size_t>(width * height * 3), 32);
  for (int64_t t = 0; t < n; ++t) {
    const Tile& tile = tiles[static_cast<size_t>(t)];
    const int64_t y0 = kGap + (t / cols) * (cell_h + kGap);
    const int64_t x0 = kGap + (t % cols) * (cell_w + kGap);
    for (int64_t y = 0; y < tile.height; ++y) {
      std::copy_n(&tile.rgb[static_cast<size_t>(y * tile.width * 3)], tile.width * 3,
                  &canvas[static_cast<size_t>(((y0 + y) * width + x0) * 3)]);
    }
  }

  std::unique_ptr<spng_ctx, decltype(&spng_ctx_free)> ctx(spng_ctx_new(SPNG_CTX_ENCODER),
                                                          &spng_ctx_free);
  if (!ctx) return internal_error("batch grid: cannot create a PNG encoder");
  std::unique_ptr<std::FILE, decltype(&std::fclose)> file(std::fopen(path.c_str(), "wb"),
                                                          &std::fclose);
  if (!file) return errno_error(errno, fmt::format("cannot write the grid \"{}\"", path));
  spng_set_png_file(ctx.get(), file.get());
  spng_ihdr ihdr{};
  ihdr.width = static_cast<uint32_t>(width);
  ihdr.height = static_cast<uint32_t>(height);
  ihdr.bit_depth = 8;
  ihdr.color_type = SPNG_COLOR_TYPE_TRUECOLOR;
  int rc = spng_set_ihdr(ctx.get(), &ihdr);
  if (rc == 0) {
    rc = spng_encode_image(ctx.get(), canvas.data(), canvas.size(), SPNG_FMT_PNG,
                           SPNG_ENCODE_FINALIZE);
  }
  if (rc != 0) {
    return internal_error(fmt::format("cannot write the grid \"{}\": {}", path, spng_strerror(rc)));
  }
  return Status();
}

}  // namespace kiln::pipeline
