# SPDX-License-Identifier: Apache-2.0
# Fails when a file under DIR (the cuda target's kernels/) includes a quoted header that is neither
# core/'s nor one of DIR's own (their paths start with PREFIX): device code takes plain parameters,
# never the compiler's graph, op, pass or program types. CUDA and standard headers (<...>) are
# free. With SELF_TEST (a scratch folder) it first checks that it finds such an include there.
#   cmake -DDIR=compiler/targets/cuda/kernels -DPREFIX=compiler/targets/cuda/kernels/
#         [-DSELF_TEST=<scratch folder>] -P cmake/check_kernel_includes.cmake

# The files under `dir` that include a quoted header outside core/ and `prefix`, one
# "<file>:<line>: includes "<header>"" entry each, in `out`.
function(kiln_kernel_include_findings dir prefix out)
  file(GLOB_RECURSE files LIST_DIRECTORIES false ${dir}/*)
  list(SORT files)
  set(findings "")
  foreach(path ${files})
    file(STRINGS ${path} lines)
    set(number 0)
    foreach(line IN LISTS lines)
      math(EXPR number "${number} + 1")
      if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\"")
        set(header ${CMAKE_MATCH_1})
        string(FIND "${header}" "${prefix}" at_prefix)
        if(NOT header MATCHES "^core/" AND NOT at_prefix EQUAL 0)
          list(APPEND findings "${path}:${number}: includes \"${header}\"")
        endif()
      endif()
    endforeach()
  endforeach()
  set(${out} "${findings}" PARENT_SCOPE)
endfunction()

if(NOT DIR OR NOT PREFIX)
  message(FATAL_ERROR
    "check_kernel_includes: pass -DDIR=<kernels folder> -DPREFIX=<its include path>/")
endif()
if(NOT IS_DIRECTORY ${DIR})
  message(FATAL_ERROR "check_kernel_includes: ${DIR} is not a folder")
endif()

if(SELF_TEST)
  file(REMOVE_RECURSE ${SELF_TEST})
  file(WRITE ${SELF_TEST}/kernels/good.cu
    "#include <cuda_runtime.h>\n#include \"${PREFIX}types.h\"\n#include \"core/status.h\"\n")
  file(WRITE ${SELF_TEST}/kernels/bad.h
    "#pragma once\n#include \"${PREFIX}types.h\"\n  #  include \"compiler/ir/graph.h\"\n")
  kiln_kernel_include_findings(${SELF_TEST}/kernels ${PREFIX} found)
  list(LENGTH found count)
  if(NOT count EQUAL 1 OR NOT found MATCHES "bad\\.h:3: includes \"compiler/ir/graph\\.h\"")
    message(FATAL_ERROR "check_kernel_includes: the self-test expected one finding, "
      "bad.h:3 including compiler/ir/graph.h; it found ${count}: ${found}")
  endif()
endif()

kiln_kernel_include_findings(${DIR} ${PREFIX} findings)
if(findings)
  list(JOIN findings "\n  " lines)
  message(FATAL_ERROR "check_kernel_includes: kernel files include the compiler's headers (device "
    "code takes plain parameters; include only core/ and ${PREFIX}, pass the values in):\n"
    "  ${lines}")
endif()
message(STATUS "check_kernel_includes: ${DIR}: every include is core/ or ${PREFIX}")
