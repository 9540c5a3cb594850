// SPDX-License-Identifier: Apache-2.0
// Compiled-model artifacts (.kiln files): write, open and check, load as an Executable.
//
// Layout (little-endian; docs/artifacts.md has the full table):
//   [0, 64)     preamble: magic, format version, file size, header offset/size/checksum, and a
//               checksum of the preamble itself
//   [64, ...)   header: kiln version, target, device fingerprint, compile options, input/output
//               signature, source model name/size/hash, recompile command, section table
//   sections    each 64-byte aligned with its own XXH64 checksum: "graph" (the optimized graph),
//               "weights" (every constant, 64-byte aligned, memory-mapped on load; a target may
//               store constants in its packed layouts), and any target sections (kind
//               kTargetData, found by name: e.g. "cuda.tuning"; "<target>.packed" lists the
//               constants stored in the target's layouts, e.g. "cpu.packed")
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/artifact/fingerprint.h"
#include "compiler/ir/graph.h"
#include "compiler/targets/target.h"
#include "core/mapped_file.h"
#include "core/status.h"

namespace kiln::compiler {

inline constexpr uint32_t kArtifactFormatVersion = 1;
inline constexpr size_t kArtifactPreambleSize = 64;

// One graph input or output as the artifact's signature lists it.
struct SignatureEntry {
  std::string name;
  ValueType type;
};

// Where an artifact came from: the source model and how it was compiled, as the user said it.
struct ArtifactSource {
  std::string name;   // the source model's file name, e.g. "resnet50.onnx"
  uint64_t size = 0;  // its size in bytes
  uint64_t hash = 0;  // xxhash64 of its bytes
  std::vector<std::pair<std::string, std::string>> options;  // {"input_shape", "x=1,3,224,224"}
  std::string recompile_command;  // "kiln compile resnet50.onnx --target cpu -o resnet50.kiln"
};

// Everything the header records.
struct ArtifactHeader {
  uint32_t format_version = kArtifactFormatVersion;
  std::string kiln_version;
  std::string target;
  Fingerprint fingerprint;
  CompileOptions options;  // what finalize() is given on load
  ArtifactSource source;
  std::vector<SignatureEntry> inputs;
  std::vector<SignatureEntry> outputs;
};

enum class SectionKind : uint32_t { kGraph = 1, kWeights = 2, kTargetData = 3 };

struct ArtifactSection {
  std::string name;
  SectionKind kind = SectionKind::kTargetData;
  uint64_t offset = 0;  // from the start of the file; a multiple of 64
  uint64_t size = 0;
  uint64_t checksum = 0;  // xxhash64 of the section's bytes
};

// The header an artifact of `executable` gets on this machine: its target, this machine's
// fingerprint for that target, the options and source, and the graph's signature.
ArtifactHeader make_artifact_header(const Executable& executable, const CompileOptions& options,
                                    const ArtifactSource& source);

// The bytes of an artifact holding `graph` (already optimized for header.target).
Result<std::vector<uint8_t>> serialize_artifact(const ArtifactHeader& header, const Graph& graph,
                                                const std::vector<TargetSection>& extra = {});

// Writes `executable`'s artifact_contents() (its graph, weights and own sections) and `extra` to
// `path` (atomically: readers never see half a file).
Status save_artifact(const std::string& path, const Executable& executable,
                     const CompileOptions& options, const ArtifactSource& source,
                     const std::vector<TargetSection>& extra = {});

// An artifact whose structure and checksums were verified: every section is intact.
class Artifact {
 public:
  const std::string& name() const { return name_; }
  const ArtifactHeader& header() const { return header_; }
  const std::vector<ArtifactSection>& sections() const { return sections_; }
  // The section called `name`, or nullptr.
  const ArtifactSection* find_section(std::string_view name) const;
  std::span<const uint8_t> section_bytes(const ArtifactSection& section) const;
  // The total size of the file.
  size_t size() const { return bytes_.size(); }

  // Whether it can run here: same kiln version, a target this build has, and a device fingerprint
  // this machine satisfies. The error says what differs and the command that recompiles it.
  Status check_compatible() const;
  // Whether the artifact was compiled from exactly `source_bytes` (size and xxhash64 of the
  // model file), so a cache can tell a stale artifact from a current one. The error names both.
  Status check_source(std::span<const uint8_t> source_bytes) const;
  // Decodes the optimized graph; its constants point into the file's mapped weight section
  // (those the target stores in its own layouts are unpacked into plain values).
  Result<std::shared_ptr<Graph>> graph() const;
  // The same as stored, for the target's finalize(): constants may be in the target's layouts.
  Result<std::shared_ptr<Graph>> stored_graph() const;
  // Its target sections (kind kTargetData), for the target's finalize().
  std::shared_ptr<const LoadedSections> loaded_sections() const;
  // "recompile it with: kiln compile ..." for error messages.
  std::string recompile_hint() const;

 private:
  friend Result<Artifact> parse_artifact(std::span<const uint8_t>, std::shared_ptr<const void>,
                                         std::string);
  friend Result<Artifact> open_artifact(const std::string&);
  std::string name_;
  bool mapped_ = false;  // bytes_ is a read-only file mapping (open_artifact)
  std::span<const uint8_t> bytes_;
  std::shared_ptr<const void> owner_;
  ArtifactHeader header_;
  std::vector<ArtifactSection> sections_;
};

// Checks and parses artifact bytes kept alive by `owner`; `name` (the file) appears in messages.
// A file that is not an artifact, a truncated one, one with a flipped bit in any byte, or one of
// another format version is a clear error, never a crash.
Result<Artifact> parse_artifact(std::span<const uint8_t> bytes, std::shared_ptr<const void> owner,
                                std::string name);
// Memory-maps `path` and parses it.
Result<Artifact> open_artifact(const std::string& path);
// True when `path` starts with the artifact magic bytes (whatever its extension).
bool is_artifact_file(const std::string& path);

struct LoadedArtifact {
  ArtifactHeader header;
  std::shared_ptr<Executable> executable;
};
// Checks compatibility, decodes the graph and finalizes it for the stored target (no passes run
// again), with `threads` intra-op threads per run (0: the physical cores).
Result<LoadedArtifact> load_artifact(const Artifact& artifact, int threads = 0);
// Opens `path` and loads it as above.
Result<LoadedArtifact> load_artifact(const std::string& path, int threads = 0);

}  // namespace kiln::compiler
