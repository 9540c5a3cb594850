// SPDX-License-Identifier: Apache-2.0
// The `kiln._kiln` extension module: the C++ parts the `kiln` Python package wraps.
#include "python/src/bindings.h"

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "kiln's C++ core; use it through the kiln package (import kiln).";
  kiln::python::register_errors(m);
  kiln::python::bind_compiler(m);
  kiln::python::bind_builder(m);
  kiln::python::bind_pipeline(m);
}
