// SPDX-License-Identifier: Apache-2.0
// JPEG decoding: TurboJPEG for whole images, libjpeg crop/skip scanlines for windows.
#include <fmt/format.h>
#include <turbojpeg.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>

#include "pipeline/decoders/codecs.h"
#include "pipeline/kernels/buffer.h"

namespace kiln::pipeline::detail {
namespace {

// One TurboJPEG decompressor per thread, created on first use.
class TjHandle {
 public:
  TjHandle() : handle_(tjInitDecompress()) {}
  ~TjHandle() {
    if (handle_ != nullptr) tjDestroy(handle_);
  }
  TjHandle(const TjHandle&) = delete;
  TjHandle& operator=(const TjHandle&) = delete;
  tjhandle get() const { return handle_; }

 private:
  tjhandle handle_;
};

Result<tjhandle> thread_handle() {
  thread_local TjHandle handle;
  if (handle.get() == nullptr) {
    return internal_error(
        fmt::format("cannot create a TurboJPEG decompressor: {}", tjGetErrorStr2(nullptr)));
  }
  return handle.get();
}

int tj_pixel_format(ColorFormat color) {
  switch (color) {
    case ColorFormat::kRGB: return TJPF_RGB;
    case ColorFormat::kBGR: return TJPF_BGR;
    case ColorFormat::kGray: return TJPF_GRAY;
  }
  return TJPF_RGB;
}

J_COLOR_SPACE jpeg_color_space(ColorFormat color) {
  switch (color) {
    case ColorFormat::kRGB: return JCS_EXT_RGB;
    case ColorFormat::kBGR: return JCS_EXT_BGR;
    case ColorFormat::kGray: return JCS_GRAYSCALE;
  }
  return JCS_EXT_RGB;
}

Status jpeg_error(std::string_view path, std::string_view reason) {
  return data_loss_error(fmt::format("image \"{}\": corrupt or truncated JPEG: {}", path, reason));
}

// libjpeg reports errors through these callbacks; warnings (which libjpeg would let pass with
// gray-filled pixels, e.g. for a truncated file) are errors for us.
struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void on_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void on_emit_message(j_common_ptr cinfo, int level) {
  if (level < 0) on_error_exit(cinfo);
}

// The crop-decode request in the scaled image, with buffers the caller owns, so that the code
// between setjmp and longjmp holds no object with a destructor.
struct CropJob {
  const uint8_t* data;
  size_t size;
  J_COLOR_SPACE color_space;
  int channels;
  ScaleFactor scale;
  int64_t out_width;  // the scaled image size libjpeg must report
  int64_t out_height;
  kernels::Window window;  // in scaled pixels
  uint8_t* row;            // out_width * channels bytes
  uint8_t* out;            // window.height * window.width * channels bytes
};

// Returns false with err->message set on failure.
bool run_crop_job(const CropJob& job, ErrorManager* err) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&err->pub);
  err->pub.error_exit = on_error_exit;
  err->pub.emit_message = on_emit_message;
  err->message[0] = '\0';
  if (setjmp(err->jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, job.data, static_cast<unsigned long>(job.size));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = job.color_space;
  cinfo.scale_num = static_cast<unsigned>(job.scale.num);
  cinfo.scale_denom = static_cast<unsigned>(job.scale.denom);
  jpeg_start_decompress(&cinfo);
  if (cinfo.output_width != job.out_width || cinfo.output_height != job.out_height ||
      cinfo.output_components != job.channels) {
    std::snprintf(err->message, sizeof(err->message), "unexpected scaled size %ux%ux%d",
                  cinfo.output_width, cinfo.output_height, cinfo.output_components);
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  JDIMENSION x = static_cast<JDIMENSION>(job.window.x);
  JDIMENSION width = static_cast<JDIMENSION>(job.window.width);
  // Widens [x, x + width) to whole iMCU columns; the row then starts at the new x.
  jpeg_crop_scanline(&cinfo, &x, &width);
  const size_t skip = static_cast<size_t>(job.window.x - x) * job.channels;
  const size_t row_bytes = static_cast<size_t>(job.window.width) * job.channels;
  if (job.window.y > 0) jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(job.window.y));
  for (int64_t y = 0; y < job.window.height; ++y) {
    JSAMPROW row = job.row;
    if (jpeg_read_scanlines(&cinfo, &row, 1) != 1) {
      std::snprintf(err->message, sizeof(err->message), "no data for row %lld",
                    static_cast<long long>(job.window.y + y));
      jpeg_destroy_decompress(&cinfo);
      return false;
    }
    std::memcpy(job.out + static_cast<size_t>(y) * row_bytes, job.row + skip, row_bytes);
  }
  jpeg_destroy_decompress(&cinfo);
  return true;
}

}  // namespace

Result<ImageInfo> jpeg_info(std::span<const uint8_t> bytes, std::string_view path) {
  KILN_ASSIGN_OR_RETURN(tjhandle handle, thread_handle());
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(handle, bytes.data(), static_cast<unsigned long>(bytes.size()), &width,
                          &height, &subsamp, &colorspace) != 0) {
    return jpeg_error(path, tjGetErrorStr2(handle));
  }
  if (width <= 0 || height <= 0) {
    return jpeg_error(path, "no frame header (the data ends before the image)");
  }
  if (int64_t{width} * height > kMaxImagePixels) {
    return invalid_argument_error(
        fmt::format("image \"{}\": unsupported JPEG size {}x{}", path, width, height));
  }
  return ImageInfo{ImageFormat::kJpeg, width, height};
}

Result<Tensor> decode_jpeg(std::span<const uint8_t> bytes, std::string_view path,
                           const DecodeOptions& options) {
  KILN_ASSIGN_OR_RETURN(ImageInfo info, jpeg_info(bytes, path));
  KILN_ASSIGN_OR_RETURN(tjhandle handle, thread_handle());
  ScaleFactor scale =
      choose_jpeg_scale(info.width, info.height, options.min_width, options.min_height);
  const int64_t width = scale.apply(info.width), height = scale.apply(info.height);
  const int channels = color_channels(options.color);
  KILN_ASSIGN_OR_RETURN(
      Tensor out, kernels::allocate_uninitialized(DType::kU8, Shape{height, width, channels}));
  if (tjDecompress2(handle, bytes.data(), static_cast<unsigned long>(bytes.size()),
                    out.data<uint8_t>(), static_cast<int>(width), 0, static_cast<int>(height),
                    tj_pixel_format(options.color), TJFLAG_STOPONWARNING) != 0) {
    return jpeg_error(path, tjGetErrorStr2(handle));
  }
  return out;
}

Result<Tensor> decode_jpeg_window(std::span<const uint8_t> bytes, std::string_view path,
                                  const DecodeOptions& options, const kernels::Window& window) {
  KILN_ASSIGN_OR_RETURN(ImageInfo info, jpeg_info(bytes, path));
  ScaleFactor scale =
      choose_jpeg_scale(window.width, window.height, options.min_width, options.min_height);
  const int64_t width = scale.apply(info.width), height = scale.apply(info.height);
  kernels::Window scaled;
  scaled.x = window.x * scale.num / scale.denom;
  scaled.y = window.y * scale.num / scale.denom;
  scaled.width = std::min(scale.apply(window.width), width - scaled.x);
  scaled.height = std::min(scale.apply(window.height), height - scaled.y);
  const int channels = color_channels(options.color);
  KILN_ASSIGN_OR_RETURN(Tensor out, kernels::allocate_uninitialized(
                                        DType::kU8, Shape{scaled.height, scaled.width, channels}));
  std::vector<uint8_t> row(static_cast<size_t>(width) * channels);
  CropJob job{bytes.data(),
              bytes.size(),
              jpeg_color_space(options.color),
              channels,
              scale,
              width,
              height,
              scaled,
              row.data(),
              out.data<uint8_t>()};
  ErrorManager err;
  if (!run_crop_job(job, &err)) return jpeg_error(path, err.message);
  return out;
}

}  // namespace kiln::pipeline::detail
