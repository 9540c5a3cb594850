// SPDX-License-Identifier: Apache-2.0
// Artifact files: the preamble, the header with its section table, checksums and loading.
#include "compiler/artifact/artifact.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "compiler/artifact/checksum.h"
#include "compiler/artifact/graph_codec.h"
#include "core/byte_io.h"
#include "core/huge_pages.h"
#include "core/logging.h"

namespace kiln::compiler {

namespace {

constexpr uint8_t kMagic[8] = {0x89, 'K', 'I', 'L', 'N', 0x0D, 0x0A, 0x1A};

// Preamble field offsets.
constexpr size_t kVersionAt = 8;
constexpr size_t kPreambleSizeAt = 12;
constexpr size_t kFileSizeAt = 16;
constexpr size_t kHeaderOffsetAt = 24;
constexpr size_t kHeaderSizeAt = 32;
constexpr size_t kHeaderChecksumAt = 40;
constexpr size_t kPreambleChecksumAt = 56;

uint64_t align_up(uint64_t v) {
  return (v + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment;
}

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <class T>
void store(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

void write_pairs(ByteWriter& w, const std::vector<std::pair<std::string, std::string>>& pairs) {
  w.put<uint32_t>(static_cast<uint32_t>(pairs.size()));
  for (const auto& [k, v] : pairs) {
    w.put_string(k);
    w.put_string(v);
  }
}

Result<std::vector<std::pair<std::string, std::string>>> read_pairs(ByteReader& r) {
  KILN_ASSIGN_OR_RETURN(uint32_t n, r.get_count(8));
  std::vector<std::pair<std::string, std::string>> pairs(n);
  for (auto& [k, v] : pairs) {
    KILN_ASSIGN_OR_RETURN(k, r.get_string());
    KILN_ASSIGN_OR_RETURN(v, r.get_string());
  }
  return pairs;
}

void write_signature(ByteWriter& w, const std::vector<SignatureEntry>& entries) {
  w.put<uint32_t>(static_cast<uint32_t>(entries.size()));
  for (const SignatureEntry& e : entries) {
    w.put_string(e.name);
    write_value_type(w, e.type);
  }
}

Result<std::vector<SignatureEntry>> read_signature(ByteReader& r) {
  KILN_ASSIGN_OR_RETURN(uint32_t n, r.get_count(7));
  std::vector<SignatureEntry> entries(n);
  for (SignatureEntry& e : entries) {
    KILN_ASSIGN_OR_RETURN(e.name, r.get_string());
    KILN_ASSIGN_OR_RETURN(e.type, read_value_type(r));
  }
  return entries;
}

std::vector<uint8_t> encode_header(const ArtifactHeader& h,
                                   const std::vector<ArtifactSection>& sections) {
  ByteWriter w;
  w.put_string(h.kiln_version);
  w.put_string(h.target);
  write_pairs(w, h.fingerprint);
  w.put<uint8_t>(h.options.optimize ? 1 : 0);
  w.put<uint64_t>(h.options.seed);
  w.put_string(h.source.name);
  w.put<uint64_t>(h.source.size);
  w.put<uint64_t>(h.source.hash);
  write_pairs(w, h.source.options);
  w.put_string(h.source.recompile_command);
  write_signature(w, h.inputs);
  write_signature(w, h.outputs);
  w.put<uint32_t>(static_cast<uint32_t>(sections.size()));
  for (const ArtifactSection& s : sections) {
    w.put_string(s.name);
    w.put<uint32_t>(static_cast<uint32_t>(s.kind));
    w.put<uint64_t>(s.offset);
    w.put<uint64_t>(s.size);
    w.put<uint64_t>(s.checksum);
  }
  return std::move(w.bytes());
}

Status decode_header(ByteReader& r, ArtifactHeader& h, std::vector<ArtifactSection>& sections) {
  KILN_ASSIGN_OR_RETURN(h.kiln_version, r.get_string());
  KILN_ASSIGN_OR_RETURN(h.target, r.get_string());
  KILN_ASSIGN_OR_RETURN(h.fingerprint, read_pairs(r));
  KILN_ASSIGN_OR_RETURN(uint8_t optimize, r.get<uint8_t>());
  h.options.optimize = optimize != 0;
  KILN_ASSIGN_OR_RETURN(h.options.seed, r.get<uint64_t>());
  KILN_ASSIGN_OR_RETURN(h.source.name, r.get_string());
  KILN_ASSIGN_OR_RETURN(h.source.size, r.get<uint64_t>());
  KILN_ASSIGN_OR_RETURN(h.source.hash, r.get<uint64_t>());
  KILN_ASSIGN_OR_RETURN(h.source.options, read_pairs(r));
  KILN_ASSIGN_OR_RETURN(h.source.recompile_command, r.get_string());
  KILN_ASSIGN_OR_RETURN(h.inputs, read_signature(r));
  KILN_ASSIGN_OR_RETURN(h.outputs, read_signature(r));
  KILN_ASSIGN_OR_RETURN(uint32_t n, r.get_count(32));
  sections.resize(n);
  for (ArtifactSection& s : sections) {
    KILN_ASSIGN_OR_RETURN(s.name, r.get_string());
    KILN_ASSIGN_OR_RETURN(uint32_t kind, r.get<uint32_t>());
    if (kind < 1 || kind > 3) return r.error(fmt::format("section kind {} is unknown", kind));
    s.kind = static_cast<SectionKind>(kind);
    KILN_ASSIGN_OR_RETURN(s.offset, r.get<uint64_t>());
    KILN_ASSIGN_OR_RETURN(s.size, r.get<uint64_t>());
    KILN_ASSIGN_OR_RETURN(s.checksum, r.get<uint64_t>());
  }
  if (!r.at_end()) return r.error("unexpected bytes after the section table");
  return Status();
}

std::string generic_recompile_hint(const std::string& name) {
  return fmt::format("recompile it with: kiln compile MODEL.onnx -o {}", name);
}

}  // namespace

ArtifactHeader make_artifact_header(const Executable& executable, const CompileOptions& options,
                                    const ArtifactSource& source) {
  ArtifactHeader h;
  h.kiln_version = std::string(kiln_version());
  h.target = std::string(executable.target());
  h.fingerprint = device_fingerprint(h.target);
  h.options = options;
  h.source = source;
  for (const Value* v : executable.graph().inputs()) h.inputs.push_back({v->name(), v->type()});
  for (const Value* v : executable.graph().outputs()) h.outputs.push_back({v->name(), v->type()});
  return h;
}

namespace {

using ByteSink = std::function<Status(std::span<const uint8_t>)>;

constexpr uint8_t kZeros[kWeightAlignment] = {};

// Feeds `n` zero bytes to `f` in pieces.
template <class F>
Status zeros(uint64_t n, F&& f) {
  while (n > 0) {
    const uint64_t k = std::min<uint64_t>(n, sizeof(kZeros));
    KILN_RETURN_IF_ERROR(f(std::span<const uint8_t>(kZeros, k)));
    n -= k;
  }
  return Status();
}

// Produces the artifact's bytes in file order through `sink`. The weights go from the graph's
// tensors straight to the sink (checksummed in a first pass), so they are never held twice.
Status emit_artifact(const ArtifactHeader& header, const Graph& graph,
                     const std::vector<TargetSection>& extra, const ByteSink& sink) {
  KILN_ASSIGN_OR_RETURN(EncodedGraph encoded, encode_graph(graph));
  std::vector<ArtifactSection> sections;
  sections.push_back({"graph", SectionKind::kGraph, 0, encoded.graph.size(), 0});
  sections.push_back({"weights", SectionKind::kWeights, 0, encoded.weights_size, 0});
  for (const TargetSection& e : extra) {
    uint64_t size = 0;
    for (std::span<const uint8_t> piece : e.pieces) size += piece.size();
    sections.push_back({e.name, SectionKind::kTargetData, 0, size, 0});
  }
  // Every field is fixed-width, so the header's size does not depend on the offsets.
  const uint64_t header_size = encode_header(header, sections).size();
  uint64_t end = align_up(kArtifactPreambleSize + header_size);
  for (ArtifactSection& s : sections) {
    s.offset = align_up(end);
    end = s.offset + s.size;
  }

  sections[0].checksum = xxhash64(encoded.graph);
  Xxhash64 weights_hash;
  auto hash = [&](std::span<const uint8_t> b) {
    weights_hash.update(b);
    return Status();
  };
  uint64_t at = 0;
  for (const WeightSlice& w : encoded.weights) {
    KILN_RETURN_IF_ERROR(zeros(w.offset - at, hash));
    weights_hash.update(std::span<const uint8_t>(static_cast<const uint8_t*>(w.data), w.nbytes));
    at = w.offset + w.nbytes;
  }
  KILN_RETURN_IF_ERROR(zeros(encoded.weights_size - at, hash));
  sections[1].checksum = weights_hash.digest();
  for (size_t i = 0; i < extra.size(); ++i) {
    Xxhash64 h;
    for (std::span<const uint8_t> piece : extra[i].pieces) h.update(piece);
    sections[i + 2].checksum = h.digest();
  }
  std::vector<uint8_t> head = encode_header(header, sections);
  KILN_CHECK(head.size() == header_size, "artifact header size changed with its offsets");

  uint8_t preamble[kArtifactPreambleSize] = {};
  std::memcpy(preamble, kMagic, sizeof(kMagic));
  store<uint32_t>(preamble + kVersionAt, header.format_version);
  store<uint32_t>(preamble + kPreambleSizeAt, static_cast<uint32_t>(kArtifactPreambleSize));
  store<uint64_t>(preamble + kFileSizeAt, end);
  store<uint64_t>(preamble + kHeaderOffsetAt, kArtifactPreambleSize);
  store<uint64_t>(preamble + kHeaderSizeAt, header_size);
  store<uint64_t>(preamble + kHeaderChecksumAt, xxhash64(head));
  store<uint64_t>(preamble + kPreambleChecksumAt,
                  xxhash64(std::span<const uint8_t>(preamble, kPreambleChecksumAt)));

  uint64_t written = 0;
  auto put = [&](std::span<const uint8_t> b) {
    written += b.size();
    return sink(b);
  };
  auto pad_to = [&](uint64_t offset) { return zeros(offset - written, put); };
  KILN_RETURN_IF_ERROR(put(preamble));
  KILN_RETURN_IF_ERROR(put(head));
  KILN_RETURN_IF_ERROR(pad_to(sections[0].offset));
  KILN_RETURN_IF_ERROR(put(encoded.graph));
  for (const WeightSlice& w : encoded.weights) {
    KILN_RETURN_IF_ERROR(pad_to(sections[1].offset + w.offset));
    KILN_RETURN_IF_ERROR(
        put(std::span<const uint8_t>(static_cast<const uint8_t*>(w.data), w.nbytes)));
  }
  KILN_RETURN_IF_ERROR(pad_to(sections[1].offset + sections[1].size));
  for (size_t i = 0; i < extra.size(); ++i) {
    KILN_RETURN_IF_ERROR(pad_to(sections[i + 2].offset));
    for (std::span<const uint8_t> piece : extra[i].pieces) KILN_RETURN_IF_ERROR(put(piece));
  }
  KILN_CHECK(written == end, "artifact bytes written differ from its layout");
  return Status();
}

}  // namespace

Result<std::vector<uint8_t>> serialize_artifact(const ArtifactHeader& header, const Graph& graph,
                                                const std::vector<TargetSection>& extra) {
  std::vector<uint8_t> file;
  KILN_RETURN_IF_ERROR(emit_artifact(header, graph, extra, [&](std::span<const uint8_t> b) {
    file.insert(file.end(), b.begin(), b.end());
    return Status();
  }));
  return file;
}

Status save_artifact(const std::string& path, const Executable& executable,
                     const CompileOptions& options, const ArtifactSource& source,
                     const std::vector<TargetSection>& extra) {
  KILN_ASSIGN_OR_RETURN(Executable::ArtifactContents contents, executable.artifact_contents());
  // Written to a temporary file renamed into place, so readers never see half an artifact.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    return errno_error(err, fmt::format("cannot create \"{}\"", tmp));
  }
  // The executable's own sections (e.g. the cuda target's tuning) follow the caller's.
  std::vector<TargetSection> sections = extra;
  for (TargetSection& s : contents.sections) sections.push_back(std::move(s));
  auto write_all = [&](std::span<const uint8_t> b) {
    size_t done = 0;
    while (done < b.size()) {
      const ssize_t n = ::write(fd, b.data() + done, b.size() - done);
      if (n < 0) {
        const int err = errno;
        if (err == EINTR) continue;
        return errno_error(err, fmt::format("cannot write \"{}\"", path));
      }
      done += static_cast<size_t>(n);
    }
    return Status();
  };
  // Written in whole aligned pieces of 2 MiB: where the page cache keeps large folios (ext4 on
  // Linux 6.18 here), the file then lies in 2 MiB folios, which a loading process maps one huge
  // page at a time, weights used in place included. Written piece by piece as the weights come,
  // 27% of ResNet-50's artifact was mapped so; written this way, 95%.
  std::vector<uint8_t> piece;
  piece.reserve(kHugePageBytes);
  Status status = emit_artifact(
      make_artifact_header(executable, options, source), *contents.graph, sections,
      [&](std::span<const uint8_t> b) {
        while (!b.empty()) {
          const size_t n = std::min(b.size(), kHugePageBytes - piece.size());
          piece.insert(piece.end(), b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
          b = b.subspan(n);
          if (piece.size() == kHugePageBytes) {
            KILN_RETURN_IF_ERROR(write_all(piece));
            piece.clear();
          }
        }
        return Status();
      });
  if (status.ok()) status = write_all(piece);
  if (::close(fd) != 0 && status.ok()) {
    const int err = errno;
    status = errno_error(err, fmt::format("cannot write \"{}\"", path));
  }
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    status = errno_error(err, fmt::format("cannot move \"{}\" into place", path));
  }
  if (!status.ok()) ::unlink(tmp.c_str());
  return status;
}

Result<Artifact> parse_artifact(std::span<const uint8_t> bytes, std::shared_ptr<const void> owner,
                                std::string name) {
  const uint8_t* p = bytes.data();
  const size_t n = bytes.size();
  const bool magic_ok = n > 0 && std::memcmp(p, kMagic, std::min(n, sizeof(kMagic))) == 0;
  if (!magic_ok) {
    return invalid_argument_error(fmt::format(
        "{} is not a kiln artifact (it does not start with the .kiln magic bytes); make one with "
        "kiln compile MODEL.onnx -o {}",
        name, name));
  }
  if (n < kArtifactPreambleSize) {
    return data_loss_error(
        fmt::format("{} is truncated: {} bytes, shorter than the {}-byte "
                    "artifact preamble; {}",
                    name, n, kArtifactPreambleSize, generic_recompile_hint(name)));
  }
  const uint32_t version = load<uint32_t>(p + kVersionAt);
  if (version != kArtifactFormatVersion) {
    return failed_precondition_error(
        fmt::format("{} has artifact format version {}; this kiln ({}) reads version {}; {}", name,
                    version, kiln_version(), kArtifactFormatVersion, generic_recompile_hint(name)));
  }
  if (xxhash64(std::span<const uint8_t>(p, kPreambleChecksumAt)) !=
      load<uint64_t>(p + kPreambleChecksumAt)) {
    return data_loss_error(
        fmt::format("{}: the artifact preamble is corrupt (checksum mismatch): "
                    "the file was damaged after it was written; {}",
                    name, generic_recompile_hint(name)));
  }
  const uint64_t file_size = load<uint64_t>(p + kFileSizeAt);
  const uint64_t header_offset = load<uint64_t>(p + kHeaderOffsetAt);
  const uint64_t header_size = load<uint64_t>(p + kHeaderSizeAt);
  if (file_size != n) {
    // The header usually survives a truncation; its recompile command is the best advice.
    std::string hint = generic_recompile_hint(name);
    if (header_offset == kArtifactPreambleSize && header_size <= n - header_offset) {
      std::span<const uint8_t> head(p + header_offset, header_size);
      ArtifactHeader h;
      std::vector<ArtifactSection> sections;
      ByteReader r(head, name);
      if (xxhash64(head) == load<uint64_t>(p + kHeaderChecksumAt) &&
          decode_header(r, h, sections).ok() && !h.source.recompile_command.empty()) {
        hint = "recompile it with: " + h.source.recompile_command;
      }
    }
    return data_loss_error(fmt::format("{} is {}: its header says {} bytes, the file has {}; {}",
                                       name, n < file_size ? "truncated" : "longer than written",
                                       file_size, n, hint));
  }
  if (load<uint32_t>(p + kPreambleSizeAt) != kArtifactPreambleSize ||
      header_offset != kArtifactPreambleSize || header_size > n - header_offset) {
    return data_loss_error(
        fmt::format("{}: the artifact preamble is malformed (header at {}, {} "
                    "bytes, in a {}-byte file); {}",
                    name, header_offset, header_size, n, generic_recompile_hint(name)));
  }
  std::span<const uint8_t> head(p + header_offset, header_size);
  if (xxhash64(head) != load<uint64_t>(p + kHeaderChecksumAt)) {
    return data_loss_error(
        fmt::format("{}: the artifact header is corrupt (checksum mismatch): "
                    "the file was damaged after it was written; {}",
                    name, generic_recompile_hint(name)));
  }
  Artifact a;
  a.name_ = std::move(name);
  a.bytes_ = bytes;
  a.owner_ = std::move(owner);
  ByteReader r(head, a.name_ + ": the artifact header");
  KILN_RETURN_IF_ERROR(decode_header(r, a.header_, a.sections_));
  for (const ArtifactSection& s : a.sections_) {
    if (s.offset % kWeightAlignment != 0 || s.offset > n || s.size > n - s.offset) {
      return data_loss_error(
          fmt::format("{}: section \"{}\" (offset {}, {} bytes) lies outside "
                      "the {}-byte file; {}",
                      a.name_, s.name, s.offset, s.size, n, a.recompile_hint()));
    }
    if (xxhash64(a.section_bytes(s)) != s.checksum) {
      return data_loss_error(fmt::format(
          "{}: section \"{}\" is corrupt (checksum mismatch): the file was damaged after it was "
          "written; {}",
          a.name_, s.name, a.recompile_hint()));
    }
  }
  // Bytes outside the preamble, header and sections are alignment padding and must be zero, so
  // that no byte of the file escapes a check.
  std::vector<std::pair<uint64_t, uint64_t>> covered = {{0, header_offset + header_size}};
  for (const ArtifactSection& s : a.sections_) covered.emplace_back(s.offset, s.offset + s.size);
  std::sort(covered.begin(), covered.end());
  uint64_t at = 0;
  for (const auto& [begin, end] : covered) {
    for (uint64_t i = at; i < begin; ++i) {
      if (p[i] != 0) {
        return data_loss_error(
            fmt::format("{} is corrupt: the alignment padding at byte {} is "
                        "not zero: the file was damaged after it was written; {}",
                        a.name_, i, a.recompile_hint()));
      }
    }
    at = std::max(at, end);
  }
  for (const char* required : {"graph", "weights"}) {
    if (a.find_section(required) == nullptr) {
      return data_loss_error(
          fmt::format("{} has no \"{}\" section; {}", a.name_, required, a.recompile_hint()));
    }
  }
  return a;
}

Result<Artifact> open_artifact(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::open(path));
  std::span<const uint8_t> bytes = file->bytes();
  KILN_ASSIGN_OR_RETURN(Artifact artifact, parse_artifact(bytes, std::move(file), path));
  // Checking the checksums read every page; they stay in the page cache, not in this process's
  // resident memory (the target reads the weights once more to pack them).
  release_file_pages(bytes);
  artifact.mapped_ = true;
  return artifact;
}

bool is_artifact_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[sizeof(kMagic)] = {};
  if (!in.read(head, sizeof(head))) return false;
  return std::memcmp(head, kMagic, sizeof(kMagic)) == 0;
}

const ArtifactSection* Artifact::find_section(std::string_view name) const {
  for (const ArtifactSection& s : sections_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::span<const uint8_t> Artifact::section_bytes(const ArtifactSection& section) const {
  return bytes_.subspan(section.offset, section.size);
}

std::shared_ptr<const LoadedSections> Artifact::loaded_sections() const {
  auto loaded = std::make_shared<LoadedSections>();
  loaded->artifact = name_;
  loaded->recompile_hint = recompile_hint();
  loaded->file = bytes_;
  loaded->mapped = mapped_;
  loaded->owner = owner_;
  for (const ArtifactSection& s : sections_) {
    if (s.kind == SectionKind::kTargetData) loaded->sections.emplace_back(s.name, section_bytes(s));
  }
  return loaded;
}

std::string Artifact::recompile_hint() const {
  if (header_.source.recompile_command.empty()) return generic_recompile_hint(name_);
  return "recompile it with: " + header_.source.recompile_command;
}

Status Artifact::check_compatible() const {
  if (header_.kiln_version != kiln_version()) {
    return failed_precondition_error(fmt::format("{} was written by kiln {}; this is kiln {}; {}",
                                                 name_, header_.kiln_version, kiln_version(),
                                                 recompile_hint()));
  }
  Result<std::unique_ptr<Target>> target = make_target(header_.target);
  if (!target.ok()) {
    return failed_precondition_error(fmt::format("{} was compiled for target {}: {}; {}", name_,
                                                 header_.target, target.status().message(),
                                                 recompile_hint()));
  }
  std::string mismatch =
      fingerprint_mismatch(header_.fingerprint, device_fingerprint(header_.target));
  if (!mismatch.empty()) {
    return failed_precondition_error(fmt::format("{} {}; {}", name_, mismatch, recompile_hint()));
  }
  return Status();
}

Status Artifact::check_source(std::span<const uint8_t> source_bytes) const {
  const uint64_t hash = xxhash64(source_bytes);
  if (source_bytes.size() == header_.source.size && hash == header_.source.hash) return Status();
  return failed_precondition_error(fmt::format(
      "{} was compiled from another version of {} ({} bytes, xxh64 {:016x}; the model now has {} "
      "bytes, xxh64 {:016x}); {}",
      name_, header_.source.name, header_.source.size, header_.source.hash, source_bytes.size(),
      hash, recompile_hint()));
}

Result<std::shared_ptr<Graph>> Artifact::stored_graph() const {
  return decode_graph(section_bytes(*find_section("graph")),
                      section_bytes(*find_section("weights")), owner_, name_);
}

Result<std::shared_ptr<Graph>> Artifact::graph() const {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> graph, stored_graph());
  Result<std::unique_ptr<Target>> target = make_target(header_.target);
  if (!target.ok()) {
    // Only a target that stored its own layouts could unpack them.
    for (const ArtifactSection& s : sections_) {
      if (s.kind == SectionKind::kTargetData && s.name.starts_with(header_.target + ".packed")) {
        return failed_precondition_error(fmt::format(
            "{} stores weights in the layouts of target {}, which this kiln was built without: "
            "{}; {}",
            name_, header_.target, target.status().message(), recompile_hint()));
      }
    }
    return graph;
  }
  Status unpacked = (*target)->unpack_stored_constants(*graph, *loaded_sections());
  if (!unpacked.ok()) return unpacked.with_context(name_);
  return graph;
}

Result<LoadedArtifact> load_artifact(const Artifact& artifact, int threads) {
  using Clock = std::chrono::steady_clock;
  using ms = std::chrono::duration<double, std::milli>;
  const Clock::time_point start = Clock::now();
  KILN_RETURN_IF_ERROR(artifact.check_compatible());
  const Clock::time_point checked = Clock::now();
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> graph, artifact.stored_graph());
  const Clock::time_point decoded = Clock::now();
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Target> target, make_target(artifact.header().target));
  CompileOptions options = artifact.header().options;
  options.loaded = artifact.loaded_sections();
  options.threads = threads;
  Result<std::shared_ptr<Executable>> exe = target->finalize(std::move(graph), options);
  if (!exe.ok()) return exe.status().with_context(artifact.name());
  log(LogLevel::kDebug,
      "loaded {} ({} bytes): compatibility checked in {:.1f} ms, graph decoded in {:.1f} ms, "
      "finalized for {} in {:.1f} ms",
      artifact.name(), artifact.size(), ms(checked - start).count(), ms(decoded - checked).count(),
      artifact.header().target, ms(Clock::now() - decoded).count());
  return LoadedArtifact{artifact.header(), std::move(exe).value()};
}

Result<LoadedArtifact> load_artifact(const std::string& path, int threads) {
  using ms = std::chrono::duration<double, std::milli>;
  const auto start = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(Artifact artifact, open_artifact(path));
  log(LogLevel::kDebug, "mapped and checked {} in {:.1f} ms", path,
      ms(std::chrono::steady_clock::now() - start).count());
  return load_artifact(artifact, threads);
}

}  // namespace kiln::compiler
