// SPDX-License-Identifier: Apache-2.0
// Errors as Python exceptions, and tensors to and from numpy arrays and DLPack capsules.
#include <fmt/format.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "python/src/bindings.h"

namespace kiln::python {

using namespace pybind11::literals;

namespace {

PyObject* g_kiln_error = nullptr;
PyObject* g_not_implemented_error = nullptr;

// The DLPack ABI (dlpack.h v0.8 and v1.0's versioned tensor), declared here: Debian has no dlpack
// package.
enum DLDeviceType : int32_t { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 };
enum DLDataTypeCode : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6 };
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
struct DLManagedTensorVersioned {
  struct {
    uint32_t major;
    uint32_t minor;
  } version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;  // bit 0: read only
  DLTensor dl_tensor;
};
constexpr uint64_t kDLFlagReadOnly = 1;

// What a DLManagedTensor owns: the storage's owner, the shape/strides arrays, and what to do
// when the consumer releases it.
struct DLPackContext {
  std::shared_ptr<void> owner;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  std::function<void()> release;
  DLManagedTensor managed{};
};

void delete_dlpack_context(DLManagedTensor* self) {
  auto* ctx = static_cast<DLPackContext*>(self->manager_ctx);
  if (ctx->release) ctx->release();
  delete ctx;
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

std::string dlpack_device_name(int32_t type, int32_t id) {
  switch (type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return fmt::format("cuda:{}", id);
    case kDLCUDAHost: return "cuda pinned host";
    case kDLCUDAManaged: return fmt::format("cuda managed (device {})", id);
    default: return fmt::format("DLPack device type {} (device {})", type, id);
  }
}

std::optional<DType> dtype_from_dlpack(DLDataType t) {
  if (t.lanes != 1) return std::nullopt;
  const auto pick = [&](DType d8, DType d16, DType d32, DType d64) -> std::optional<DType> {
    switch (t.bits) {
      case 8: return d8;
      case 16: return d16;
      case 32: return d32;
      case 64: return d64;
      default: return std::nullopt;
    }
  };
  switch (t.code) {
    case kDLInt: return pick(DType::kI8, DType::kI16, DType::kI32, DType::kI64);
    case kDLUInt: return pick(DType::kU8, DType::kU16, DType::kU32, DType::kU64);
    case kDLFloat:
      if (t.bits == 16) return DType::kF16;
      if (t.bits == 32) return DType::kF32;
      if (t.bits == 64) return DType::kF64;
      return std::nullopt;
    case kDLBfloat: return t.bits == 16 ? std::optional<DType>(DType::kBF16) : std::nullopt;
    case kDLBool: return t.bits == 8 ? std::optional<DType>(DType::kBool) : std::nullopt;
    default: return std::nullopt;
  }
}

// A numpy array of `Out` holding the values of the narrow elements `src`.
template <class Out, class T>
py::array_t<Out> widened_array(const T* src, const Shape& shape) {
  py::array_t<Out> out(shape.dims());
  Out* dst = out.mutable_data();
  for (int64_t i = 0; i < shape.numel(); ++i) dst[i] = static_cast<Out>(src[i]);
  return out;
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
    default: break;  // the narrow types: converted on output (tensor_to_numpy)
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
  if (dtype_is_narrow(tensor.dtype())) {
    // numpy has no narrow types: the floats come out as float32 and the 4- and 2-bit integers as
    // int8 or uint8, all exact.
    return visit_dtype(tensor.dtype(), [&]<class T>() -> py::object {
      if constexpr (requires { T::kKind; }) {
        return widened_array<float>(tensor.data<T>(), tensor.shape());
      } else if constexpr (requires { T::kSigned; }) {
        using Out = std::conditional_t<T::kSigned, int8_t, uint8_t>;
        return widened_array<Out>(tensor.data<T>(), tensor.shape());
      } else {
        KILN_CHECK(false, "tensor_to_numpy: not a narrow type");
        return py::none();
      }
    });
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
  std::vector<int64_t> strides(static_cast<size_t>(tensor.rank()));
  int64_t stride = 1;
  for (size_t i = strides.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= tensor.shape()[static_cast<int>(i)];
  }
  return make_dlpack_capsule(tensor.raw_data(), kDLCPU, 0, tensor.dtype(), tensor.shape().dims(),
                             std::move(strides), std::make_shared<Tensor>(tensor));
}

py::capsule make_dlpack_capsule(void* data, int32_t device_type, int32_t device_id, DType dtype,
                                std::vector<int64_t> shape, std::vector<int64_t> strides,
                                std::shared_ptr<void> owner, std::function<void()> release) {
  DLDataType dl_dtype = unwrap(dlpack_dtype(dtype));
  auto* ctx = new DLPackContext{
      std::move(owner), std::move(shape), std::move(strides), std::move(release), {}};
  DLTensor& dl = ctx->managed.dl_tensor;
  dl.data = data;
  dl.device = DLDevice{static_cast<DLDeviceType>(device_type), device_id};
  dl.ndim = static_cast<int32_t>(ctx->shape.size());
  dl.dtype = dl_dtype;
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

DLPackView dlpack_view(const py::handle& value, const std::string& what) {
  DLPackView view;
  if (PyCapsule_CheckExact(value.ptr())) {
    view.capsule = py::reinterpret_borrow<py::object>(value);
  } else if (py::hasattr(value, "__dlpack__")) {
    // No stream: the caller has ordered the producer's work before the call (see bindings.h).
    view.capsule = value.attr("__dlpack__")();
  } else {
    raise_status(invalid_argument_error(fmt::format(
        "{}: a {} is not a DLPack tensor; pass a torch tensor (or any object with __dlpack__)",
        what, py::str(py::type::handle_of(value).attr("__name__")).cast<std::string>())));
  }
  const char* capsule_name = PyCapsule_GetName(view.capsule.ptr());
  const std::string name = capsule_name != nullptr ? capsule_name : "";
  DLTensor* dl = nullptr;
  if (name == "dltensor") {
    dl = &static_cast<DLManagedTensor*>(PyCapsule_GetPointer(view.capsule.ptr(), "dltensor"))
              ->dl_tensor;
  } else if (name == "dltensor_versioned") {
    auto* managed = static_cast<DLManagedTensorVersioned*>(
        PyCapsule_GetPointer(view.capsule.ptr(), "dltensor_versioned"));
    if (managed->version.major != 1) {
      raise_status(unimplemented_error(
          fmt::format("{}: DLPack version {}.{} is not supported; kiln reads 0.x and 1.x tensors",
                      what, managed->version.major, managed->version.minor)));
    }
    dl = &managed->dl_tensor;
    view.read_only = (managed->flags & kDLFlagReadOnly) != 0;
  } else {
    raise_status(invalid_argument_error(fmt::format(
        "{}: the capsule is named \"{}\", not \"dltensor\": it was consumed already or is no "
        "DLPack tensor; pass the tensor itself",
        what, name)));
  }
  view.device_type = dl->device.device_type;
  view.device_id = dl->device.device_id;
  view.device = dlpack_device_name(view.device_type, view.device_id);
  std::optional<DType> dtype = dtype_from_dlpack(dl->dtype);
  if (!dtype) {
    raise_status(invalid_argument_error(fmt::format(
        "{}: DLPack dtype (code {}, {} bits, {} lanes) has no kiln type; convert the tensor to "
        "float16/32/64, bfloat16, (u)int8-64 or bool",
        what, dl->dtype.code, dl->dtype.bits, dl->dtype.lanes)));
  }
  view.dtype = *dtype;
  view.shape.assign(dl->shape, dl->shape + dl->ndim);
  int64_t expected = 1;
  for (int i = dl->ndim - 1; dl->strides != nullptr && i >= 0; --i) {
    if (view.shape[static_cast<size_t>(i)] != 1 && dl->strides[i] != expected) {
      raise_status(invalid_argument_error(fmt::format(
          "{}: the tensor is not contiguous (shape [{}], strides [{}]); pass a contiguous one "
          "(torch: x.contiguous())",
          what, fmt::join(view.shape, ","), fmt::join(dl->strides, dl->strides + dl->ndim, ","))));
    }
    expected *= view.shape[static_cast<size_t>(i)];
  }
  view.data = static_cast<char*>(dl->data) + dl->byte_offset;
  return view;
}

}  // namespace kiln::python
