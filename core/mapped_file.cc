// SPDX-License-Identifier: Apache-2.0
// mmap-backed read-only files and whole-file helpers.
#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>

#include <fmt/format.h>

namespace kiln {

namespace {
// Closes a file descriptor on scope exit.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

Result<int> open_regular_file(const std::string& path, struct stat* st) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_error(errno, fmt::format("cannot open \"{}\"", path));
  if (::fstat(fd, st) != 0) {
    int err = errno;
    ::close(fd);
    return errno_error(err, fmt::format("cannot stat \"{}\"", path));
  }
  if (!S_ISREG(st->st_mode)) {
    ::close(fd);
    return invalid_argument_error(fmt::format("\"{}\" is not a regular file", path));
  }
  return fd;
}
}  // namespace

Result<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  struct stat st {};
  KILN_ASSIGN_OR_RETURN(int fd, open_regular_file(path, &st));
  FdCloser closer{fd};
  auto size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    return std::shared_ptr<const MappedFile>(new MappedFile(path, nullptr, 0));
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) return errno_error(errno, fmt::format("cannot map \"{}\"", path));
  return std::shared_ptr<const MappedFile>(
      new MappedFile(path, static_cast<const uint8_t*>(p), size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void release_file_pages(std::span<const uint8_t> range) {
  static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(range.data());
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + range.size()) / page * page;
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

Result<std::string> read_file(const std::string& path) {
  struct stat st {};
  KILN_ASSIGN_OR_RETURN(int fd, open_regular_file(path, &st));
  FdCloser closer{fd};
  // Reads to EOF rather than trusting st_size: procfs and sysfs files report a size of 0.
  std::string out(st.st_size > 0 ? static_cast<size_t>(st.st_size) + 1 : 4096, '\0');
  size_t done = 0;
  for (;;) {
    if (done == out.size()) out.resize(out.size() * 2);
    ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error(errno, fmt::format("cannot read \"{}\"", path));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return out;
}

Status write_file_atomic(const std::string& path, std::span<const uint8_t> bytes) {
  // Unique per call, so that concurrent writers of one path never share a temporary file.
  static std::atomic<uint64_t> counter{0};
  std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter.fetch_add(1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno_error(errno, fmt::format("cannot create \"{}\"", tmp));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return errno_error(err, fmt::format("cannot write \"{}\"", path));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return errno_error(err, fmt::format("cannot write \"{}\"", path));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return errno_error(err, fmt::format("cannot move \"{}\" into place", path));
  }
  return Status();
}

}  // namespace kiln
