// SPDX-License-Identifier: Apache-2.0
// Status and Result<T>: how every kiln library reports a failure the caller can act on.
#pragma once

#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "core/check.h"

namespace kiln {

// The canonical codes (the same set gRPC and abseil use), so the server maps them 1:1 to HTTP and
// gRPC statuses at its edge.
enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// "INVALID_ARGUMENT" etc.; "UNKNOWN_CODE" for a value outside the enum.
std::string_view status_code_name(StatusCode code);

// The outcome of an operation: ok, or a code with a message. Cheap to copy when ok (one pointer).
// Messages start lower-case and name the thing that failed, what was expected and what was found.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message);

  static Status ok_status() { return Status(); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  std::string_view message() const { return state_ ? std::string_view(state_->message) : ""; }

  // "INVALID_ARGUMENT: conv \"c1\": expected 4-D input"; "OK" when ok.
  std::string to_string() const;

  // A copy whose message is `context + ": " + message()`; ok stays ok.
  Status with_context(std::string_view context) const;

  // Marks an error as deliberately dropped.
  void ignore_error() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code() == b.code() && a.message() == b.message();
  }

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const State> state_;
};

Status cancelled_error(std::string message);
Status unknown_error(std::string message);
Status invalid_argument_error(std::string message);
Status deadline_exceeded_error(std::string message);
Status not_found_error(std::string message);
Status already_exists_error(std::string message);
Status permission_denied_error(std::string message);
Status resource_exhausted_error(std::string message);
Status failed_precondition_error(std::string message);
Status aborted_error(std::string message);
Status out_of_range_error(std::string message);
Status unimplemented_error(std::string message);
Status internal_error(std::string message);
Status unavailable_error(std::string message);
Status data_loss_error(std::string message);

// A failed system call: `what` plus strerror(errno_value), with the code errno suggests
// (ENOENT -> kNotFound, EACCES -> kPermissionDenied, ENOMEM -> kResourceExhausted, ...).
Status errno_error(int errno_value, std::string_view what);

// A value of type T, or the Status that explains why there is none.
template <class T>
class [[nodiscard]] Result {
  static_assert(!std::is_reference_v<T>, "Result<T&> is not supported; use Result<T*>");
  static_assert(!std::is_same_v<std::decay_t<T>, Status>, "Result<Status> is not meaningful");

 public:
  Result(const T& value) : has_value_(true) { new (&value_) T(value); }  // NOLINT implicit
  Result(T&& value) : has_value_(true) { new (&value_) T(std::move(value)); }  // NOLINT implicit
  template <class U>
    requires(std::is_constructible_v<T, U&&> && !std::is_same_v<std::decay_t<U>, T> &&
             !std::is_same_v<std::decay_t<U>, Status> && !std::is_same_v<std::decay_t<U>, Result>)
  Result(U&& value) : has_value_(true) {  // NOLINT implicit
    new (&value_) T(std::forward<U>(value));
  }
  Result(Status status) : status_(std::move(status)) {  // NOLINT implicit
    KILN_CHECK(!status_.ok(), "Result constructed from an ok Status without a value");
  }

  Result(const Result& other) : status_(other.status_), has_value_(other.has_value_) {
    if (has_value_) new (&value_) T(other.value_);
  }
  Result(Result&& other) noexcept(std::is_nothrow_move_constructible_v<T>)
      : status_(std::move(other.status_)), has_value_(other.has_value_) {
    if (has_value_) new (&value_) T(std::move(other.value_));
  }
  Result& operator=(const Result& other) {
    if (this != &other) {
      reset();
      status_ = other.status_;
      has_value_ = other.has_value_;
      if (has_value_) new (&value_) T(other.value_);
    }
    return *this;
  }
  Result& operator=(Result&& other) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &other) {
      reset();
      status_ = std::move(other.status_);
      has_value_ = other.has_value_;
      if (has_value_) new (&value_) T(std::move(other.value_));
    }
    return *this;
  }
  ~Result() { reset(); }

  bool ok() const { return has_value_; }
  const Status& status() const& { return status_; }
  Status status() && { return std::move(status_); }

  T& value() & {
    check_value();
    return value_;
  }
  const T& value() const& {
    check_value();
    return value_;
  }
  T&& value() && {
    check_value();
    return std::move(value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }

  template <class U>
  T value_or(U&& fallback) const& {
    return has_value_ ? value_ : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  void check_value() const {
    KILN_CHECK(has_value_, "Result has no value: " + status_.to_string());
  }
  void reset() {
    if (has_value_) value_.~T();
    has_value_ = false;
  }

  Status status_;
  bool has_value_ = false;
  union {
    T value_;
  };
};

namespace detail {
inline Status to_status(Status status) { return status; }
template <class T>
Status to_status(const Result<T>& result) {
  return result.status();
}
}  // namespace detail

}  // namespace kiln

#define KILN_CONCAT_INNER_(a, b) a##b
#define KILN_CONCAT_(a, b) KILN_CONCAT_INNER_(a, b)

// Returns the Status of `expr` (a Status or a Result) from the enclosing function if it failed.
#define KILN_RETURN_IF_ERROR(expr)                                         \
  do {                                                                      \
    ::kiln::Status kiln_status_ = ::kiln::detail::to_status((expr));        \
    if (!kiln_status_.ok()) return kiln_status_;                            \
  } while (false)

// `KILN_ASSIGN_OR_RETURN(auto x, make_x());` declares/assigns the value or returns the error.
#define KILN_ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL_(KILN_CONCAT_(kiln_result_, __LINE__), lhs, expr)
#define KILN_ASSIGN_OR_RETURN_IMPL_(result, lhs, expr) \
  auto result = (expr);                                \
  if (!result.ok()) return std::move(result).status(); \
  lhs = std::move(result).value()
