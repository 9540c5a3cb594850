// SPDX-License-Identifier: Apache-2.0
#include "compiler/cache/input_folder.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "compiler/artifact/checksum.h"
#include "core/mapped_file.h"
#include "core/npy.h"

namespace kiln::compiler {

namespace fs = std::filesystem;

namespace {

Result<std::vector<fs::path>> sorted_entries(const fs::path& dir, bool folders) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (folders ? it->is_directory(ec) : it->path().extension() == ".npy") {
      out.push_back(it->path());
    }
  }
  if (ec) {
    return not_found_error(fmt::format("cannot list \"{}\": {}", dir.string(), ec.message()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

Result<std::vector<FolderBatch>> read_npy_folder(const fs::path& dir, const Graph& graph) {
  std::vector<FolderBatch> batches;
  KILN_ASSIGN_OR_RETURN(std::vector<fs::path> files, sorted_entries(dir, false));
  if (!files.empty()) {
    if (graph.inputs().size() != 1) {
      return invalid_argument_error(fmt::format(
          "\"{}\": the model has {} inputs, so each batch must be a sub-folder holding one "
          "<input name>.npy per input, not a loose .npy file",
          dir.string(), graph.inputs().size()));
    }
    for (const fs::path& file : files) {
      KILN_ASSIGN_OR_RETURN(Tensor t, read_npy(file.string()));
      FolderBatch b;
      b.tensors.emplace(graph.inputs()[0]->name(), std::move(t));
      b.source = file.filename().string();
      batches.push_back(std::move(b));
    }
    return batches;
  }
  KILN_ASSIGN_OR_RETURN(std::vector<fs::path> folders, sorted_entries(dir, true));
  for (const fs::path& folder : folders) {
    FolderBatch b;
    b.source = folder.filename().string();
    for (const Value* in : graph.inputs()) {
      const fs::path file = folder / (in->name() + ".npy");
      std::error_code ec;
      if (!fs::exists(file, ec)) {
        return not_found_error(fmt::format("\"{}\": no {}.npy for model input \"{}\"",
                                           folder.string(), in->name(), in->name()));
      }
      KILN_ASSIGN_OR_RETURN(Tensor t, read_npy(file.string()));
      b.tensors.emplace(in->name(), std::move(t));
    }
    batches.push_back(std::move(b));
  }
  return batches;
}

uint64_t hash_input_folder(const fs::path& dir, const std::vector<fs::path>& extra) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec)) files.push_back(it->path());
  }
  if (ec || files.empty()) return 0;
  std::sort(files.begin(), files.end());
  files.insert(files.end(), extra.begin(), extra.end());
  Xxhash64 h(0x6b696c6e);  // "kiln"
  auto bytes_of = [](std::string_view s) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  for (const fs::path& f : files) {
    Result<std::shared_ptr<const MappedFile>> mapped = MappedFile::open(f.string());
    if (!mapped.ok()) return 0;
    const std::string name = f.lexically_relative(dir).generic_string() + "\n" +
                             std::to_string((*mapped)->bytes().size()) + "\n";
    h.update(bytes_of(name));
    h.update((*mapped)->bytes());
  }
  const uint64_t digest = h.digest();
  return digest == 0 ? 1 : digest;
}

}  // namespace kiln::compiler
