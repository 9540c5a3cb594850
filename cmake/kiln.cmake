# SPDX-License-Identifier: Apache-2.0
# The helpers that declare every kiln target: libraries, tests and benchmarks.

if(NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(KILN_CCACHE ccache)
  if(KILN_CCACHE)
    set(CMAKE_C_COMPILER_LAUNCHER ${KILN_CCACHE})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${KILN_CCACHE})
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${KILN_CCACHE})
  endif()
endif()

set(KILN_WARNINGS -Wall -Wextra -Wpedantic -Wno-unused-parameter -Wno-missing-field-initializers)
if(KILN_WERROR)
  list(APPEND KILN_WARNINGS -Werror)
endif()

if(KILN_SANITIZE)
  add_compile_options(-fsanitize=${KILN_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${KILN_SANITIZE})
endif()

# Applies kiln's include root and warnings to a target.
function(kiln_target_defaults target)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${target} INTERFACE ${PROJECT_SOURCE_DIR})
    return()
  endif()
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${KILN_WARNINGS}>)
endfunction()

# kiln_add_library(NAME SOURCES a.cc b.cc DEPS kiln_core ... [PRIVATE_DEPS ...])
# A library with no sources is an interface target that still carries its dependencies, so the
# dependency direction between the parts is declared (and enforced) from the first day.
function(kiln_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  if(ARG_SOURCES)
    add_library(${name} STATIC ${ARG_SOURCES})
    target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  else()
    add_library(${name} INTERFACE)
    target_link_libraries(${name} INTERFACE ${ARG_DEPS})
  endif()
  kiln_target_defaults(${name})
endfunction()

# kiln_add_test(NAME SOURCES a_test.cc DEPS lib... [LABELS unit] [ENVIRONMENT K=V ...])
# One gtest binary; every test in it is registered with ctest under the given labels.
function(kiln_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS;ENVIRONMENT" ${ARGN})
  if(NOT KILN_BUILD_TESTS)
    return()
  endif()
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  # Compiled artifacts the tests cache (kiln run, the server) go under the build tree, not into
  # the user's cache directory; a test that sets KILN_CACHE_DIR itself keeps its own.
  if(NOT "${ARG_ENVIRONMENT}" MATCHES "KILN_CACHE_DIR=")
    list(APPEND ARG_ENVIRONMENT "KILN_CACHE_DIR=${PROJECT_BINARY_DIR}/test-cache")
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main Threads::Threads)
  kiln_target_defaults(${name})
  target_compile_definitions(${name} PRIVATE KILN_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                                             KILN_BINARY_DIR="${PROJECT_BINARY_DIR}")
  gtest_discover_tests(${name}
    DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT} ENVIRONMENT "${ARG_ENVIRONMENT}")
endfunction()

# kiln_add_bench(NAME SOURCES a_bench.cc DEPS lib...): a Google Benchmark binary (not a test).
function(kiln_add_bench name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  if(NOT KILN_BUILD_BENCH)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} benchmark::benchmark Threads::Threads)
  kiln_target_defaults(${name})
endfunction()
