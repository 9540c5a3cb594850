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
  if(KILN_SANITIZE MATCHES "undefined")
    # UBSan's vptr check probes memory through a pipe: in a process out of file descriptors (the
    # server tests make one on purpose) it reports a valid object as having an invalid vptr.
    add_compile_options(-fno-sanitize=vptr)
  endif()
  if(KILN_SANITIZE MATCHES "thread")
    # Protobuf adds members to MapFieldBase under __SANITIZE_THREAD__, which Debian's
    # libprotobuf.so (built without) disagrees with; Asio's acquire/release fences, which TSan does
    # not model, give way to its plain atomics and mutexes.
    add_compile_options(-U__SANITIZE_THREAD__)
    add_compile_definitions(BOOST_ASIO_DISABLE_STD_ATOMIC BOOST_ASIO_DISABLE_FENCED_BLOCK)
  endif()
endif()

# kiln_ubsan_ignorelist(TARGET...): under clang's UBSan, TARGETs (those that parse JSON with
# RapidJSON) skip the code cmake/ubsan_ignorelist.txt names. Debian's RapidJSON 1.1.0 adds to a
# null pointer on the first push of every parse (internal/stack.h), which clang reports and gcc
# does not: each fuzz target that parses JSON stopped on its first input.
function(kiln_ubsan_ignorelist)
  if(NOT KILN_SANITIZE MATCHES "undefined" OR NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    return()
  endif()
  foreach(target IN LISTS ARGN)
    if(NOT TARGET ${target})
      continue()
    endif()
    target_compile_options(${target} PRIVATE
                           -fsanitize-ignorelist=${PROJECT_SOURCE_DIR}/cmake/ubsan_ignorelist.txt)
  endforeach()
endfunction()

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

# kiln_sanitized_copy(TARGET SUFFIX [INSTRUMENT regex] FLAGS flag...)
# Declares TARGET<SUFFIX>, a copy of TARGET for sanitizer runs: the same objects, include folders,
# definitions and links, linked with FLAGS. Sources whose path matches INSTRUMENT (an unanchored
# regex; "." for all) are compiled again with FLAGS added; the others' objects are TARGET's own,
# not compiled twice. A link to a kiln target that already has a copy of that suffix (and a
# $<TARGET_FILE:> of one) is redirected to the copy; every other link stays, so the copy links the
# plain libraries below it. That is how only the code under test carries the instrumentation while
# the compiler below it is linked as built: ASan and UBSan accept uninstrumented code, as long as
# no library is linked twice, so copy a library only when no plain library depends on it.
# Per-source properties (set in TARGET's folder) are not carried over.
function(kiln_sanitized_copy target suffix)
  cmake_parse_arguments(ARG "" "INSTRUMENT" "FLAGS" ${ARGN})
  get_property(copied GLOBAL PROPERTY KILN_SANITIZED_COPIES${suffix})
  # Redirects the links and target-file references in the list named `var` to the copies.
  macro(kiln_redirect var)
    set(redirected)
    foreach(item IN LISTS ${var})
      foreach(t IN LISTS copied)
        if(item STREQUAL t)
          set(item ${t}${suffix})
        endif()
        string(REPLACE "<LINK_ONLY:${t}>" "<LINK_ONLY:${t}${suffix}>" item "${item}")
        string(REPLACE "<TARGET_FILE:${t}>" "<TARGET_FILE:${t}${suffix}>" item "${item}")
      endforeach()
      list(APPEND redirected "${item}")
    endforeach()
    set(${var} "${redirected}")
  endmacro()

  get_target_property(type ${target} TYPE)
  get_target_property(source_dir ${target} SOURCE_DIR)
  get_target_property(sources ${target} SOURCES)
  set(compiled)
  set(objects $<TARGET_OBJECTS:${target}>)
  if(DEFINED ARG_INSTRUMENT)
    foreach(s IN LISTS sources)
      if(s MATCHES "${ARG_INSTRUMENT}" AND s MATCHES "[.]cc$")
        if(NOT IS_ABSOLUTE "${s}")
          set(s "${source_dir}/${s}")
        endif()
        list(APPEND compiled "${s}")
      endif()
    endforeach()
    set(objects "$<FILTER:$<TARGET_OBJECTS:${target}>,EXCLUDE,${ARG_INSTRUMENT}>")
  endif()
  set(copy ${target}${suffix})
  if(type STREQUAL "EXECUTABLE")
    add_executable(${copy} ${compiled} ${objects})
  elseif(type STREQUAL "STATIC_LIBRARY")
    add_library(${copy} STATIC ${compiled} ${objects})
  else()
    message(FATAL_ERROR "kiln_sanitized_copy: ${target} is a ${type}; only executables and "
                        "static libraries are copied")
  endif()
  foreach(property INCLUDE_DIRECTORIES COMPILE_DEFINITIONS COMPILE_OPTIONS COMPILE_FEATURES
                   LINK_OPTIONS LINK_LIBRARIES INTERFACE_INCLUDE_DIRECTORIES
                   INTERFACE_SYSTEM_INCLUDE_DIRECTORIES INTERFACE_COMPILE_DEFINITIONS
                   INTERFACE_COMPILE_OPTIONS INTERFACE_LINK_LIBRARIES)
    get_target_property(value ${target} ${property})
    if(value)
      kiln_redirect(value)
      set_property(TARGET ${copy} PROPERTY ${property} "${value}")
    endif()
  endforeach()
  get_target_property(deps ${target} MANUALLY_ADDED_DEPENDENCIES)
  if(NOT deps)
    set(deps)
  endif()
  kiln_redirect(deps)
  add_dependencies(${copy} ${target} ${deps})  # the reused objects are built by ${target}
  target_compile_options(${copy} PRIVATE ${ARG_FLAGS})
  target_link_options(${copy} PRIVATE ${ARG_FLAGS})
  set_property(GLOBAL APPEND PROPERTY KILN_SANITIZED_COPIES${suffix} ${target})
endfunction()
