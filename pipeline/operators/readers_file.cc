// SPDX-License-Identifier: Apache-2.0
// readers.file: (encoded bytes, label) samples from a class-folder tree or a file list.
#include "pipeline/operators/readers_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "pipeline/kernels/buffer.h"
#include "pipeline/operators/operators.h"

namespace kiln::pipeline {

std::vector<ArgSpec> with_common_reader_args(std::vector<ArgSpec> own) {
  own.insert(
      own.end(),
      {
          {"shard_id", ArgType::kInt, int64_t{0}, "which shard this pipeline reads"},
          {"num_shards", ArgType::kInt, int64_t{1}, "how many shards the data set is split into"},
          {"random_shuffle", ArgType::kBool, false, "shuffle the samples every epoch"},
          {"seed", ArgType::kInt, int64_t{-1}, "shuffle seed; -1 takes the pipeline seed"},
          {"last_batch_policy", ArgType::kString, std::string("partial"),
           "last batch of an epoch: fill, drop or partial"},
      });
  return own;
}

Status read_common_reader_args(const OpArgs& args, uint64_t pipeline_seed, FileReaderOptions* o) {
  o->shard_id = args.get_int("shard_id");
  o->num_shards = args.get_int("num_shards");
  o->random_shuffle = args.get_bool("random_shuffle");
  int64_t seed = args.get_int("seed");
  o->seed = seed == -1 ? pipeline_seed : static_cast<uint64_t>(seed);
  KILN_ASSIGN_OR_RETURN(o->last_batch_policy,
                        parse_last_batch_policy(args.get_string("last_batch_policy")));
  return Status();
}

Result<FileReaderOptions> file_reader_options(const OpArgs& args, uint64_t pipeline_seed) {
  FileReaderOptions o;
  o.file_root = args.get_string("file_root");
  o.file_list = args.get_string("file_list");
  KILN_RETURN_IF_ERROR(read_common_reader_args(args, pipeline_seed, &o));
  return o;
}

Result<Tensor> read_encoded(const std::string& path, int64_t offset, int64_t length) {
  // read() into heap memory rather than mmap: unmapping a file in a process whose other threads
  // are running costs a TLB shootdown on every core, per sample.
  struct Fd {
    int fd;
    ~Fd() {
      if (fd >= 0) ::close(fd);
    }
  } file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) return errno_error(errno, fmt::format("cannot open \"{}\"", path));
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) {
    return errno_error(errno, fmt::format("cannot stat \"{}\"", path));
  }
  if (!S_ISREG(st.st_mode)) {
    return invalid_argument_error(fmt::format("\"{}\" is not a regular file", path));
  }
  if (offset >= 0 && offset + length > st.st_size) {
    return out_of_range_error(fmt::format("\"{}\" has {} bytes: no record of {} bytes at {}", path,
                                          st.st_size, length, offset));
  }
  const auto size = static_cast<size_t>(offset >= 0 ? length : st.st_size);
  const auto start = static_cast<off_t>(offset >= 0 ? offset : 0);
  KILN_ASSIGN_OR_RETURN(
      Tensor bytes, kernels::allocate_uninitialized(DType::kU8, Shape{static_cast<int64_t>(size)}));
  auto* out = bytes.data<uint8_t>();
  for (size_t done = 0; done < size;) {
    ssize_t n = ::pread(file.fd, out + done, size - done, start + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error(errno, fmt::format("cannot read \"{}\"", path));
    if (n == 0) {
      return data_loss_error(fmt::format("file \"{}\" shrank while being read", path));
    }
    done += static_cast<size_t>(n);
  }
  return bytes;
}

namespace detail {

const OperatorSchema& readers_file_schema() {
  static const OperatorSchema schema{
      "readers.file",
      "reads encoded files and integer labels from a class-folder tree or a file list",
      {},
      {"encoded", "label"},
      with_common_reader_args({
          {"file_root", ArgType::kString, std::string(), "folder whose sub-folders are classes"},
          {"file_list", ArgType::kString, std::string(), "text file of \"path label\" lines"},
      })};
  return schema;
}

Result<std::unique_ptr<Operator>> make_readers_file(OpArgs args) {
  KILN_ASSIGN_OR_RETURN(FileReaderOptions options, file_reader_options(args, 0));
  if (options.file_root.empty() && options.file_list.empty()) {
    return invalid_argument_error("operator readers.file: set file_root or file_list");
  }
  return std::unique_ptr<Operator>(new ReaderOperator(std::move(args)));
}

}  // namespace detail
}  // namespace kiln::pipeline
