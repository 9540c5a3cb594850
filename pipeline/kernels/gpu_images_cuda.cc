// SPDX-License-Identifier: Apache-2.0
// GpuStream over the CUDA runtime: a non-blocking stream, a private memory pool that keeps freed
// batches for reuse, pinned staging for uploads and for the kernels' job tables; JPEG decode on
// the hardware decoders through nvJPEG, loaded at run time.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>

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

// The part of nvJPEG's C API used here (nvjpeg.h, CUDA 11 to 13; enums passed as int), resolved
// from the shared library at run time.
namespace nvjpeg {

struct HandleTag;
struct StateTag;
using Handle = HandleTag*;
using State = StateTag*;
struct Image {
  unsigned char* channel[4];
  size_t pitch[4];
};
constexpr int kSuccess = 0;
constexpr int kBackendHardware = 3;
constexpr int kOutputY = 2;
constexpr int kOutputRgbInterleaved = 5;
constexpr int kOutputBgrInterleaved = 6;

struct Api {
  int (*create_ex)(int backend, void* device_allocator, void* pinned_allocator, unsigned flags,
                   Handle* handle) = nullptr;
  int (*destroy)(Handle handle) = nullptr;
  int (*state_create)(Handle handle, State* state) = nullptr;
  int (*state_destroy)(State state) = nullptr;
  int (*batched_initialize)(Handle handle, State state, int batch_size, int max_cpu_threads,
                            int output_format) = nullptr;
  int (*decode_batched)(Handle handle, State state, const unsigned char* const* data,
                        const size_t* lengths, Image* destinations, cudaStream_t stream) = nullptr;
};

// The library and a probe of the hardware backend, once per process.
struct Loaded {
  Api api;
  bool hardware = false;
  std::string why_not;
};

const Loaded& loaded() {
  static const Loaded result = [] {
    Loaded l;
    void* lib = nullptr;
    for (const char* name : {"libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so"}) {
      lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib) break;
    }
    if (!lib) {
      l.why_not = "nvJPEG (libnvjpeg.so.13 or .12) is not installed";
      return l;
    }
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      return fn != nullptr;
    };
    if (!get(l.api.create_ex, "nvjpegCreateEx") || !get(l.api.destroy, "nvjpegDestroy") ||
        !get(l.api.state_create, "nvjpegJpegStateCreate") ||
        !get(l.api.state_destroy, "nvjpegJpegStateDestroy") ||
        !get(l.api.batched_initialize, "nvjpegDecodeBatchedInitialize") ||
        !get(l.api.decode_batched, "nvjpegDecodeBatched")) {
      l.why_not = "the nvJPEG library lacks the batched decode API";
      return l;
    }
    Handle handle = nullptr;
    const int status = l.api.create_ex(kBackendHardware, nullptr, nullptr, 0, &handle);
    if (status != kSuccess) {
      l.why_not =
          fmt::format("this GPU has no hardware JPEG decoder nvJPEG can use (status {})", status);
      return l;
    }
    l.api.destroy(handle);
    l.hardware = true;
    return l;
  }();
  return result;
}

}  // namespace nvjpeg

}  // namespace

bool gpu_jpeg_decoder_available(std::string* why_not) {
  // Asked once per sample by the workers: probed once, since every CUDA call takes the runtime's
  // locks that the GPU stage needs.
  static const std::pair<bool, std::string> probe = []() -> std::pair<bool, std::string> {
    if (list_gpus().empty()) return {false, "no GPU"};
    const nvjpeg::Loaded& l = nvjpeg::loaded();
    return {l.hardware, l.why_not};
  }();
  if (why_not) *why_not = probe.second;
  return probe.first;
}

struct GpuStream::Impl {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaMemPool_t pool = nullptr;
  PinnedBuffer staging;
  PinnedBuffer jobs;
  size_t jobs_used = 0;
  nvjpeg::Handle jpeg = nullptr;  // created at the first decode
  nvjpeg::State jpeg_state = nullptr;
  int jpeg_batch = 0;
  int jpeg_format = -1;
  ThreadPool* copy_pool = nullptr;

  ~Impl() {
    if (stream) cudaStreamSynchronize(stream);
    if (jpeg_state) nvjpeg::loaded().api.state_destroy(jpeg_state);
    if (jpeg) nvjpeg::loaded().api.destroy(jpeg);
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

// Marks a batch as made on this stream's GPU and stream.
void stamp(const std::shared_ptr<GpuStream::Impl>& impl, GpuImages* images) {
  images->device = impl->device;
  images->stream = impl->stream;
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
  impl->device = device;
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
  stamp(impl_, &out);
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

Status copy_to_host(const GpuImages& images, void* host, size_t bytes) {
  auto* dst = static_cast<uint8_t*>(host);
  size_t at = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    const size_t n = static_cast<size_t>(images.shapes[i].numel()) * dtype_size(images.dtype);
    KILN_CHECK(at + n <= bytes, "copy_to_host: host buffer too small");
    KILN_RETURN_IF_ERROR(cuda_status(
        cudaMemcpy(dst + at, static_cast<const uint8_t*>(images.data.get()) + images.offsets[i], n,
                   cudaMemcpyDeviceToHost),
        "copying a batch from the GPU"));
    at += n;
  }
  return Status();
}

Status release_after(const GpuImages& images, uintptr_t consumer_stream) {
  if (images.stream == nullptr) return Status();
  const auto consumer = consumer_stream == 0 || consumer_stream == 1 ? cudaStreamLegacy
                        : consumer_stream == 2                       ? cudaStreamPerThread
                                               : reinterpret_cast<cudaStream_t>(consumer_stream);
  cudaEvent_t done = nullptr;
  KILN_RETURN_IF_ERROR(
      cuda_status(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "creating an event"));
  Status s = cuda_status(cudaEventRecord(done, consumer), "marking the consumer's stream");
  if (s.ok()) {
    s = cuda_status(cudaStreamWaitEvent(static_cast<cudaStream_t>(images.stream), done, 0),
                    "ordering the release after the consumer");
  }
  cudaEventDestroy(done);  // released once the wait is satisfied
  return s;
}

void GpuStream::set_copy_pool(ThreadPool* pool) {
  impl_->copy_pool = pool;
}

Result<GpuImages> GpuStream::decode_jpeg(std::span<const Tensor> encoded,
                                         std::span<const GpuStep> steps, JpegOutput output) {
  KILN_CHECK(encoded.size() == steps.size(), "GpuStream::decode_jpeg: one step per image");
  const int64_t channels = output == JpegOutput::kGray ? 1 : 3;
  GpuImages out;
  out.dtype = DType::kU8;
  std::vector<Tensor> uploads;
  std::vector<size_t> on_gpu;
  for (size_t i = 0; i < steps.size(); ++i) {
    const GpuStep& step = steps[i];
    out.shapes.push_back(step.host.defined() ? step.host.shape()
                                             : Shape{step.out_height, step.out_width, channels});
    if (step.host.defined()) {
      uploads.push_back(step.host);
    } else {
      on_gpu.push_back(i);
    }
  }
  out.bytes = pack(out.shapes, out.dtype, &out.offsets);
  stamp(impl_, &out);
  KILN_ASSIGN_OR_RETURN(out.data, allocate(impl_, out.bytes));
  auto* base = static_cast<uint8_t*>(out.data.get());
  if (!uploads.empty()) {
    // The CPU-decoded images: one staged copy each into their places.
    KILN_ASSIGN_OR_RETURN(GpuImages staged, upload(uploads, impl_->copy_pool));
    size_t k = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
      if (!steps[i].host.defined()) continue;
      KILN_RETURN_IF_ERROR(cuda_status(
          cudaMemcpyAsync(base + out.offsets[i],
                          static_cast<const uint8_t*>(staged.data.get()) + staged.offsets[k],
                          static_cast<size_t>(out.shapes[i].numel()), cudaMemcpyDeviceToDevice,
                          impl_->stream),
          "placing a CPU-decoded image"));
      ++k;
    }
  }
  if (on_gpu.empty()) return out;
  const nvjpeg::Loaded& lib = nvjpeg::loaded();
  if (!lib.hardware) {
    return unavailable_error(fmt::format("pipeline on the GPU: JPEG decode: {}", lib.why_not));
  }
  const int format = output == JpegOutput::kGray  ? nvjpeg::kOutputY
                     : output == JpegOutput::kBGR ? nvjpeg::kOutputBgrInterleaved
                                                  : nvjpeg::kOutputRgbInterleaved;
  auto jpeg_status = [](int status, std::string_view what) -> Status {
    if (status == nvjpeg::kSuccess) return Status();
    return unavailable_error(fmt::format(
        "pipeline on the GPU: JPEG decode: {} failed (nvJPEG status {})", what, status));
  };
  if (impl_->jpeg == nullptr) {
    KILN_RETURN_IF_ERROR(
        jpeg_status(lib.api.create_ex(nvjpeg::kBackendHardware, nullptr, nullptr, 0, &impl_->jpeg),
                    "creating the hardware decoder"));
    KILN_RETURN_IF_ERROR(
        jpeg_status(lib.api.state_create(impl_->jpeg, &impl_->jpeg_state), "creating its state"));
  }
  const int n = static_cast<int>(on_gpu.size());
  if (n != impl_->jpeg_batch || format != impl_->jpeg_format) {
    KILN_RETURN_IF_ERROR(
        jpeg_status(lib.api.batched_initialize(impl_->jpeg, impl_->jpeg_state, n, 1, format),
                    "initializing a batch"));
    impl_->jpeg_batch = n;
    impl_->jpeg_format = format;
  }
  std::vector<const unsigned char*> data;
  std::vector<size_t> lengths;
  std::vector<nvjpeg::Image> images(on_gpu.size(), nvjpeg::Image{});
  for (size_t k = 0; k < on_gpu.size(); ++k) {
    const size_t i = on_gpu[k];
    data.push_back(static_cast<const unsigned char*>(encoded[i].raw_data()));
    lengths.push_back(encoded[i].nbytes());
    images[k].channel[0] = base + out.offsets[i];
    images[k].pitch[0] = static_cast<size_t>(steps[i].out_width * channels);
  }
  const int status = lib.api.decode_batched(impl_->jpeg, impl_->jpeg_state, data.data(),
                                            lengths.data(), images.data(), impl_->stream);
  if (status != nvjpeg::kSuccess) {
    impl_->jpeg_batch = 0;  // a failed batch needs a fresh initialize
    return jpeg_status(status, fmt::format("decoding a batch of {} images", n));
  }
  return out;
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

// Copies a table (jobs, per-image constants) into the pinned arena and from there into device
// memory, in stream order.
Result<std::shared_ptr<void>> upload_table(const std::shared_ptr<GpuStream::Impl>& impl,
                                           const void* data, size_t bytes) {
  if (impl->jobs_used + bytes > impl->jobs.capacity) {
    KILN_RETURN_IF_ERROR(cuda_status(cudaStreamSynchronize(impl->stream), "running the batch"));
    impl->jobs_used = 0;
    KILN_RETURN_IF_ERROR(impl->jobs.reserve(bytes));
  }
  void* host = static_cast<uint8_t*>(impl->jobs.data) + impl->jobs_used;
  impl->jobs_used += (bytes + 63) / 64 * 64;
  std::memcpy(host, data, bytes);
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<void> device, allocate(impl, static_cast<int64_t>(bytes)));
  KILN_RETURN_IF_ERROR(
      cuda_status(cudaMemcpyAsync(device.get(), host, bytes, cudaMemcpyHostToDevice, impl->stream),
                  "copying a table to the GPU"));
  return device;
}

Result<std::shared_ptr<void>> upload_jobs(const std::shared_ptr<GpuStream::Impl>& impl,
                                          const std::vector<cuda::ImageJob>& jobs) {
  return upload_table(impl, jobs.data(), jobs.size() * sizeof(cuda::ImageJob));
}

// What a launcher gets: the job table and the per-image table in device memory, the image count
// and the bounds of every output.
struct Grid {
  const cuda::ImageJob* jobs = nullptr;
  const void* table = nullptr;
  int count = 0;
  int max_height = 0;
  int max_width = 0;
};

// Plans `steps` over `in` into outputs of `dtype` (CHW when `chw`), allocates them, uploads the
// job table and `table` (per-image constants, may be empty), then enqueues `launch(grid, out)`.
template <class Fn>
Result<GpuImages> run_steps(const std::shared_ptr<GpuStream::Impl>& impl, const GpuImages& in,
                            std::span<const GpuStep> steps, DType dtype, bool chw,
                            std::span<const std::byte> table, Fn&& launch) {
  GpuImages out;
  stamp(impl, &out);
  KILN_ASSIGN_OR_RETURN(Launch planned, plan(in, steps, dtype, chw, &out));
  KILN_ASSIGN_OR_RETURN(out.data, allocate(impl, out.bytes));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<void> jobs, upload_jobs(impl, planned.jobs));
  std::shared_ptr<void> tables;
  if (!table.empty()) {
    KILN_ASSIGN_OR_RETURN(tables, upload_table(impl, table.data(), table.size()));
  }
  const Grid grid{static_cast<const cuda::ImageJob*>(jobs.get()), tables.get(),
                  static_cast<int>(planned.jobs.size()), planned.max_height, planned.max_width};
  KILN_RETURN_IF_ERROR(launch(grid, out));
  return out;
}

}  // namespace

Result<GpuImages> GpuStream::resize(const GpuImages& in, std::span<const GpuStep> steps,
                                    Interp interp) {
  KILN_CHECK(in.dtype == DType::kU8, "GpuStream::resize: uint8 images only");
  return run_steps(impl_, in, steps, DType::kU8, false, {}, [&](const Grid& g, GpuImages& out) {
    return cuda::resize_u8_cuda(static_cast<const uint8_t*>(in.data.get()),
                                static_cast<uint8_t*>(out.data.get()), g.jobs, g.count,
                                g.max_height, g.max_width, interp, impl_->stream);
  });
}

Result<GpuImages> GpuStream::crop_flip(const GpuImages& in, std::span<const GpuStep> steps) {
  return run_steps(impl_, in, steps, in.dtype, false, {}, [&](const Grid& g, GpuImages& out) {
    return cuda::crop_flip_cuda(in.data.get(), out.data.get(), g.jobs, g.count, g.max_height,
                                g.max_width, static_cast<int>(dtype_size(in.dtype)), impl_->stream);
  });
}

Result<GpuImages> GpuStream::crop_mirror_normalize(const GpuImages& in,
                                                   std::span<const GpuStep> steps,
                                                   std::span<const float> mean,
                                                   std::span<const float> stddev, Layout layout,
                                                   DType dtype) {
  KILN_CHECK(in.dtype == DType::kU8, "GpuStream::crop_mirror_normalize: uint8 images only");
  cuda::NormalizeConstants k;
  for (size_t ch = 0; ch < cuda::kMaxGpuChannels; ++ch) {
    k.mean[ch] = mean.size() == 1 ? mean[0] : ch < mean.size() ? mean[ch] : 0.0f;
    k.scale[ch] = 1.0f / (stddev.size() == 1 ? stddev[0] : ch < stddev.size() ? stddev[ch] : 1.0f);
  }
  return run_steps(
      impl_, in, steps, dtype, layout == Layout::kCHW, {}, [&](const Grid& g, GpuImages& out) {
        return cuda::crop_mirror_normalize_u8_cuda(static_cast<const uint8_t*>(in.data.get()),
                                                   out.data.get(), g.jobs, g.count, g.max_height,
                                                   g.max_width, k, layout, dtype, impl_->stream);
      });
}

Result<GpuImages> GpuStream::apply_lut(const GpuImages& in, std::span<const GpuStep> steps) {
  KILN_CHECK(in.dtype == DType::kU8, "GpuStream::apply_lut: uint8 images only");
  std::vector<uint8_t> luts;
  for (const GpuStep& step : steps) {
    KILN_CHECK(step.lut.size() == 256, "GpuStream::apply_lut: a table per image");
    luts.insert(luts.end(), step.lut.begin(), step.lut.end());
  }
  return run_steps(impl_, in, steps, DType::kU8, false, std::as_bytes(std::span(luts)),
                   [&](const Grid& g, GpuImages& out) {
                     return cuda::lut_u8_cuda(static_cast<const uint8_t*>(in.data.get()),
                                              static_cast<uint8_t*>(out.data.get()), g.jobs,
                                              static_cast<const uint8_t*>(g.table), g.count,
                                              g.max_height, g.max_width, impl_->stream);
                   });
}

Result<GpuImages> GpuStream::color_matrix(const GpuImages& in, std::span<const GpuStep> steps) {
  KILN_CHECK(in.dtype == DType::kU8, "GpuStream::color_matrix: uint8 images only");
  for (const Shape& shape : in.shapes) {
    KILN_CHECK(shape.rank() == 3 && shape[2] == 3, "GpuStream::color_matrix: RGB images only");
  }
  std::vector<float> matrices;
  for (const GpuStep& step : steps) {
    matrices.insert(matrices.end(), step.matrix.m.begin(), step.matrix.m.end());
    matrices.insert(matrices.end(), step.matrix.offset.begin(), step.matrix.offset.end());
  }
  return run_steps(impl_, in, steps, DType::kU8, false, std::as_bytes(std::span(matrices)),
                   [&](const Grid& g, GpuImages& out) {
                     return cuda::color_matrix_u8_cuda(static_cast<const uint8_t*>(in.data.get()),
                                                       static_cast<uint8_t*>(out.data.get()),
                                                       g.jobs, static_cast<const float*>(g.table),
                                                       g.count, g.max_height, g.max_width,
                                                       impl_->stream);
                   });
}

Result<GpuImages> GpuStream::warp(const GpuImages& in, std::span<const GpuStep> steps) {
  KILN_CHECK(in.dtype == DType::kU8, "GpuStream::warp: uint8 images only");
  std::vector<double> warps;
  for (const GpuStep& step : steps) {
    warps.insert(warps.end(), step.affine.begin(), step.affine.end());
    warps.push_back(step.linear ? 1.0 : 0.0);
    warps.push_back(step.fill);
  }
  return run_steps(impl_, in, steps, DType::kU8, false, std::as_bytes(std::span(warps)),
                   [&](const Grid& g, GpuImages& out) {
                     return cuda::warp_u8_cuda(static_cast<const uint8_t*>(in.data.get()),
                                               static_cast<uint8_t*>(out.data.get()), g.jobs,
                                               static_cast<const double*>(g.table), g.count,
                                               g.max_height, g.max_width, impl_->stream);
                   });
}

Result<GpuImages> GpuStream::blur(const GpuImages& in, std::span<const GpuStep> steps) {
  KILN_CHECK(in.dtype == DType::kU8, "GpuStream::blur: uint8 images only");
  // The table: {first tap, tap count} per image, then every image's taps.
  std::vector<int32_t> index;
  std::vector<float> taps;
  for (const GpuStep& step : steps) {
    KILN_CHECK(step.taps.size() % 2 == 1, "GpuStream::blur: an odd number of taps per image");
    index.push_back(static_cast<int32_t>(taps.size()));
    index.push_back(static_cast<int32_t>(step.taps.size()));
    taps.insert(taps.end(), step.taps.begin(), step.taps.end());
  }
  std::vector<std::byte> table(index.size() * sizeof(int32_t) + taps.size() * sizeof(float));
  std::memcpy(table.data(), index.data(), index.size() * sizeof(int32_t));
  std::memcpy(table.data() + index.size() * sizeof(int32_t), taps.data(),
              taps.size() * sizeof(float));
  return run_steps(impl_, in, steps, DType::kU8, false, table, [&](const Grid& g, GpuImages& out) {
    // The vertical pass's floats, image i at 4x its output's byte offset.
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<void> scratch,
                          allocate(impl_, out.bytes * static_cast<int64_t>(sizeof(float))));
    return cuda::blur_u8_cuda(static_cast<const uint8_t*>(in.data.get()),
                              static_cast<uint8_t*>(out.data.get()),
                              static_cast<float*>(scratch.get()), g.jobs, g.table, g.count,
                              g.max_height, g.max_width, impl_->stream);
  });
}

namespace {

// Noise of `kind` (a launcher) with each step's draws.
template <class Launcher>
Result<GpuImages> run_noise(const std::shared_ptr<GpuStream::Impl>& impl, const GpuImages& in,
                            std::span<const GpuStep> steps, Launcher launcher) {
  KILN_CHECK(in.dtype == DType::kU8, "GpuStream: noise on uint8 images only");
  std::vector<cuda::NoiseParams> params;
  int64_t max_elements = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    params.push_back(cuda::NoiseParams{steps[i].seed, steps[i].noise_a, steps[i].noise_b,
                                       steps[i].per_channel ? 1 : 0});
    max_elements = std::max(max_elements, in.shapes[i].numel());
  }
  return run_steps(impl, in, steps, DType::kU8, false, std::as_bytes(std::span(params)),
                   [&](const Grid& g, GpuImages& out) {
                     return launcher(static_cast<const uint8_t*>(in.data.get()),
                                     static_cast<uint8_t*>(out.data.get()), g.jobs,
                                     static_cast<const cuda::NoiseParams*>(g.table), g.count,
                                     max_elements, impl->stream);
                   });
}

}  // namespace

Result<GpuImages> GpuStream::gaussian_noise(const GpuImages& in, std::span<const GpuStep> steps) {
  return run_noise(impl_, in, steps, cuda::gaussian_noise_u8_cuda);
}

Result<GpuImages> GpuStream::salt_and_pepper(const GpuImages& in, std::span<const GpuStep> steps) {
  return run_noise(impl_, in, steps, cuda::salt_and_pepper_u8_cuda);
}

Result<GpuImages> GpuStream::pad(const GpuImages& in, std::span<const GpuStep> steps, double fill) {
  KILN_CHECK(in.dtype == DType::kU8 || in.dtype == DType::kF32,
             "GpuStream::pad: uint8 or float32 images only");
  // The fill as the element's bits, rounded and saturated for uint8 as kernels/warp.h does.
  const uint32_t bits = in.dtype == DType::kU8
                            ? static_cast<uint32_t>(std::clamp(std::round(fill), 0.0, 255.0))
                            : std::bit_cast<uint32_t>(static_cast<float>(fill));
  return run_steps(impl_, in, steps, in.dtype, false, {}, [&](const Grid& g, GpuImages& out) {
    return cuda::pad_cuda(in.data.get(), out.data.get(), g.jobs, g.count, g.max_height, g.max_width,
                          static_cast<int>(dtype_size(in.dtype)), bits, impl_->stream);
  });
}

Result<GpuImages> GpuStream::cast(const GpuImages& in, DType dtype) {
  if (in.dtype == dtype) return in;
  GpuImages out;
  out.dtype = dtype;
  out.shapes = in.shapes;
  out.bytes = pack(out.shapes, dtype, &out.offsets);
  stamp(impl_, &out);
  std::vector<cuda::ImageJob> jobs;
  int64_t max_elements = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t n = in.shapes[i].numel();
    if (n > std::numeric_limits<int32_t>::max()) {
      return invalid_argument_error(fmt::format(
          "pipeline on the GPU: cast takes tensors of at most 2^31 - 1 elements, got {}",
          in.shapes[i].to_string()));
    }
    cuda::ImageJob job;
    job.src_offset = in.offsets[i];
    job.dst_offset = out.offsets[i];
    job.src_height = 1;
    job.src_width = static_cast<int32_t>(n);
    jobs.push_back(job);
    max_elements = std::max(max_elements, n);
  }
  if (jobs.size() > 65535) {
    return invalid_argument_error(fmt::format(
        "pipeline on the GPU: a batch holds at most 65535 images, got {}", jobs.size()));
  }
  KILN_ASSIGN_OR_RETURN(out.data, allocate(impl_, out.bytes));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<void> table, upload_jobs(impl_, jobs));
  KILN_RETURN_IF_ERROR(cuda::cast_cuda(
      in.data.get(), out.data.get(), static_cast<const cuda::ImageJob*>(table.get()),
      static_cast<int>(jobs.size()), max_elements, in.dtype, dtype, impl_->stream));
  return out;
}

}  // namespace kiln::pipeline::kernels
