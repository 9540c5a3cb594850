// SPDX-License-Identifier: Apache-2.0
// Status codes, messages and the errno mapping.
#include "core/status.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kiln {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kCancelled: return "CANCELLED";
    case StatusCode::kUnknown: return "UNKNOWN";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kAborted: return "ABORTED";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kDataLoss: return "DATA_LOSS";
    case StatusCode::kUnauthenticated: return "UNAUTHENTICATED";
  }
  return "UNKNOWN_CODE";
}

Status::Status(StatusCode code, std::string message) {
  if (code != StatusCode::kOk) state_ = std::make_shared<State>(State{code, std::move(message)});
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  std::string out(status_code_name(code()));
  out += ": ";
  out += message();
  return out;
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  std::string message(context);
  message += ": ";
  message += this->message();
  return Status(code(), std::move(message));
}

Status cancelled_error(std::string m) { return Status(StatusCode::kCancelled, std::move(m)); }
Status unknown_error(std::string m) { return Status(StatusCode::kUnknown, std::move(m)); }
Status invalid_argument_error(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
Status deadline_exceeded_error(std::string m) {
  return Status(StatusCode::kDeadlineExceeded, std::move(m));
}
Status not_found_error(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
Status already_exists_error(std::string m) {
  return Status(StatusCode::kAlreadyExists, std::move(m));
}
Status permission_denied_error(std::string m) {
  return Status(StatusCode::kPermissionDenied, std::move(m));
}
Status resource_exhausted_error(std::string m) {
  return Status(StatusCode::kResourceExhausted, std::move(m));
}
Status failed_precondition_error(std::string m) {
  return Status(StatusCode::kFailedPrecondition, std::move(m));
}
Status aborted_error(std::string m) { return Status(StatusCode::kAborted, std::move(m)); }
Status out_of_range_error(std::string m) { return Status(StatusCode::kOutOfRange, std::move(m)); }
Status unimplemented_error(std::string m) {
  return Status(StatusCode::kUnimplemented, std::move(m));
}
Status internal_error(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
Status unavailable_error(std::string m) { return Status(StatusCode::kUnavailable, std::move(m)); }
Status data_loss_error(std::string m) { return Status(StatusCode::kDataLoss, std::move(m)); }

Status errno_error(int errno_value, std::string_view what) {
  StatusCode code = StatusCode::kUnknown;
  switch (errno_value) {
    case ENOENT:
    case ENOTDIR: code = StatusCode::kNotFound; break;
    case EACCES:
    case EPERM:
    case EROFS: code = StatusCode::kPermissionDenied; break;
    case EEXIST: code = StatusCode::kAlreadyExists; break;
    case ENOMEM:
    case ENOSPC:
    case EMFILE:
    case ENFILE: code = StatusCode::kResourceExhausted; break;
    case EINVAL:
    case EISDIR:
    case ENAMETOOLONG: code = StatusCode::kInvalidArgument; break;
    case EAGAIN:
    case EINTR: code = StatusCode::kUnavailable; break;
    default: break;
  }
  std::string message(what);
  message += ": ";
  message += std::strerror(errno_value);
  return Status(code, std::move(message));
}

namespace detail {
void check_failed(const char* file, int line, const char* condition, std::string_view message) {
  std::fprintf(stderr, "kiln: check failed at %s:%d: %s%s%.*s\n", file, line, condition,
               message.empty() ? "" : ": ", static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
  std::abort();
}
}  // namespace detail

}  // namespace kiln
