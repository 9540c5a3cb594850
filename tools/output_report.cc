// SPDX-License-Identifier: Apache-2.0
// Reporting `kiln run`'s outputs.
#include "tools/output_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace kiln::tools {

std::vector<std::vector<ClassScore>> top_classes(const Tensor& t, int k) {
  std::vector<std::vector<ClassScore>> rows;
  if (k <= 0 || t.dtype() == DType::kString || t.rank() < 1) return rows;
  const int64_t width = t.shape()[t.rank() - 1];
  if (width < 2) return rows;
  std::vector<double> values(static_cast<size_t>(t.numel()));
  visit_dtype(t.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, std::string>) {
      for (size_t i = 0; i < values.size(); ++i) {
        if constexpr (std::is_same_v<T, double>) {
          values[i] = t.data<T>()[i];
        } else {
          values[i] = static_cast<double>(static_cast<float>(t.data<T>()[i]));
        }
      }
    }
  });
  const auto n = static_cast<size_t>(std::min<int64_t>(k, width));
  for (int64_t r = 0; r < t.numel() / width; ++r) {
    const double* row = values.data() + r * width;
    std::vector<int64_t> order(static_cast<size_t>(width));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return row[a] > row[b]; });
    std::vector<ClassScore> top;
    for (size_t i = 0; i < n; ++i) top.push_back({order[i], row[order[i]]});
    rows.push_back(std::move(top));
  }
  return rows;
}

std::string top_classes_text(const std::string& name,
                             const std::vector<std::vector<ClassScore>>& rows) {
  std::string out;
  for (size_t r = 0; r < rows.size(); ++r) {
    const std::string label = rows.size() == 1 ? name : fmt::format("{}[{}]", name, r);
    if (rows[r].size() == 1) {
      out +=
          fmt::format("{}: class {} (score {:.4g})\n", label, rows[r][0].index, rows[r][0].score);
      continue;
    }
    std::vector<std::string> parts;
    for (const ClassScore& c : rows[r])
      parts.push_back(fmt::format("{} ({:.4g})", c.index, c.score));
    out += fmt::format("{}: classes {}\n", label, fmt::join(parts, ", "));
  }
  return out;
}

void output_json(JsonWriter& j, const std::string& name, const compiler::Argument& value, int top) {
  j.begin_object().field("name", name);
  if (!value.is_tensor()) {
    j.field("value", value.to_string()).end_object();
    return;
  }
  const Tensor& t = value.tensor();
  j.field("dtype", std::string(dtype_name(t.dtype()))).field("shape", t.shape().dims());
  j.key("values");
  if (t.numel() > kMaxJsonValues) {
    j.null();
  } else {
    j.begin_array();
    visit_dtype(t.dtype(), [&]<class T>() {
      for (int64_t i = 0; i < t.numel(); ++i) {
        const T& v = t.data<T>()[i];
        if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, bool> ||
                      std::is_same_v<T, double> || std::is_same_v<T, float>) {
          j.value(v);
        } else if constexpr (std::is_integral_v<T>) {
          j.value(v);
        } else {
          j.value(static_cast<float>(v));  // f16, bf16, f8
        }
      }
    });
    j.end_array();
  }
  if (top > 0) {
    j.key("top").begin_array();
    for (const std::vector<ClassScore>& row : top_classes(t, top)) {
      j.begin_array();
      for (const ClassScore& c : row) {
        j.begin_object().field("class", c.index).key("score");
        if (t.dtype() == DType::kF64) {
          j.value(c.score);
        } else {
          j.value(static_cast<float>(c.score));  // exact: the score came from a narrower type
        }
        j.end_object();
      }
      j.end_array();
    }
    j.end_array();
  }
  j.end_object();
}

}  // namespace kiln::tools
