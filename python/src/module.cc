// SPDX-License-Identifier: Apache-2.0
// The `kiln._kiln` extension module: the C++ parts the `kiln` Python package wraps.
#include <string>

#include "core/env.h"
#include "core/logging.h"
#include "python/src/bindings.h"

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "kiln's C++ core; use it through the kiln package (import kiln).";
  // As the CLI refuses it, the package says so: a KILN_LOG_LEVEL it does not take would otherwise
  // leave logging at warnings without a word.
  if (const std::string level = kiln::env_flag_string(kiln::EnvFlag::kLogLevel); !level.empty()) {
    if (const std::string problem = kiln::log_level_problem(level); !problem.empty()) {
      const std::string message =
          "KILN_LOG_LEVEL=" + level + ": " + problem + "; kiln logs warnings and errors";
      if (PyErr_WarnEx(PyExc_RuntimeWarning, message.c_str(), 1) != 0)
        throw pybind11::error_already_set();
    }
  }
  kiln::python::register_errors(m);
  kiln::python::bind_compiler(m);
  kiln::python::bind_builder(m);
  kiln::python::bind_pipeline(m);
}
