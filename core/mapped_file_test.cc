// SPDX-License-Identifier: Apache-2.0
// Tests for MappedFile, read_file and write_file_atomic on real files in a temporary directory.
#include "core/mapped_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace kiln {
namespace {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents at the end of the test.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/kiln_core_test.XXXXXX";
    KILN_CHECK(::mkdtemp(pattern.data()) != nullptr, "mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

void write_plain(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string bytes_with_every_value(size_t size) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 131 + 7) & 0xff);
  return s;
}

std::span<const uint8_t> as_bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(MappedFile, MapsARealFile) {
  TempDir dir;
  const std::string path = dir.file("data.bin");
  const std::string content = bytes_with_every_value(100000);
  write_plain(path, content);

  Result<std::shared_ptr<const MappedFile>> file = MappedFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  const MappedFile& f = **file;
  EXPECT_EQ(f.path(), path);
  ASSERT_EQ(f.size(), content.size());
  ASSERT_NE(f.data(), nullptr);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f.data()), f.size()), content);
  EXPECT_EQ(f.bytes().size(), content.size());
  EXPECT_EQ(f.bytes()[12345], static_cast<uint8_t>(content[12345]));
}

// The process's resident pages (/proc/self/statm), in bytes.
size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

TEST(MappedFile, ReleasedPagesLeaveResidentMemoryAndReadBackTheFile) {
  TempDir dir;
  const std::string path = dir.file("weights.bin");
  const std::string content = bytes_with_every_value(size_t{16} << 20);
  write_plain(path, content);
  auto file = MappedFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  const std::span<const uint8_t> bytes = (*file)->bytes();
  uint64_t sum = 0;
  for (size_t i = 0; i < bytes.size(); i += 512) sum += bytes[i];  // every page resident
  const size_t before = resident_bytes();
  release_file_pages(bytes.subspan(100, bytes.size() - 200));  // partial end pages are kept
  const size_t after = resident_bytes();
  EXPECT_GT(before, after + (size_t{12} << 20)) << "16 MiB released: " << before << " -> " << after;
  EXPECT_EQ(std::memcmp(bytes.data(), content.data(), content.size()), 0);
  EXPECT_GT(sum, 0u);
}

TEST(MappedFile, MappingSurvivesUnlinkAndLastReferenceUnmaps) {
  TempDir dir;
  const std::string path = dir.file("gone.bin");
  write_plain(path, "0123456789");
  Result<std::shared_ptr<const MappedFile>> file = MappedFile::open(path);
  ASSERT_TRUE(file.ok());
  std::shared_ptr<const MappedFile> keep = *file;
  ASSERT_EQ(::unlink(path.c_str()), 0);
  EXPECT_EQ(keep->bytes()[7], '7');
  std::weak_ptr<const MappedFile> watch = keep;
  keep.reset();
  file = not_found_error("dropped");
  EXPECT_TRUE(watch.expired());
}

TEST(MappedFile, MissingFileIsNotFoundAndNamesThePath) {
  TempDir dir;
  const std::string path = dir.file("missing.npy");
  Result<std::shared_ptr<const MappedFile>> file = MappedFile::open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("\"" + path + "\""), std::string_view::npos)
      << file.status().message();

  Result<std::shared_ptr<const MappedFile>> nested = MappedFile::open(dir.file("no/such/dir/x"));
  EXPECT_EQ(nested.status().code(), StatusCode::kNotFound);
}

TEST(MappedFile, DirectoryIsAnError) {
  TempDir dir;
  Result<std::shared_ptr<const MappedFile>> file = MappedFile::open(dir.path());
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(file.status().message(), "\"" + dir.path() + "\" is not a regular file");

  Result<std::string> read = read_file(dir.path());
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
}

TEST(MappedFile, EmptyFileMapsToAnEmptySpan) {
  TempDir dir;
  const std::string path = dir.file("empty");
  write_plain(path, "");
  Result<std::shared_ptr<const MappedFile>> file = MappedFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ((*file)->size(), 0u);
  EXPECT_TRUE((*file)->bytes().empty());

  Result<std::string> read = read_file(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, "");
}

TEST(MappedFile, UnreadableFileIsPermissionDenied) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads every file";
  TempDir dir;
  const std::string path = dir.file("secret");
  write_plain(path, "x");
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  Result<std::shared_ptr<const MappedFile>> file = MappedFile::open(path);
  EXPECT_EQ(file.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(file.status().message().find(path), std::string_view::npos);
  EXPECT_EQ(read_file(path).status().code(), StatusCode::kPermissionDenied);
}

TEST(MappedFile, ReadFile) {
  TempDir dir;
  const std::string path = dir.file("text.txt");
  const std::string content = bytes_with_every_value(70001);
  write_plain(path, content);
  Result<std::string> read = read_file(path);
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  EXPECT_EQ(*read, content);

  Result<std::string> missing = read_file(dir.file("nope"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir.file("nope")), std::string_view::npos);
}

TEST(MappedFile, ReadFileReadsFilesThatReportSizeZero) {
  // procfs files stat as empty regular files but have content.
  Result<std::string> status = read_file("/proc/self/status");
  ASSERT_TRUE(status.ok()) << status.status().to_string();
  EXPECT_NE(status->find("Pid:"), std::string::npos) << *status;
}

TEST(MappedFile, WriteFileAtomic) {
  TempDir dir;
  const std::string path = dir.file("out.bin");
  const std::string first = bytes_with_every_value(5000);
  ASSERT_TRUE(write_file_atomic(path, as_bytes(first)).ok());
  Result<std::string> read = read_file(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, first);

  // Overwriting replaces the whole file, including with a shorter one.
  ASSERT_TRUE(write_file_atomic(path, as_bytes("short")).ok());
  EXPECT_EQ(*read_file(path), "short");
  ASSERT_TRUE(write_file_atomic(path, {}).ok());
  EXPECT_EQ(*read_file(path), "");

  // No temporary file is left next to the target.
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    names.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(names, std::vector<std::string>{"out.bin"});

  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST(MappedFile, WriteFileAtomicIntoMissingDirectoryFails) {
  TempDir dir;
  const std::string path = dir.file("no_such_dir/out.bin");
  Status s = write_file_atomic(path, as_bytes("abc"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find(path), std::string_view::npos) << s.message();
}

TEST(MappedFile, WriteFileAtomicOntoADirectoryFails) {
  TempDir dir;
  ASSERT_TRUE(std::filesystem::create_directory(dir.file("sub")));
  Status s = write_file_atomic(dir.file("sub"), as_bytes("abc"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(dir.file("sub")), std::string_view::npos) << s.message();
  EXPECT_TRUE(std::filesystem::is_directory(dir.file("sub")));
}

TEST(MappedFile, ConcurrentAtomicWritersNeverInterleave) {
  TempDir dir;
  const std::string path = dir.file("contended.bin");
  constexpr int kThreads = 4;
  constexpr int kRounds = 20;
  std::vector<std::string> payloads;
  for (int t = 0; t < kThreads; ++t) payloads.emplace_back(256 * 1024, static_cast<char>('a' + t));
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        if (!write_file_atomic(path, as_bytes(payloads[static_cast<size_t>(t)])).ok()) {
          ++failures[static_cast<size_t>(t)];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[static_cast<size_t>(t)], 0) << t;
  Result<std::string> read = read_file(path);
  ASSERT_TRUE(read.ok());
  bool matches_one = false;
  for (const std::string& p : payloads) matches_one = matches_one || *read == p;
  EXPECT_TRUE(matches_one) << "the file mixes the writers' bytes";
}

}  // namespace
}  // namespace kiln
