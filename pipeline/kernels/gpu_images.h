// SPDX-License-Identifier: Apache-2.0
// Ragged batches of images in GPU memory, and the stream that moves them and runs kernels on them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "pipeline/kernels/color.h"
#include "pipeline/kernels/crop_flip.h"
#include "pipeline/kernels/normalize.h"
#include "pipeline/kernels/resize.h"
#include "pipeline/kernels/warp.h"

namespace kiln::pipeline::kernels {

// The most channels an image may have on the GPU.
inline constexpr int64_t cuda_max_channels() {
  return 4;
}

// A batch of images of one dtype in one GPU buffer, image i at byte offsets[i] with shapes[i]
// (HWC, or CHW after a CHW normalize), packed in order. When every shape is equal the buffer is
// the dense [N, shape...] batch.
struct GpuImages {
  std::shared_ptr<void> data;
  DType dtype = DType::kU8;
  std::vector<Shape> shapes;
  std::vector<int64_t> offsets;
  int64_t bytes = 0;
  int device = 0;          // the GPU holding it
  void* stream = nullptr;  // the cudaStream_t that made it; its buffer is freed in its order

  size_t size() const { return shapes.size(); }
  // The common shape of every image, or nullopt when they differ (or there are none).
  std::optional<Shape> uniform_shape() const {
    if (shapes.empty()) return std::nullopt;
    for (const Shape& s : shapes) {
      if (s != shapes[0]) return std::nullopt;
    }
    return shapes[0];
  }
};

// What one image's step reads and writes: the window of its input and the output size; mirror
// and flip_vertical where the step takes them.
struct GpuStep {
  Window window;
  int64_t out_height = 0;
  int64_t out_width = 0;
  bool mirror = false;
  bool flip_vertical = false;
  // Colour steps: a 256-entry table (lut), or a 3x3 matrix and offset (color.h).
  std::vector<uint8_t> lut;
  ColorMatrix matrix;
  // Warp steps: the output -> input map (warp.h), bilinear or nearest, the fill value.
  Affine affine{};
  bool linear = false;
  uint8_t fill = 0;
  // Blur steps: the 1-D taps, down and across (odd count).
  std::vector<float> taps;
  // Noise steps: the sample's seed; mean and stddev (gaussian) or prob and salt_vs_pepper (salt
  // and pepper), and whether each channel draws on its own.
  uint64_t seed = 0;
  double noise_a = 0.0;
  double noise_b = 0.0;
  bool per_channel = false;
  // A decode step whose image was decoded on the CPU instead (not a JPEG the GPU decodes): it is
  // uploaded as it is.
  Tensor host;
};

// Copies `images` into `host` as download() does (each image dense, in order), synchronously:
// for a consumer holding a batch after its stream finished (a pipeline's output kept on the GPU).
Status copy_to_host(const GpuImages& images, void* host, size_t bytes);

// Orders the stream-ordered free of `images`' buffer after the work already queued on
// `consumer_stream` (a cudaStream_t; 0 or 1: the legacy default stream, 2: per-thread default),
// for a consumer that read it there (a DLPack consumer releasing a batch).
Status release_after(const GpuImages& images, uintptr_t consumer_stream);

// The pixel layout a GPU JPEG decode writes.
enum class JpegOutput { kRGB, kBGR, kGray };

// Whether this machine's GPU has hardware JPEG decoders that nvJPEG (loaded at run time, so the
// build needs none of its files) can drive; probed once per process. `why_not` receives the
// reason when not.
bool gpu_jpeg_decoder_available(std::string* why_not = nullptr);

// One CUDA stream with its pinned staging memory: uploads host images, runs the batched kernels
// in order and hands results back. Not thread-safe: one pipeline's producer owns it. Work is
// enqueued asynchronously; synchronize() waits for it and reports any error of the kernels.
// Without CUDA, or without a GPU, create() fails with a message that says so.
class GpuStream {
 public:
  static Result<std::unique_ptr<GpuStream>> create();
  ~GpuStream();
  GpuStream(const GpuStream&) = delete;
  GpuStream& operator=(const GpuStream&) = delete;

  // Copies host tensors (HWC, all of one dtype) into one GPU batch through pinned memory; the
  // packing into pinned memory is split over `pool`.
  Result<GpuImages> upload(std::span<const Tensor> images, ThreadPool* pool);
  // Waits for the stream, then copies `images` into `out`, host tensors of the same shapes and
  // dtype (for a uniform batch, `out` may be one dense tensor: the caller views it).
  Status download(const GpuImages& images, void* host, size_t bytes);

  // The kernels: `steps` has one entry per image of `in`; outputs are allocated here.
  Result<GpuImages> resize(const GpuImages& in, std::span<const GpuStep> steps, Interp interp);
  Result<GpuImages> crop_flip(const GpuImages& in, std::span<const GpuStep> steps);
  Result<GpuImages> crop_mirror_normalize(const GpuImages& in, std::span<const GpuStep> steps,
                                          std::span<const float> mean,
                                          std::span<const float> stddev, Layout layout,
                                          DType dtype);

  // Colour: each image through its step's table (uint8), or its step's matrix (RGB uint8).
  Result<GpuImages> apply_lut(const GpuImages& in, std::span<const GpuStep> steps);
  Result<GpuImages> color_matrix(const GpuImages& in, std::span<const GpuStep> steps);
  // Affine warp of each whole image to its step's output size (uint8).
  Result<GpuImages> warp(const GpuImages& in, std::span<const GpuStep> steps);

  // Separable blur of each image with its step's taps (uint8, borders reflect-101; filter.h).
  Result<GpuImages> blur(const GpuImages& in, std::span<const GpuStep> steps);
  // Noise with each step's seed and parameters, the CPU kernels' draws (uint8; filter.h).
  Result<GpuImages> gaussian_noise(const GpuImages& in, std::span<const GpuStep> steps);
  Result<GpuImages> salt_and_pepper(const GpuImages& in, std::span<const GpuStep> steps);
  // Each image at the top left of its step's output size, the rest `fill` (uint8 or float32).
  Result<GpuImages> pad(const GpuImages& in, std::span<const GpuStep> steps, double fill);
  // Every element converted to `dtype` (uint8, int32 or float32; kernels/warp.h's cast), any
  // shapes.
  Result<GpuImages> cast(const GpuImages& in, DType dtype);

  // JPEG decode: image i is steps[i].host uploaded when that is defined, else encoded[i] (a
  // baseline JPEG, JpegHeader::hardware_decodable()) decoded by the hardware decoder into
  // [out_height, out_width, 3 or 1]. Fails for the whole batch when the decoder rejects an image.
  Result<GpuImages> decode_jpeg(std::span<const Tensor> encoded, std::span<const GpuStep> steps,
                                JpegOutput output);

  // The pool that packs uploads made inside decode_jpeg (none: the calling thread).
  void set_copy_pool(ThreadPool* pool);

  // Waits for everything enqueued; the first error of any of it.
  Status synchronize();

  struct Impl;  // the CUDA objects; buffers handed out keep it alive

 private:
  explicit GpuStream(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace kiln::pipeline::kernels
