// SPDX-License-Identifier: Apache-2.0
// What the binding files of the `kiln._kiln` extension share: errors, numpy and DLPack interop.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <utility>

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

void bind_compiler(py::module_& m);
void bind_builder(py::module_& m);
void bind_pipeline(py::module_& m);

// kiln.module (builder.cc): the main module of `program` (a kiln.program), editing `graph` until
// the program is compiled.
py::object main_module(const py::object& program, std::shared_ptr<compiler::Graph> graph);

}  // namespace kiln::python
