# SPDX-License-Identifier: Apache-2.0
# Installing kiln: `cmake --install` lays out the libraries with exported CMake targets
# (find_package(kiln)), their headers, pkg-config files, the `kiln` CLI and the Python package;
# CPack turns the same tree into .deb packages (docs/deploy.md).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The libraries consumers name: kiln_<name> is exported as kiln::<name>. The kiln libraries they
# link (the compiler's layers, the generated protocol code) are found by walking their links and
# are installed and exported with them, so a new layer below these needs no change here.
set(KILN_EXPORTED_LIBRARIES
  kiln_core kiln_compiler kiln_pipeline kiln_server kiln_server_http kiln_server_grpc kiln_client)

set(KILN_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/kiln)
set(KILN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
set(KILN_INSTALL_PKGCONFIGDIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
set(KILN_INSTALL_PYTHONDIR lib/python3/dist-packages CACHE STRING
  "Folder of the kiln Python package, relative to the prefix (Debian's layout by default)")

# kiln_install_dependency(NAME ITEMS item... [FIND code] [DEB package...] [PKG_CONFIG module...]
#                         [LIBS flag...] [CFLAGS flag...])
# How a consumer of the installed libraries gets one thing they link: ITEMS are the link items
# (imported targets, library names or paths) as kiln's targets name them; FIND is the CMake code
# kilnConfig.cmake runs to define them; DEB the Debian packages kiln-dev depends on for them;
# PKG_CONFIG the modules and LIBS/CFLAGS the flags kiln's pkg-config files add for them.
function(kiln_install_dependency name)
  cmake_parse_arguments(ARG "" "FIND" "ITEMS;DEB;PKG_CONFIG;LIBS;CFLAGS" ${ARGN})
  set_property(GLOBAL APPEND PROPERTY KILN_INSTALL_DEPENDENCIES ${name})
  foreach(field ITEMS FIND DEB PKG_CONFIG LIBS CFLAGS)
    set_property(GLOBAL PROPERTY KILN_INSTALL_DEPENDENCY_${name}_${field} "${ARG_${field}}")
  endforeach()
endfunction()

# Every link item of an installed library must be one of these: configuring fails naming an item
# that is not, so a new dependency cannot leave kilnConfig.cmake or kiln-dev behind.
kiln_install_dependency(threads ITEMS Threads::Threads FIND "find_dependency(Threads)"
  LIBS -pthread)
kiln_install_dependency(fmt ITEMS fmt::fmt FIND "find_dependency(fmt)" DEB libfmt-dev
  PKG_CONFIG fmt)
kiln_install_dependency(protobuf ITEMS protobuf::libprotobuf FIND "find_dependency(Protobuf)"
  DEB libprotobuf-dev PKG_CONFIG protobuf)
kiln_install_dependency(onnx ITEMS onnx onnx_proto FIND "find_dependency(ONNX)" DEB libonnx-dev
  PKG_CONFIG protobuf LIBS -lonnx -lonnx_proto CFLAGS -DONNX_NAMESPACE=onnx -DONNX_ML=1)
kiln_install_dependency(re2 ITEMS PkgConfig::KILN_RE2
  FIND "find_dependency(PkgConfig)\npkg_check_modules(KILN_RE2 REQUIRED QUIET IMPORTED_TARGET re2)"
  DEB libre2-dev pkg-config PKG_CONFIG re2)
kiln_install_dependency(image_codecs ITEMS PkgConfig::KILN_IMAGE_CODECS
  FIND "find_dependency(PkgConfig)\npkg_check_modules(KILN_IMAGE_CODECS REQUIRED QUIET IMPORTED_TARGET spng libtiff-4 libwebp libopenjp2)"
  DEB libspng-dev libtiff-dev libwebp-dev libopenjp2-7-dev pkg-config
  PKG_CONFIG spng libtiff-4 libwebp libopenjp2)
kiln_install_dependency(spng ITEMS PkgConfig::SPNG
  FIND "find_dependency(PkgConfig)\npkg_check_modules(SPNG REQUIRED QUIET IMPORTED_TARGET spng)"
  DEB libspng-dev pkg-config PKG_CONFIG spng)
kiln_install_dependency(deflate ITEMS PkgConfig::DEFLATE
  FIND "find_dependency(PkgConfig)\npkg_check_modules(DEFLATE REQUIRED QUIET IMPORTED_TARGET libdeflate)"
  DEB libdeflate-dev pkg-config PKG_CONFIG libdeflate)
kiln_install_dependency(jpeg ITEMS libjpeg-turbo::turbojpeg libjpeg-turbo::jpeg
  FIND "find_dependency(libjpeg-turbo CONFIG)" DEB libturbojpeg0-dev libjpeg62-turbo-dev
  PKG_CONFIG libturbojpeg libjpeg)
kiln_install_dependency(hwy ITEMS hwy::hwy FIND "find_dependency(hwy CONFIG)" DEB libhwy-dev
  PKG_CONFIG libhwy)
kiln_install_dependency(dnnl ITEMS DNNL::dnnl FIND "find_dependency(dnnl CONFIG)"
  DEB libdnnl-dev ocl-icd-opencl-dev LIBS -ldnnl)
kiln_install_dependency(openmp ITEMS gomp LIBS -lgomp)
kiln_install_dependency(dl ITEMS ${CMAKE_DL_LIBS} LIBS -l${CMAKE_DL_LIBS})
kiln_install_dependency(boost ITEMS Boost::headers FIND "find_dependency(Boost 1.81)"
  DEB libboost1.81-dev)
kiln_install_dependency(openssl ITEMS OpenSSL::SSL OpenSSL::Crypto FIND "find_dependency(OpenSSL)"
  DEB libssl-dev PKG_CONFIG openssl)
kiln_install_dependency(grpc ITEMS PkgConfig::KILN_GRPCPP
  FIND "find_dependency(PkgConfig)\npkg_check_modules(KILN_GRPCPP REQUIRED QUIET IMPORTED_TARGET grpc++)"
  DEB libgrpc++-dev pkg-config PKG_CONFIG grpc++)
# CUDA and cuDNN come from NVIDIA's installers, not Debian: no package to depend on.
if(KILN_HAVE_CUDA)
  kiln_install_dependency(cuda ITEMS CUDA::cudart FIND "find_dependency(CUDAToolkit)"
    LIBS -L${CUDAToolkit_LIBRARY_DIR} -lcudart CFLAGS -I${CUDAToolkit_INCLUDE_DIRS})
endif()
if(KILN_CUDNN_LIBRARY)
  kiln_install_dependency(cudnn ITEMS ${KILN_CUDNN_LIBRARY} LIBS ${KILN_CUDNN_LIBRARY})
endif()

# The dependency that lists `item`, or "" (in `out`).
function(kiln_install_dependency_of item out)
  get_property(names GLOBAL PROPERTY KILN_INSTALL_DEPENDENCIES)
  foreach(name ${names})
    get_property(items GLOBAL PROPERTY KILN_INSTALL_DEPENDENCY_${name}_ITEMS)
    if(item IN_LIST items)
      set(${out} ${name} PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} "" PARENT_SCOPE)
endfunction()

# kiln_link_closure(LIBS ITEMS target...): the kiln libraries `target`s link, themselves
# included, in link order (each before the ones it needs) in LIBS; every other link item they
# carry (imported targets, library names and paths) in ITEMS, in the order first met.
function(kiln_link_closure out_libs out_items)
  set(libs)
  set(items)
  set(edges)
  set(queue ${ARGN})
  while(queue)
    list(POP_FRONT queue lib)
    if(lib IN_LIST libs)
      continue()
    endif()
    list(APPEND libs ${lib})
    get_target_property(links ${lib} INTERFACE_LINK_LIBRARIES)
    if(NOT links)
      continue()
    endif()
    foreach(link ${links})
      # A static library carries its private dependencies as $<LINK_ONLY:...>.
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" link "${link}")
      if(TARGET ${link})
        get_target_property(aliased ${link} ALIASED_TARGET)
        if(aliased)
          set(link ${aliased})
        endif()
        get_target_property(imported ${link} IMPORTED)
        if(NOT imported)
          list(APPEND queue ${link})
          list(APPEND edges "${lib}>${link}")
          continue()
        endif()
      endif()
      if(NOT link IN_LIST items)
        list(APPEND items ${link})
      endif()
    endforeach()
  endwhile()
  # Link order: repeatedly take a library that no library left still needs.
  set(ordered)
  set(left ${libs})
  while(left)
    foreach(lib ${left})
      set(needed FALSE)
      foreach(other ${left})
        if("${other}>${lib}" IN_LIST edges)
          set(needed TRUE)
          break()
        endif()
      endforeach()
      if(NOT needed)
        list(APPEND ordered ${lib})
        list(REMOVE_ITEM left ${lib})
        break()
      endif()
    endforeach()
    if(NOT needed)
      continue()
    endif()
    message(FATAL_ERROR "kiln install: the links between ${left} form a cycle")
  endwhile()
  set(${out_libs} ${ordered} PARENT_SCOPE)
  set(${out_items} ${items} PARENT_SCOPE)
endfunction()

kiln_link_closure(KILN_INSTALLED_LIBRARIES kiln_link_items ${KILN_EXPORTED_LIBRARIES})
set(kiln_used_dependencies)
foreach(item ${kiln_link_items})
  kiln_install_dependency_of("${item}" dependency)
  if(NOT dependency)
    message(FATAL_ERROR "kiln install: an installed kiln library links \"${item}\", which "
      "cmake/install.cmake does not know; add a kiln_install_dependency() line for it")
  endif()
  if(NOT dependency IN_LIST kiln_used_dependencies)
    list(APPEND kiln_used_dependencies ${dependency})
  endif()
endforeach()

# Build-tree include folders become the installed headers' folder (the source tree's layout under
# include/kiln), and the exported name drops the kiln_ prefix.
foreach(lib ${KILN_INSTALLED_LIBRARIES})
  get_target_property(dirs ${lib} INTERFACE_INCLUDE_DIRECTORIES)
  if(dirs)
    set(fixed)
    foreach(dir ${dirs})
      if(dir MATCHES "^\\$<")
        list(APPEND fixed "${dir}")
        continue()
      endif()
      set(relative "")
      cmake_path(IS_PREFIX PROJECT_BINARY_DIR "${dir}" NORMALIZE in_binary)
      cmake_path(IS_PREFIX PROJECT_SOURCE_DIR "${dir}" NORMALIZE in_source)
      if(in_binary)
        file(RELATIVE_PATH relative ${PROJECT_BINARY_DIR} ${dir})
      elseif(in_source)
        file(RELATIVE_PATH relative ${PROJECT_SOURCE_DIR} ${dir})
      else()
        list(APPEND fixed "${dir}")
        continue()
      endif()
      set(installed ${KILN_INSTALL_INCLUDEDIR})
      if(relative)
        set(installed ${KILN_INSTALL_INCLUDEDIR}/${relative})
      endif()
      list(APPEND fixed "$<BUILD_INTERFACE:${dir}>" "$<INSTALL_INTERFACE:${installed}>")
      set_property(TARGET ${lib} APPEND PROPERTY KILN_INSTALLED_INCLUDE_DIRS ${installed})
    endforeach()
    list(REMOVE_DUPLICATES fixed)
    set_target_properties(${lib} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${fixed}")
  endif()
  string(REGEX REPLACE "^kiln_" "" export_name ${lib})
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${export_name})
endforeach()
# The headers are C++20.
target_compile_features(kiln_core INTERFACE cxx_std_20)

install(TARGETS ${KILN_INSTALLED_LIBRARIES} EXPORT kilnTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${KILN_INSTALL_CMAKEDIR} COMPONENT dev)

# The headers of every part, as the sources include them ("core/status.h"), and the generated
# gRPC messages server/grpc's headers include.
foreach(part core compiler pipeline server client)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${part} DESTINATION ${KILN_INSTALL_INCLUDEDIR}
    COMPONENT dev
    FILES_MATCHING PATTERN "*.h" PATTERN "*.inc" PATTERN "*.cuh"
    PATTERN "*_test*" EXCLUDE PATTERN "testing" EXCLUDE PATTERN "testdata" EXCLUDE)
endforeach()
install(DIRECTORY ${PROJECT_BINARY_DIR}/server/proto/
  DESTINATION ${KILN_INSTALL_INCLUDEDIR}/server/proto COMPONENT dev
  FILES_MATCHING PATTERN "*.pb.h")

# kilnConfig.cmake: finds what the installed libraries link (the dependencies this build used),
# then defines the kiln:: targets.
set(KILN_CONFIG_DEPENDENCIES "")
foreach(dependency ${kiln_used_dependencies})
  get_property(find GLOBAL PROPERTY KILN_INSTALL_DEPENDENCY_${dependency}_FIND)
  get_property(items GLOBAL PROPERTY KILN_INSTALL_DEPENDENCY_${dependency}_ITEMS)
  list(GET items 0 first)
  if(find)
    string(REPLACE "\n" "\n  " find "${find}")
    string(APPEND KILN_CONFIG_DEPENDENCIES "if(NOT TARGET ${first})\n  ${find}\nendif()\n")
  endif()
endforeach()
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/kilnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kilnConfig.cmake INSTALL_DESTINATION ${KILN_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kilnConfig.cmake ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
  DESTINATION ${KILN_INSTALL_CMAKEDIR} COMPONENT dev)

# kiln_install_pkg_config(NAME TARGET DESCRIPTION): <NAME>.pc for linking TARGET with pkg-config:
# its kiln libraries in link order, then what they need (modules in Requires, the rest in Libs).
# The libraries are static, so everything is in Libs and Requires (no .private fields needed).
function(kiln_install_pkg_config name target description)
  kiln_link_closure(libs items ${target})
  set(link_flags)
  set(requires)
  set(dep_libs)
  set(cflags "-std=c++20")
  foreach(lib ${libs})
    get_target_property(type ${lib} TYPE)
    if(type STREQUAL "STATIC_LIBRARY")
      get_target_property(output ${lib} OUTPUT_NAME)
      if(NOT output)
        set(output ${lib})
      endif()
      list(APPEND link_flags "-l${output}")
    endif()
    get_property(include_dirs TARGET ${lib} PROPERTY KILN_INSTALLED_INCLUDE_DIRS)
    foreach(dir ${include_dirs})
      if(NOT dir STREQUAL KILN_INSTALL_INCLUDEDIR)
        list(APPEND cflags "-I\${prefix}/${dir}")
      endif()
    endforeach()
    get_target_property(definitions ${lib} INTERFACE_COMPILE_DEFINITIONS)
    foreach(definition ${definitions})
      if(definition AND NOT definition MATCHES "\\$<")
        list(APPEND cflags "-D${definition}")
      endif()
    endforeach()
  endforeach()
  set(seen)
  foreach(item ${items})
    kiln_install_dependency_of("${item}" dependency)
    if(dependency IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${dependency})
    get_property(modules GLOBAL PROPERTY KILN_INSTALL_DEPENDENCY_${dependency}_PKG_CONFIG)
    get_property(flags GLOBAL PROPERTY KILN_INSTALL_DEPENDENCY_${dependency}_LIBS)
    get_property(dep_cflags GLOBAL PROPERTY KILN_INSTALL_DEPENDENCY_${dependency}_CFLAGS)
    list(APPEND requires ${modules})
    list(APPEND dep_libs ${flags})
    list(APPEND cflags ${dep_cflags})
  endforeach()
  list(REMOVE_DUPLICATES requires)
  list(REMOVE_DUPLICATES dep_libs)
  list(REMOVE_DUPLICATES cflags)
  list(JOIN requires " " requires)
  list(JOIN link_flags " " link_flags)
  list(JOIN dep_libs " " dep_libs)
  list(JOIN cflags " " cflags)
  # ${pcfiledir} keeps the installed tree relocatable (a prefix chosen at install time).
  file(RELATIVE_PATH to_prefix /prefix/${KILN_INSTALL_PKGCONFIGDIR} /prefix)
  string(REGEX REPLACE "/$" "" to_prefix "${to_prefix}")
  file(WRITE ${PROJECT_BINARY_DIR}/pkgconfig/${name}.pc
"prefix=\${pcfiledir}/${to_prefix}
libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}
includedir=\${prefix}/${KILN_INSTALL_INCLUDEDIR}

Name: ${name}
Description: ${description}
Version: ${PROJECT_VERSION}
Requires: ${requires}
Cflags: -I\${includedir} ${cflags}
Libs: -L\${libdir} ${link_flags} ${dep_libs}
")
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/${name}.pc DESTINATION ${KILN_INSTALL_PKGCONFIGDIR}
    COMPONENT dev)
endfunction()
kiln_install_pkg_config(kiln-core kiln_core "kiln core: status, tensors, logging, threads")
kiln_install_pkg_config(kiln-compiler kiln_compiler
  "kiln compiler: ONNX import, passes, the ref/cpu/cuda targets, artifacts")
kiln_install_pkg_config(kiln-pipeline kiln_pipeline "kiln data pipeline: read, decode, augment")
kiln_install_pkg_config(kiln-server kiln_server
  "kiln server core: repository, scheduler, backends, in-process API")
kiln_install_pkg_config(kiln-client kiln_client
  "kiln clients: KServe v2 over HTTP and gRPC, and in-process")

# The CLI, and a model repository to try it on (`kiln serve --repository
# <prefix>/share/kiln/examples/repository`).
install(TARGETS kiln RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/repository
  DESTINATION ${CMAKE_INSTALL_DATADIR}/kiln/examples COMPONENT runtime
  PATTERN "*.py" EXCLUDE PATTERN "__pycache__" EXCLUDE)

# The Python package: the sources, the extension and the generated stub and gRPC messages.
if(NOT KILN_SANITIZE)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/kiln DESTINATION ${KILN_INSTALL_PYTHONDIR}
    COMPONENT python FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
  install(TARGETS kiln_python LIBRARY DESTINATION ${KILN_INSTALL_PYTHONDIR}/kiln
    COMPONENT python)
  install(FILES ${PROJECT_BINARY_DIR}/python/kiln/pipeline/fn.pyi
    DESTINATION ${KILN_INSTALL_PYTHONDIR}/kiln/pipeline COMPONENT python)
  install(FILES ${PROJECT_BINARY_DIR}/python/kiln/client/grpc_predict_v2_pb2.py
    DESTINATION ${KILN_INSTALL_PYTHONDIR}/kiln/client COMPONENT python)
endif()


# .deb packages (`cpack -G DEB` in the build folder, docs/deploy.md): kiln (the CLI and the
# example repository), kiln-dev (headers, static libraries, CMake and pkg-config files) and
# python3-kiln. dpkg-shlibdeps derives what the binaries need; kiln-dev depends on the -dev
# packages of the table above.
set(KILN_PACKAGE_MAINTAINER "kiln developers <kiln@localhost>" CACHE STRING
  "Maintainer field of the .deb packages")
set(kiln_dev_depends)
foreach(dependency ${kiln_used_dependencies})
  get_property(debs GLOBAL PROPERTY KILN_INSTALL_DEPENDENCY_${dependency}_DEB)
  list(APPEND kiln_dev_depends ${debs})
endforeach()
list(REMOVE_DUPLICATES kiln_dev_depends)
list(JOIN kiln_dev_depends ", " kiln_dev_depends)
# The cuda target links the CUDA runtime and cuDNN, which NVIDIA's apt repository packages.
set(kiln_runtime_depends "")
if(KILN_HAVE_CUDA)
  set(KILN_DEB_CUDA_DEPENDS
    "cuda-cudart-${CUDAToolkit_VERSION_MAJOR}-${CUDAToolkit_VERSION_MINOR}, libcudnn9-cuda-${CUDAToolkit_VERSION_MAJOR}"
    CACHE STRING "What the kiln .deb of a build with the cuda target depends on for CUDA")
  set(kiln_runtime_depends "${KILN_DEB_CUDA_DEPENDS}")
endif()
set(kiln_python "${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}")
math(EXPR kiln_python_next "${Python3_VERSION_MINOR} + 1")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME kiln)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${KILN_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "kiln: compiles neural networks, prepares their inputs and serves them")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev python)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME kiln)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION science)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "${kiln_runtime_depends}")
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "kiln: compiles neural networks and serves them
 The kiln command-line tool: compile, run and measure ONNX models on the ref, cpu and cuda
 targets, run data pipelines, and serve a model repository over KServe v2 HTTP and gRPC
 (kiln serve), with an example repository in /usr/share/kiln/examples.")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME kiln-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${kiln_dev_depends}")
set(CPACK_DEBIAN_DEV_PACKAGE_ARCHITECTURE amd64)
set(CPACK_COMPONENT_DEV_DESCRIPTION "kiln: C++ libraries and headers
 kiln's compiler, data pipeline, server and client libraries (static), their headers, the
 CMake package (find_package(kiln): kiln::compiler, kiln::pipeline, kiln::client, ...) and
 pkg-config files (kiln-compiler, kiln-pipeline, kiln-client, ...).")
set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-kiln)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS
  "python3 (>= ${kiln_python}), python3 (<< ${Python3_VERSION_MAJOR}.${kiln_python_next}), python3-numpy")
if(kiln_runtime_depends)
  string(APPEND CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS ", ${kiln_runtime_depends}")
endif()
set(CPACK_DEBIAN_PYTHON_PACKAGE_RECOMMENDS "python3-protobuf, python3-grpcio")
set(CPACK_DEBIAN_PYTHON_PACKAGE_SUGGESTS "python3-torch, python3-onnx, kiln")
set(CPACK_COMPONENT_PYTHON_DESCRIPTION "kiln: Python package
 import kiln: the compiler with MIGraphX's Python names, the data pipeline (kiln.pipeline.fn),
 the KServe v2 clients (kiln.client) and the PyTorch bridge (kiln.torch).")
include(CPack)
