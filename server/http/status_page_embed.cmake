# SPDX-License-Identifier: Apache-2.0
# Writes a C++ file defining status_page_html() from status_page.html's bytes, so the page is
# edited as HTML and built into the binary (run by the build whenever the HTML changes):
#   cmake -DINPUT=status_page.html -DOUTPUT=status_page_html.cc -P status_page_embed.cmake
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" digits)
if(digits EQUAL 0)
  message(FATAL_ERROR "${INPUT} is empty")
endif()
# 16 bytes a line.
set(line "")
foreach(i RANGE 1 16)
  string(APPEND line "[0-9a-f][0-9a-f]")
endforeach()
string(REGEX REPLACE "${line}" "\\0\n" hex "${hex}")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from server/http/status_page.html by status_page_embed.cmake; do not edit.\n"
  "#include \"server/http/status_page.h\"\n\n"
  "namespace kiln::server::http {\n\n"
  "namespace {\n"
  "const unsigned char kHtml[] = {\n${bytes}};\n"
  "}  // namespace\n\n"
  "std::string_view status_page_html() {\n"
  "  return {reinterpret_cast<const char*>(kHtml), sizeof(kHtml)};\n"
  "}\n\n"
  "}  // namespace kiln::server::http\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
