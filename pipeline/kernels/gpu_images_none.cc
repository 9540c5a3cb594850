// SPDX-License-Identifier: Apache-2.0
// GpuStream in a build without CUDA: create() says so; nothing else can be reached.
#include "pipeline/kernels/gpu_images.h"

namespace kiln::pipeline::kernels {

struct GpuStream::Impl {};

bool gpu_jpeg_decoder_available(std::string* why_not) {
  if (why_not) *why_not = "this kiln was built without CUDA";
  return false;
}

GpuStream::GpuStream(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuStream::~GpuStream() = default;

Result<std::unique_ptr<GpuStream>> GpuStream::create() {
  return unavailable_error(
      "pipeline: device \"gpu\" needs a kiln built with CUDA (this one was built without it); "
      "run the operators with device \"cpu\"");
}

namespace {
Status unreachable() {
  return internal_error("pipeline: GpuStream used in a build without CUDA");
}
}  // namespace

Result<GpuImages> GpuStream::upload(std::span<const Tensor>, ThreadPool*) {
  return unreachable();
}
Status GpuStream::download(const GpuImages&, void*, size_t) {
  return unreachable();
}
Result<GpuImages> GpuStream::resize(const GpuImages&, std::span<const GpuStep>, Interp) {
  return unreachable();
}
Result<GpuImages> GpuStream::crop_flip(const GpuImages&, std::span<const GpuStep>) {
  return unreachable();
}
Result<GpuImages> GpuStream::crop_mirror_normalize(const GpuImages&, std::span<const GpuStep>,
                                                   std::span<const float>, std::span<const float>,
                                                   Layout, DType) {
  return unreachable();
}
Result<GpuImages> GpuStream::decode_jpeg(std::span<const Tensor>, std::span<const GpuStep>,
                                         JpegOutput) {
  return unreachable();
}
void GpuStream::set_copy_pool(ThreadPool*) {}
Result<GpuImages> GpuStream::apply_lut(const GpuImages&, std::span<const GpuStep>) {
  return unreachable();
}
Result<GpuImages> GpuStream::color_matrix(const GpuImages&, std::span<const GpuStep>) {
  return unreachable();
}
Result<GpuImages> GpuStream::warp(const GpuImages&, std::span<const GpuStep>) {
  return unreachable();
}
Result<GpuImages> GpuStream::blur(const GpuImages&, std::span<const GpuStep>) {
  return unreachable();
}
Result<GpuImages> GpuStream::gaussian_noise(const GpuImages&, std::span<const GpuStep>) {
  return unreachable();
}
Result<GpuImages> GpuStream::salt_and_pepper(const GpuImages&, std::span<const GpuStep>) {
  return unreachable();
}
Result<GpuImages> GpuStream::pad(const GpuImages&, std::span<const GpuStep>, double) {
  return unreachable();
}
Result<GpuImages> GpuStream::cast(const GpuImages&, DType) {
  return unreachable();
}
Status copy_to_host(const GpuImages&, void*, size_t) {
  return unreachable();
}
Status release_after(const GpuImages&, uintptr_t) {
  return unreachable();
}
Status GpuStream::synchronize() {
  return unreachable();
}

}  // namespace kiln::pipeline::kernels
