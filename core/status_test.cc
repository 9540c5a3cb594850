// SPDX-License-Identifier: Apache-2.0
// Tests for Status, Result<T> and the propagation macros.
#include "core/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace kiln {
namespace {

Status fail_if_negative(int x) {
  if (x < 0) return invalid_argument_error("x is negative: " + std::to_string(x));
  return Status();
}

Result<int> half_of(int x) {
  KILN_RETURN_IF_ERROR(fail_if_negative(x));
  if (x % 2 != 0) return out_of_range_error("odd: " + std::to_string(x));
  return x / 2;
}

// Two levels of KILN_ASSIGN_OR_RETURN on top of KILN_RETURN_IF_ERROR.
Result<int> quarter_of(int x) {
  KILN_ASSIGN_OR_RETURN(int half, half_of(x));
  KILN_ASSIGN_OR_RETURN(int quarter, half_of(half));
  return quarter;
}

Status check_quarter(int x, int* out) {
  KILN_ASSIGN_OR_RETURN(*out, quarter_of(x));
  KILN_RETURN_IF_ERROR(quarter_of(x));  // a Result is accepted as well as a Status
  return Status();
}

TEST(Status, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.to_string(), "OK");
  EXPECT_EQ(s, Status::ok_status());
  // An ok code with a message is still ok and carries no message.
  Status ok_with_message(StatusCode::kOk, "ignored");
  EXPECT_TRUE(ok_with_message.ok());
  EXPECT_EQ(ok_with_message.message(), "");
}

TEST(Status, CodesAndMessages) {
  struct Case {
    Status status;
    StatusCode code;
    std::string_view name;
  };
  const std::vector<Case> cases = {
      {cancelled_error("m"), StatusCode::kCancelled, "CANCELLED"},
      {unknown_error("m"), StatusCode::kUnknown, "UNKNOWN"},
      {invalid_argument_error("m"), StatusCode::kInvalidArgument, "INVALID_ARGUMENT"},
      {deadline_exceeded_error("m"), StatusCode::kDeadlineExceeded, "DEADLINE_EXCEEDED"},
      {not_found_error("m"), StatusCode::kNotFound, "NOT_FOUND"},
      {already_exists_error("m"), StatusCode::kAlreadyExists, "ALREADY_EXISTS"},
      {permission_denied_error("m"), StatusCode::kPermissionDenied, "PERMISSION_DENIED"},
      {resource_exhausted_error("m"), StatusCode::kResourceExhausted, "RESOURCE_EXHAUSTED"},
      {failed_precondition_error("m"), StatusCode::kFailedPrecondition, "FAILED_PRECONDITION"},
      {aborted_error("m"), StatusCode::kAborted, "ABORTED"},
      {out_of_range_error("m"), StatusCode::kOutOfRange, "OUT_OF_RANGE"},
      {unimplemented_error("m"), StatusCode::kUnimplemented, "UNIMPLEMENTED"},
      {internal_error("m"), StatusCode::kInternal, "INTERNAL"},
      {unavailable_error("m"), StatusCode::kUnavailable, "UNAVAILABLE"},
      {data_loss_error("m"), StatusCode::kDataLoss, "DATA_LOSS"},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(c.status.ok()) << c.name;
    EXPECT_EQ(c.status.code(), c.code) << c.name;
    EXPECT_EQ(c.status.message(), "m") << c.name;
    EXPECT_EQ(status_code_name(c.code), c.name);
    EXPECT_EQ(c.status.to_string(), std::string(c.name) + ": m");
  }
  EXPECT_EQ(status_code_name(StatusCode::kUnauthenticated), "UNAUTHENTICATED");
  EXPECT_EQ(status_code_name(static_cast<StatusCode>(99)), "UNKNOWN_CODE");
}

TEST(Status, Equality) {
  EXPECT_EQ(not_found_error("a"), not_found_error("a"));
  EXPECT_FALSE(not_found_error("a") == not_found_error("b"));
  EXPECT_FALSE(not_found_error("a") == internal_error("a"));
  EXPECT_FALSE(not_found_error("a") == Status());
}

TEST(Status, CopiesShareNothingObservable) {
  Status a = internal_error("boom");
  Status b = a;
  Status c = std::move(a);
  EXPECT_EQ(b.code(), StatusCode::kInternal);
  EXPECT_EQ(b.message(), "boom");
  EXPECT_EQ(c, b);
  Status d = b.with_context("outer");
  EXPECT_EQ(b.message(), "boom");  // with_context leaves the original alone
  EXPECT_EQ(d.message(), "outer: boom");
}

TEST(Status, WithContext) {
  Status s = not_found_error("file \"x\" is missing").with_context("model \"m\"");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "model \"m\": file \"x\" is missing");
  EXPECT_EQ(s.with_context("load").to_string(),
            "NOT_FOUND: load: model \"m\": file \"x\" is missing");
  EXPECT_TRUE(Status().with_context("anything").ok());
  EXPECT_EQ(Status().with_context("anything").message(), "");
}

TEST(Status, ErrnoErrorMapping) {
  struct Case {
    int err;
    StatusCode code;
  };
  const Case cases[] = {
      {ENOENT, StatusCode::kNotFound},
      {ENOTDIR, StatusCode::kNotFound},
      {EACCES, StatusCode::kPermissionDenied},
      {EPERM, StatusCode::kPermissionDenied},
      {EROFS, StatusCode::kPermissionDenied},
      {EEXIST, StatusCode::kAlreadyExists},
      {ENOMEM, StatusCode::kResourceExhausted},
      {ENOSPC, StatusCode::kResourceExhausted},
      {EMFILE, StatusCode::kResourceExhausted},
      {ENFILE, StatusCode::kResourceExhausted},
      {EINVAL, StatusCode::kInvalidArgument},
      {EISDIR, StatusCode::kInvalidArgument},
      {ENAMETOOLONG, StatusCode::kInvalidArgument},
      {EAGAIN, StatusCode::kUnavailable},
      {EINTR, StatusCode::kUnavailable},
      {EIO, StatusCode::kUnknown},
  };
  for (const Case& c : cases) {
    Status s = errno_error(c.err, "cannot open \"/tmp/x\"");
    EXPECT_EQ(s.code(), c.code) << std::strerror(c.err);
    EXPECT_EQ(s.message(), std::string("cannot open \"/tmp/x\": ") + std::strerror(c.err));
  }
  EXPECT_EQ(errno_error(ENOENT, "open").message(), "open: No such file or directory");
}

TEST(Status, ReturnIfErrorPropagatesThroughNestedCalls) {
  int out = -1;
  EXPECT_TRUE(check_quarter(12, &out).ok());
  EXPECT_EQ(out, 3);

  Status negative = check_quarter(-8, &out);
  EXPECT_EQ(negative.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(negative.message(), "x is negative: -8");

  // 6 halves to 3, and the second half_of fails on the odd value.
  out = -1;
  Status odd = check_quarter(6, &out);
  EXPECT_EQ(odd.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(odd.message(), "odd: 3");
  EXPECT_EQ(out, -1);  // not assigned on failure
}

TEST(Status, ResultValueAndError) {
  Result<int> good = half_of(10);
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(good.status().ok());
  EXPECT_EQ(good.value(), 5);
  EXPECT_EQ(*good, 5);
  EXPECT_EQ(good.value_or(-1), 5);

  Result<int> bad = quarter_of(7);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(bad.status().message(), "odd: 7");
  EXPECT_EQ(bad.value_or(-1), -1);
}

TEST(Status, ResultConvertingConstructor) {
  Result<std::string> r = "text";  // const char* converts to std::string
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "text");
  EXPECT_EQ(r->size(), 4u);
  Result<int64_t> wide = 7;  // int converts to int64_t
  EXPECT_EQ(*wide, 7);
}

Result<std::unique_ptr<int>> make_unique_int(int v) {
  if (v < 0) return invalid_argument_error("negative");
  return std::make_unique<int>(v);
}

Result<std::unique_ptr<int>> doubled_unique(int v) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<int> p, make_unique_int(v));
  *p *= 2;
  return p;
}

TEST(Status, ResultWithMoveOnlyType) {
  Result<std::unique_ptr<int>> r = doubled_unique(21);
  ASSERT_TRUE(r.ok());
  ASSERT_NE(r.value(), nullptr);
  EXPECT_EQ(*r.value(), 42);

  std::unique_ptr<int> taken = std::move(r).value();
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(*taken, 42);

  Result<std::unique_ptr<int>> moved = doubled_unique(5);
  Result<std::unique_ptr<int>> target = std::move(moved);
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(**target, 10);

  Result<std::unique_ptr<int>> err = doubled_unique(-1);
  EXPECT_EQ(err.status().code(), StatusCode::kInvalidArgument);
  target = std::move(err);
  EXPECT_FALSE(target.ok());
  EXPECT_EQ(target.status().message(), "negative");
}

// Counts live instances so copies, moves and destruction can be checked exactly.
struct Counted {
  static inline int live = 0;
  std::string value;
  explicit Counted(std::string v) : value(std::move(v)) { ++live; }
  Counted(const Counted& o) : value(o.value) { ++live; }
  Counted(Counted&& o) noexcept : value(std::move(o.value)) { ++live; }
  Counted& operator=(const Counted&) = default;
  Counted& operator=(Counted&&) = default;
  ~Counted() { --live; }
};

TEST(Status, ResultCopyAndMove) {
  Counted::live = 0;
  {
    Result<Counted> a = Counted("alpha");
    EXPECT_EQ(Counted::live, 1);
    Result<Counted> b = a;  // copy
    EXPECT_EQ(Counted::live, 2);
    EXPECT_EQ(b->value, "alpha");
    EXPECT_EQ(a->value, "alpha");
    b->value = "beta";
    EXPECT_EQ(a->value, "alpha");  // independent copies

    Result<Counted> c = std::move(b);
    EXPECT_EQ(c->value, "beta");

    Result<Counted> err = not_found_error("gone");
    const int before = Counted::live;
    c = err;  // assigning an error destroys the held value
    EXPECT_EQ(Counted::live, before - 1);
    EXPECT_FALSE(c.ok());
    EXPECT_EQ(c.status(), not_found_error("gone"));

    c = a;  // and assigning a value back constructs one
    EXPECT_EQ(Counted::live, before);
    EXPECT_EQ(c->value, "alpha");

    Result<Counted>& self = c;
    c = self;  // self-assignment keeps the value
    EXPECT_EQ(c->value, "alpha");

    Result<Counted> d = err;
    d = std::move(c);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->value, "alpha");
  }
  EXPECT_EQ(Counted::live, 0);
}

TEST(Status, ResultStatusRvalueMovesOut) {
  Result<int> r = data_loss_error("corrupt");
  Status s = std::move(r).status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "corrupt");
}

TEST(StatusDeathTest, ResultFromOkStatusAborts) {
  EXPECT_DEATH({ Result<int> r{Status()}; }, "Result constructed from an ok Status");
}

TEST(StatusDeathTest, ValueOfErrorAborts) {
  EXPECT_DEATH(
      {
        Result<int> r = not_found_error("no such thing");
        (void)r.value();
      },
      "Result has no value: NOT_FOUND: no such thing");
}

}  // namespace
}  // namespace kiln
