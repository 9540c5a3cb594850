// SPDX-License-Identifier: Apache-2.0
// ref kernels for the string ops of the misc family: StringConcat, StringSplit, RegexFullMatch.
#include <re2/re2.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ops/misc.h"
#include "compiler/targets/ref/kernel.h"
#include "compiler/targets/ref/ref_util.h"

namespace kiln::compiler::ref {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Python's str.split(delimiter, maxsplit): without a delimiter, runs of whitespace separate and
// leading and trailing whitespace is dropped.
std::vector<std::string> split(std::string_view s, const std::string& delimiter, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (delimiter.empty()) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && is_space(s[i])) ++i;
      if (i == s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t end = s.size();
        while (end > i && is_space(s[end - 1])) --end;
        parts.emplace_back(s.substr(i, end - i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_space(s[j])) ++j;
      parts.emplace_back(s.substr(i, j - i));
      i = j;
    }
    return parts;
  }
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    const size_t at = s.find(delimiter, start);
    if (at == std::string_view::npos) break;
    parts.emplace_back(s.substr(start, at - start));
    start = at + delimiter.size();
  }
  parts.emplace_back(s.substr(start));
  return parts;
}

}  // namespace

template <>
Status run_op(const ops::StringConcat&, KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& out = ctx.output(0);
  const std::string* pa = a.data<std::string>();
  const std::string* pb = b.data<std::string>();
  std::string* po = out.data<std::string>();
  for_each_broadcast(out.shape(), a.shape(), b.shape(),
                     [&](int64_t o, int64_t i, int64_t j) { po[o] = pa[i] + pb[j]; });
  return Status();
}

template <>
Status run_op(const ops::StringSplit& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::string* px = x.data<std::string>();
  std::vector<std::vector<std::string>> parts(static_cast<size_t>(x.numel()));
  size_t widest = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    parts[static_cast<size_t>(i)] =
        split(px[i], op.delimiter.value_or(""), op.maxsplit.value_or(-1));
    widest = std::max(widest, parts[static_cast<size_t>(i)].size());
  }
  std::vector<int64_t> dims(x.shape().begin(), x.shape().end());
  dims.push_back(static_cast<int64_t>(widest));
  KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kString, Shape(dims)));
  KILN_ASSIGN_OR_RETURN(Tensor * counts, ctx.allocate_output(1, DType::kI64, x.shape()));
  std::string* py = y->data<std::string>();
  int64_t* pc = counts->data<int64_t>();
  for (size_t i = 0; i < parts.size(); ++i) {
    std::move(parts[i].begin(), parts[i].end(), py + i * widest);
    pc[i] = static_cast<int64_t>(parts[i].size());
  }
  return Status();
}

template <>
Status run_op(const ops::RegexFullMatch& op, KernelContext& ctx) {
  RE2 re(op.pattern.value_or(""), RE2::Quiet);
  if (!re.ok()) return ctx.errorf("pattern is not a valid RE2 regex: {}", re.error());
  const Tensor& x = ctx.input(0);
  const std::string* px = x.data<std::string>();
  bool* py = ctx.output(0).data<bool>();
  for (int64_t i = 0; i < x.numel(); ++i) py[i] = RE2::FullMatch(px[i], re);
  return Status();
}

}  // namespace kiln::compiler::ref
