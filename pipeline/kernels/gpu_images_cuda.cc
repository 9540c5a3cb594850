// SPDX-License-Identifier: Apache-2.0
// GpuStream over the CUDA runtime: a non-blocking stream, a private memory pool that keeps freed
// batches for reuse, pinned staging for uploads and for the kernels' job tables.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstring>
#include <limits>

#include "core/gpu.h"
#include "pipeline/kernels/cuda/image_batch.h"
#include "pipeline/kernels/gpu_images.h"

namespace kiln::pipeline::kernels {
namespace {

Status cuda_status(cudaError_t err, std::string_view what) {
  if (err == cudaSuccess) return Status();
  cudaGetLastError();
  return unavailable_error(
      fmt::format("pipeline on the GPU: {}: {}", what, cudaGetErrorString(err)));
}

static_assert(cuda::kMaxGpuChannels == cuda_max_channels());

constexpr int64_t kAlign = 256;

int64_t align_up(int64_t v) {
  return (v + kAlign - 1) / kAlign * kAlign;
}

// Pinned host memory that grows to the largest request and is reused.
struct PinnedBuffer {
  void* data = nullptr;
  size_t capacity = 0;

  ~PinnedBuffer() {
    if (data) cudaFreeHost(data);
  }
  Status reserve(size_t bytes) {
    if (bytes <= capacity) return Status();
    if (data) cudaFreeHost(data);
    data = nullptr;
    capacity = 0;
    const size_t grown = bytes + bytes / 4;
    KILN_RETURN_IF_ERROR(cuda_status(cudaHostAlloc(&data, grown, cudaHostAllocDefault),
                                     fmt::format("allocating {} bytes of pinned memory", grown)));
    capacity = grown;
    return Status();
  }
};

constexpr size_t kJobArenaBytes = size_t{1} << 20;

}  // namespace

struct GpuStream::Impl {
  cudaStream_t stream = nullptr;
  cudaMemPool_t pool = nullptr;
  PinnedBuffer staging;
  PinnedBuffer jobs;
  size_t jobs_used = 0;

  ~Impl() {
    if (stream) cudaStreamSynchronize(stream);
    if (pool) cudaMemPoolDestroy(pool);
    if (stream) cudaStreamDestroy(stream);
  }
};

namespace {

// A batch buffer from the stream's pool, freed in stream order; it keeps the stream (and pool)
// alive while a consumer holds it.
Result<std::shared_ptr<void>> allocate(const std::shared_ptr<GpuStream::Impl>& impl,
                                       int64_t bytes) {
  void* p = nullptr;
  KILN_RETURN_IF_ERROR(
      cuda_status(cudaMallocFromPoolAsync(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1)),
                                          impl->pool, impl->stream),
                  fmt::format("allocating {} bytes on the GPU", bytes)));
  return std::shared_ptr<void>(p, [impl](void* q) { cudaFreeAsync(q, impl->stream); });
}

// Offsets of images of `shapes` packed in order, each aligned; the total size.
int64_t pack(const std::vector<Shape>& shapes, DType dtype, std::vector<int64_t>* offsets) {
  int64_t total = 0;
  offsets->clear();
  for (const Shape& s : shapes) {
    offsets->push_back(total);
    total += align_up(s.numel() * static_cast<int64_t>(dtype_size(dtype)));
  }
  return total;
}

}  // namespace

GpuStream::GpuStream(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuStream::~GpuStream() = default;

Result<std::unique_ptr<GpuStream>> GpuStream::create() {
  std::string why;
  std::vector<GpuInfo> gpus = list_gpus(&why);
  if (gpus.empty()) {
    return unavailable_error(fmt::format(
        "pipeline: device \"gpu\" needs an NVIDIA GPU, and none is usable here ({}); run the "
        "operators with device \"cpu\"",
        why));
  }
  auto impl = std::make_shared<Impl>();
  int device = 0;
  KILN_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "finding the current GPU"));
  KILN_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking),
                                   "creating a stream"));
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  KILN_RETURN_IF_ERROR(cuda_status(cudaMemPoolCreate(&impl->pool, &props), "creating a pool"));
  uint64_t keep = std::numeric_limits<uint64_t>::max();
  KILN_RETURN_IF_ERROR(
      cuda_status(cudaMemPoolSetAttribute(impl->pool, cudaMemPoolAttrReleaseThreshold, &keep),
                  "configuring the pool"));
  KILN_RETURN_IF_ERROR(impl->jobs.reserve(kJobArenaBytes));
  return std::unique_ptr<GpuStream>(new GpuStream(std::move(impl)));
}

Result<GpuImages> GpuStream::upload(std::span<const Tensor> images, ThreadPool* pool) {
  GpuImages out;
  if (images.empty()) return out;
  out.dtype = images[0].dtype();
  for (const Tensor& t : images) {
    if (t.dtype() != out.dtype) {
      return invalid_argument_error(
          fmt::format("pipeline on the GPU: a batch mixes {} and {} images", dtype_name(out.dtype),
                      dtype_name(t.dtype())));
    }
    out.shapes.push_back(t.shape());
  }
  out.bytes = pack(out.shapes, out.dtype, &out.offsets);
  // The staging memory may still feed the previous upload.
  KILN_RETURN_IF_ERROR(synchronize());
  KILN_RETURN_IF_ERROR(impl_->staging.reserve(static_cast<size_t>(out.bytes)));
  auto* staging = static_cast<uint8_t*>(impl_->staging.data);
  auto copy = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      std::memcpy(staging + out.offsets[i], images[i].raw_data(), images[i].nbytes());
    }
  };
  if (pool != nullptr) {
    pool->parallel_for(static_cast<int64_t>(images.size()), copy);
  } else {
    copy(0, static_cast<int64_t>(images.size()));
  }
  KILN_ASSIGN_OR_RETURN(out.data, allocate(impl_, out.bytes));
  KILN_RETURN_IF_ERROR(
      cuda_status(cudaMemcpyAsync(out.data.get(), staging, static_cast<size_t>(out.bytes),
                                  cudaMemcpyHostToDevice, impl_->stream),
                  fmt::format("copying {} bytes to the GPU", out.bytes)));
  return out;
}

Status GpuStream::download(const GpuImages& images, void* host, size_t bytes) {
  KILN_RETURN_IF_ERROR(synchronize());
  // Images are packed with alignment padding: copy each to its dense place.
  auto* dst = static_cast<uint8_t*>(host);
  size_t at = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    const size_t n = static_cast<size_t>(images.shapes[i].numel()) * dtype_size(images.dtype);
    KILN_CHECK(at + n <= bytes, "GpuStream::download: host buffer too small");
    KILN_RETURN_IF_ERROR(cuda_status(
        cudaMemcpyAsync(dst + at,
                        static_cast<const uint8_t*>(images.data.get()) + images.offsets[i], n,
                        cudaMemcpyDeviceToHost, impl_->stream),
        "copying from the GPU"));
    at += n;
  }
  return synchronize();
}

Status GpuStream::synchronize() {
  impl_->jobs_used = 0;
  return cuda_status(cudaStreamSynchronize(impl_->stream), "running the batch");
}

namespace {

struct Launch {
  std::vector<cuda::ImageJob> jobs;
  int max_height = 0;
  int max_width = 0;
};

// Job tables for `steps` over `in`, outputs of `out_dtype` packed in `out`; `chw` lays each
// output out channels first.
Result<Launch> plan(const GpuImages& in, std::span<const GpuStep> steps, DType out_dtype, bool chw,
                    GpuImages* out) {
  KILN_CHECK(steps.size() == in.size(), "GpuStream: one step per image");
  Launch launch;
  out->dtype = out_dtype;
  out->shapes.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    const Shape& s = in.shapes[i];
    const GpuStep& step = steps[i];
    if (s.rank() != 3 || s[2] < 1 || s[2] > cuda::kMaxGpuChannels) {
      return invalid_argument_error(
          fmt::format("pipeline on the GPU: expected HWC images of 1 to {} channels, got {}",
                      cuda::kMaxGpuChannels, s.to_string()));
    }
    const Window& w = step.window;
    KILN_CHECK(w.x >= 0 && w.y >= 0 && w.width > 0 && w.height > 0 && w.x + w.width <= s[1] &&
                   w.y + w.height <= s[0] && step.out_height > 0 && step.out_width > 0,
               "GpuStream: window outside the image");
    out->shapes.push_back(chw ? Shape{s[2], step.out_height, step.out_width}
                              : Shape{step.out_height, step.out_width, s[2]});
    cuda::ImageJob job;
    job.src_offset = in.offsets[i];
    job.src_height = static_cast<int32_t>(s[0]);
    job.src_width = static_cast<int32_t>(s[1]);
    job.channels = static_cast<int32_t>(s[2]);
    job.win_y = static_cast<int32_t>(w.y);
    job.win_x = static_cast<int32_t>(w.x);
    job.win_height = static_cast<int32_t>(w.height);
    job.win_width = static_cast<int32_t>(w.width);
    job.dst_height = static_cast<int32_t>(step.out_height);
    job.dst_width = static_cast<int32_t>(step.out_width);
    job.mirror = step.mirror ? 1 : 0;
    job.flip_vertical = step.flip_vertical ? 1 : 0;
    launch.max_height = std::max(launch.max_height, job.dst_height);
    launch.max_width = std::max(launch.max_width, job.dst_width);
    launch.jobs.push_back(job);
  }
  out->bytes = pack(out->shapes, out_dtype, &out->offsets);
  for (size_t i = 0; i < launch.jobs.size(); ++i) launch.jobs[i].dst_offset = out->offsets[i];
  if (launch.jobs.size() > 65535) {
    return invalid_argument_error(fmt::format(
        "pipeline on the GPU: a batch holds at most 65535 images, got {}", launch.jobs.size()));
  }
  return launch;
}

// Copies a job table into the pinned arena and from there into device memory (in stream order).
Result<std::shared_ptr<void>> upload_jobs(const std::shared_ptr<GpuStream::Impl>& impl,
                                          const std::vector<cuda::ImageJob>& jobs) {
  const size_t bytes = jobs.size() * sizeof(cuda::ImageJob);
  if (impl->jobs_used + bytes > impl->jobs.capacity) {
    KILN_RETURN_IF_ERROR(cuda_status(cudaStreamSynchronize(impl->stream), "running the batch"));
    impl->jobs_used = 0;
    KILN_RETURN_IF_ERROR(impl->jobs.reserve(bytes));
  }
  void* host = static_cast<uint8_t*>(impl->jobs.data) + impl->jobs_used;
  impl->jobs_used += (bytes + 63) / 64 * 64;
  std::memcpy(host, jobs.data(), bytes);
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<void> device, allocate(impl, static_cast<int64_t>(bytes)));
  KILN_RETURN_IF_ERROR(
      cuda_status(cudaMemcpyAsync(device.get(), host, bytes, cudaMemcpyHostToDevice, impl->stream),
                  "copying a job table to the GPU"));
  return device;
}

}  // namespace

Result<GpuImages> GpuStream::resize(const GpuImages& in, std::span<const GpuStep> steps,
                                    Interp interp) {
  KILN_CHECK(in.dtype == DType::kU8, "GpuStream::resize: uint8 images only");
  GpuImages out;
  KILN_ASSIGN_OR_RETURN(Launch launch, plan(in, steps, DType::kU8, false, &out));
  KILN_ASSIGN_OR_RETURN(out.data, allocate(impl_, out.bytes));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<void> jobs, upload_jobs(impl_, launch.jobs));
  KILN_RETURN_IF_ERROR(cuda::resize_u8_cuda(
      static_cast<const uint8_t*>(in.data.get()), static_cast<uint8_t*>(out.data.get()),
      static_cast<const cuda::ImageJob*>(jobs.get()), static_cast<int>(launch.jobs.size()),
      launch.max_height, launch.max_width, interp, impl_->stream));
  return out;
}

Result<GpuImages> GpuStream::crop_flip(const GpuImages& in, std::span<const GpuStep> steps) {
  GpuImages out;
  KILN_ASSIGN_OR_RETURN(Launch launch, plan(in, steps, in.dtype, false, &out));
  KILN_ASSIGN_OR_RETURN(out.data, allocate(impl_, out.bytes));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<void> jobs, upload_jobs(impl_, launch.jobs));
  KILN_RETURN_IF_ERROR(cuda::crop_flip_cuda(
      in.data.get(), out.data.get(), static_cast<const cuda::ImageJob*>(jobs.get()),
      static_cast<int>(launch.jobs.size()), launch.max_height, launch.max_width,
      static_cast<int>(dtype_size(in.dtype)), impl_->stream));
  return out;
}

Result<GpuImages> GpuStream::crop_mirror_normalize(const GpuImages& in,
                                                   std::span<const GpuStep> steps,
                                                   std::span<const float> mean,
                                                   std::span<const float> stddev, Layout layout,
                                                   DType dtype) {
  KILN_CHECK(in.dtype == DType::kU8, "GpuStream::crop_mirror_normalize: uint8 images only");
  GpuImages out;
  KILN_ASSIGN_OR_RETURN(Launch launch, plan(in, steps, dtype, layout == Layout::kCHW, &out));
  cuda::NormalizeConstants k;
  for (int ch = 0; ch < cuda::kMaxGpuChannels; ++ch) {
    const float m = mean.size() == 1 ? mean[0] : ch < static_cast<int>(mean.size()) ? mean[ch] : 0;
    const float s = stddev.size() == 1                     ? stddev[0]
                    : ch < static_cast<int>(stddev.size()) ? stddev[ch]
                                                           : 1;
    k.mean[ch] = m;
    k.scale[ch] = 1.0f / s;
  }
  KILN_ASSIGN_OR_RETURN(out.data, allocate(impl_, out.bytes));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<void> jobs, upload_jobs(impl_, launch.jobs));
  KILN_RETURN_IF_ERROR(cuda::crop_mirror_normalize_u8_cuda(
      static_cast<const uint8_t*>(in.data.get()), out.data.get(),
      static_cast<const cuda::ImageJob*>(jobs.get()), static_cast<int>(launch.jobs.size()),
      launch.max_height, launch.max_width, k, layout, dtype, impl_->stream));
  return out;
}

}  // namespace kiln::pipeline::kernels
