# SPDX-License-Identifier: Apache-2.0
# Finds kiln's dependencies: all Debian packages (scripts/setup installs them), nothing downloaded.

find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Protobuf REQUIRED)
find_package(ONNX REQUIRED)
# The server: Boost.Beast/Asio (header-only) for HTTP, RapidJSON for JSON; toml++ is used
# header-only by server/core/model_config.cc.
find_package(Boost 1.81 REQUIRED)
find_package(RapidJSON REQUIRED)
# gRPC for the KServe v2 gRPC transport: Debian's libgrpc++-dev ships a pkg-config file (its CMake
# config is incomplete), and protobuf-compiler-grpc the protoc plugin.
find_package(PkgConfig REQUIRED)
pkg_check_modules(KILN_GRPCPP REQUIRED IMPORTED_TARGET grpc++)
# RE2 for the RegexFullMatch op (RE2 syntax is the op's definition).
pkg_check_modules(KILN_RE2 REQUIRED IMPORTED_TARGET re2)
find_program(KILN_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
if(KILN_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
if(KILN_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()

find_package(Python3 COMPONENTS Interpreter)
# Debian's interpreter is the one with numpy, torch and onnx; another python3 may come first on PATH.
if(EXISTS /usr/bin/python3)
  set(KILN_PYTHON /usr/bin/python3 CACHE FILEPATH "Python interpreter with numpy, onnx and torch")
else()
  set(KILN_PYTHON ${Python3_EXECUTABLE} CACHE FILEPATH "Python interpreter with numpy, onnx and torch")
endif()

# CUDA is optional: the CUDA parts build for sm_90 when nvcc is present and are left out otherwise.
set(KILN_HAVE_CUDA OFF)
if(NOT KILN_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES 90)
    enable_language(CUDA)
    # CMake 3.25 does not know nvcc 13's C++20 flag; tell it.
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA_STANDARD 20)
    # nvcc's front end warns on [[nodiscard]] class types returned by value (#2810); they are meant.
    set(CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS} -diag-suppress 2810")
    find_package(CUDAToolkit REQUIRED)
    set(KILN_HAVE_CUDA ON)
    message(STATUS "kiln: CUDA parts enabled (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, sm_90)")
  elseif(KILN_CUDA STREQUAL "ON")
    message(FATAL_ERROR "kiln: KILN_CUDA=ON but no nvcc was found; install the CUDA toolkit or set KILN_CUDA=AUTO")
  else()
    message(STATUS "kiln: nvcc not found, CUDA parts are left out")
  endif()
endif()

# The Python bindings: pybind11 (Debian's pybind11-dev) built against KILN_PYTHON's headers.
set(Python3_EXECUTABLE ${KILN_PYTHON})
find_package(Python3 COMPONENTS Interpreter Development.Module REQUIRED)
find_package(pybind11 CONFIG REQUIRED)
