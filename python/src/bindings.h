// SPDX-License-Identifier: Apache-2.0
// What the binding files of the `kiln._kiln` extension share: errors, numpy and DLPack interop.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace kiln::compiler {
class Graph;
}  // namespace kiln::compiler

namespace kiln::python {

namespace py = pybind11;

// Creates kiln.KilnError (a RuntimeError) and kiln.KilnNotImplementedError (a KilnError and a
// NotImplementedError) in `m`. Called once, before any binding can raise.
void register_errors(py::module_& m);

// Raises the Python exception for `status` (KilnNotImplementedError for kUnimplemented, else
// KilnError); the exception's `code` attribute is the code's name ("INVALID_ARGUMENT").
[[noreturn]] void raise_status(const Status& status);

inline void check_ok(const Status& status) {
  if (!status.ok()) raise_status(status);
}

template <class T>
T unwrap(Result<T>&& result) {
  if (!result.ok()) raise_status(result.status());
  return std::move(result).value();
}

// A tensor viewing `array`'s memory when it is C-contiguous and of a dtype kiln has (the tensor
// keeps the array alive); otherwise a contiguous copy. `what` names the value in errors.
Tensor tensor_from_numpy(const py::handle& value, const std::string& what);

// A numpy array viewing `tensor`'s storage (no copy; the array keeps the storage alive). bf16
// becomes a float32 copy and string tensors a list of str.
py::object tensor_to_numpy(const Tensor& tensor);

// The numpy dtype of `dtype`, or an error naming it for the types numpy has no match for.
Result<py::dtype> numpy_dtype(DType dtype);

// `__dlpack__` and `__dlpack_device__` for a CPU tensor: a "dltensor" capsule that keeps the
// tensor's storage alive until the consumer releases it.
py::capsule tensor_to_dlpack(const Tensor& tensor);
// A "dltensor" capsule over `data` on DLPack device (`device_type`, `device_id`) with element
// `strides`, kept alive by `owner`; `release` (when set) runs when the consumer lets it go, before
// `owner` is dropped.
py::capsule make_dlpack_capsule(void* data, int32_t device_type, int32_t device_id, DType dtype,
                                std::vector<int64_t> shape, std::vector<int64_t> strides,
                                std::shared_ptr<void> owner, std::function<void()> release = {});

// A tensor another library exports through DLPack (torch's CUDA tensors, say), borrowed: `data`
// stays valid while `capsule` (and the producer's tensor) lives.
struct DLPackView {
  void* data = nullptr;
  int32_t device_type = 0;  // DLPack's: 1 cpu, 2 cuda, ...
  int32_t device_id = 0;
  std::string device;  // "cuda:0", for messages
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  bool read_only = false;
  py::object capsule;  // the producer's deleter runs when the last reference goes
};
inline constexpr int32_t kDLPackCuda = 2;

// The DLPack view of `value` (an object with `__dlpack__`, or a "dltensor" /
// "dltensor_versioned" capsule); raises KilnError naming `what` for other objects, dtypes kiln
// has no type for, and non-contiguous tensors. `__dlpack__` is called without a stream: the
// caller orders the producer's pending work before it reads the memory (for torch on CUDA,
// `torch.cuda.current_stream().synchronize()`).
DLPackView dlpack_view(const py::handle& value, const std::string& what);

void bind_compiler(py::module_& m);
void bind_builder(py::module_& m);
void bind_pipeline(py::module_& m);

// kiln.module (builder.cc): the main module of `program` (a kiln.program), editing `graph` until
// the program is compiled.
py::object main_module(const py::object& program, std::shared_ptr<compiler::Graph> graph);

}  // namespace kiln::python
