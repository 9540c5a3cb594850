// SPDX-License-Identifier: Apache-2.0
// Errors as Python exceptions, and tensors to and from numpy arrays and DLPack capsules.
#include <fmt/format.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "python/src/bindings.h"

namespace kiln::python {

using namespace pybind11::literals;

namespace {

PyObject* g_kiln_error = nullptr;
PyObject* g_not_implemented_error = nullptr;

// The DLPack ABI (dlpack.h v0.8), declared here: Debian has no dlpack package.
enum DLDeviceType : int32_t { kDLCPU = 1 };
enum DLDataTypeCode : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4 };
struct DLDevice {
  DLDeviceType device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

// What a DLManagedTensor owns: the tensor (its storage) and the shape/strides arrays.
struct DLPackContext {
  Tensor tensor;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensor managed{};
};

void delete_dlpack_context(DLManagedTensor* self) {
  delete static_cast<DLPackContext*>(self->manager_ctx);
}

Result<DLDataType> dlpack_dtype(DType dtype) {
  const auto bits = static_cast<uint8_t>(dtype_size(dtype) * 8);
  if (dtype_is_float(dtype)) {
    return DLDataType{dtype == DType::kBF16 ? uint8_t{kDLBfloat} : uint8_t{kDLFloat}, bits, 1};
  }
  if (dtype_is_integer(dtype)) {
    return DLDataType{dtype_is_signed(dtype) ? uint8_t{kDLInt} : uint8_t{kDLUInt}, bits, 1};
  }
  return unimplemented_error(fmt::format(
      "dlpack: {} tensors cannot be exported; convert them with numpy (np.asarray) instead",
      dtype_name(dtype)));
}

std::vector<py::ssize_t> byte_strides(const Tensor& tensor) {
  std::vector<py::ssize_t> strides(static_cast<size_t>(tensor.rank()));
  auto stride = static_cast<py::ssize_t>(dtype_size(tensor.dtype()));
  for (int i = tensor.rank() - 1; i >= 0; --i) {
    strides[static_cast<size_t>(i)] = stride;
    stride *= static_cast<py::ssize_t>(tensor.shape()[i]);
  }
  return strides;
}

}  // namespace

void register_errors(py::module_& m) {
  g_kiln_error = PyErr_NewExceptionWithDoc(
      "kiln.KilnError",
      "An error reported by kiln; str() is kiln's message and `code` its status code name.",
      PyExc_RuntimeError, nullptr);
  py::tuple bases = py::make_tuple(py::handle(g_kiln_error), py::handle(PyExc_NotImplementedError));
  g_not_implemented_error = PyErr_NewExceptionWithDoc(
      "kiln.KilnNotImplementedError", "A capability kiln does not have yet.", bases.ptr(), nullptr);
  m.add_object("KilnError", py::handle(g_kiln_error));
  m.add_object("KilnNotImplementedError", py::handle(g_not_implemented_error));
}

void raise_status(const Status& status) {
  KILN_CHECK(!status.ok(), "raise_status with an ok status");
  PyObject* type =
      status.code() == StatusCode::kUnimplemented ? g_not_implemented_error : g_kiln_error;
  py::object error = py::reinterpret_borrow<py::object>(type)(std::string(status.message()));
  error.attr("code") = std::string(status_code_name(status.code()));
  PyErr_SetObject(type, error.ptr());
  throw py::error_already_set();
}

Result<py::dtype> numpy_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32: return py::dtype("float32");
    case DType::kF16: return py::dtype("float16");
    case DType::kF64: return py::dtype("float64");
    case DType::kI8: return py::dtype("int8");
    case DType::kU8: return py::dtype("uint8");
    case DType::kI16: return py::dtype("int16");
    case DType::kU16: return py::dtype("uint16");
    case DType::kI32: return py::dtype("int32");
    case DType::kU32: return py::dtype("uint32");
    case DType::kI64: return py::dtype("int64");
    case DType::kU64: return py::dtype("uint64");
    case DType::kBool: return py::dtype("bool");
    case DType::kBF16:
    case DType::kString: break;
  }
  return unimplemented_error(
      fmt::format("numpy has no {} type; kiln converts it on output only", dtype_name(dtype)));
}

Tensor tensor_from_numpy(const py::handle& value, const std::string& what) {
  py::module_ np = py::module_::import("numpy");
  // A view when `value` already is a C-contiguous array; a copy otherwise (lists, strided views).
  auto array = py::reinterpret_borrow<py::array>(np.attr("ascontiguousarray")(value));
  if (!array.dtype().attr("isnative").cast<bool>()) {
    array = array.attr("astype")(array.dtype().attr("newbyteorder")("="));
  }
  const char kind = array.dtype().kind();
  const auto size = static_cast<size_t>(array.itemsize());
  std::optional<DType> dtype;
  if (kind == 'f') {
    dtype = size == 2 ? DType::kF16 : size == 4 ? DType::kF32 : size == 8 ? DType::kF64 : dtype;
  } else if (kind == 'i' || kind == 'u') {
    const bool s = kind == 'i';
    dtype = size == 1   ? (s ? DType::kI8 : DType::kU8)
            : size == 2 ? (s ? DType::kI16 : DType::kU16)
            : size == 4 ? (s ? DType::kI32 : DType::kU32)
            : size == 8 ? (s ? DType::kI64 : DType::kU64)
                        : dtype;
  } else if (kind == 'b') {
    dtype = DType::kBool;
  }
  if (!dtype) {
    raise_status(invalid_argument_error(
        fmt::format("{}: numpy dtype {} is not supported; pass float16/32/64, (u)int8-64 or bool "
                    "(convert with astype)",
                    what, py::str(array.dtype()).cast<std::string>())));
  }
  std::vector<int64_t> dims(static_cast<size_t>(array.ndim()));
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = array.shape(static_cast<py::ssize_t>(i));
  auto* owner = new py::object(array);
  std::shared_ptr<const void> keep(owner, [](const void* p) {
    py::gil_scoped_acquire gil;
    delete static_cast<const py::object*>(p);
  });
  return Tensor::wrap(*dtype, Shape(std::move(dims)), const_cast<void*>(array.data()),
                      std::move(keep));
}

py::object tensor_to_numpy(const Tensor& tensor) {
  if (tensor.dtype() == DType::kString) {
    py::list out;
    for (const std::string& s : tensor.span<std::string>()) out.append(py::str(s));
    return py::module_::import("numpy")
        .attr("array")(out, "dtype"_a = "object")
        .attr("reshape")(py::cast(tensor.shape().dims()));
  }
  if (tensor.dtype() == DType::kBF16) {
    py::array_t<float> out(tensor.shape().dims());
    float* dst = out.mutable_data();
    const BFloat16* src = tensor.data<BFloat16>();
    for (int64_t i = 0; i < tensor.numel(); ++i) dst[i] = static_cast<float>(src[i]);
    return out;
  }
  py::dtype dtype = unwrap(numpy_dtype(tensor.dtype()));
  auto* keep = new Tensor(tensor);
  py::capsule base(keep, [](void* p) { delete static_cast<Tensor*>(p); });
  std::vector<py::ssize_t> shape(tensor.shape().dims().begin(), tensor.shape().dims().end());
  void* data = tensor.raw_data();
  static char empty = 0;  // numpy wants a non-null pointer even for zero elements
  return py::array(dtype, shape, byte_strides(tensor), data ? data : &empty, base);
}

py::capsule tensor_to_dlpack(const Tensor& tensor) {
  DLDataType dtype = unwrap(dlpack_dtype(tensor.dtype()));
  auto* ctx = new DLPackContext{tensor, tensor.shape().dims(), {}, {}};
  ctx->strides.resize(ctx->shape.size());
  int64_t stride = 1;
  for (size_t i = ctx->shape.size(); i-- > 0;) {
    ctx->strides[i] = stride;
    stride *= ctx->shape[i];
  }
  DLTensor& dl = ctx->managed.dl_tensor;
  dl.data = tensor.raw_data();
  dl.device = DLDevice{kDLCPU, 0};
  dl.ndim = tensor.rank();
  dl.dtype = dtype;
  dl.shape = ctx->shape.data();
  dl.strides = ctx->strides.data();
  dl.byte_offset = 0;
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = delete_dlpack_context;
  // A consumer renames the capsule "used_dltensor" and calls the deleter itself; an unconsumed
  // capsule still named "dltensor" is freed here.
  return py::capsule(&ctx->managed, "dltensor", [](PyObject* capsule) {
    if (PyCapsule_IsValid(capsule, "dltensor")) {
      auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
      managed->deleter(managed);
    }
  });
}

}  // namespace kiln::python
