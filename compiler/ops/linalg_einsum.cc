// SPDX-License-Identifier: Apache-2.0
// Einsum equation parsing.
#include "compiler/ops/linalg_einsum.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace kiln::compiler {

namespace {

int letter_label(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
  return -1;
}

// One term of the equation: its letters' labels, with -1 where the ellipsis stands.
Result<std::vector<int>> parse_term(std::string_view term) {
  std::vector<int> labels;
  bool ellipsis = false;
  for (size_t i = 0; i < term.size();) {
    if (term.substr(i, 3) == "...") {
      if (ellipsis)
        return invalid_argument_error(fmt::format("einsum term \"{}\" has two ellipses", term));
      ellipsis = true;
      labels.push_back(-1);
      i += 3;
      continue;
    }
    int l = letter_label(term[i]);
    if (l < 0) {
      return invalid_argument_error(fmt::format(
          "expected letters or \"...\" in einsum term \"{}\", got '{}'", term, term[i]));
    }
    labels.push_back(l);
    ++i;
  }
  return labels;
}

}  // namespace

Result<EinsumEquation> parse_einsum(std::string_view equation, const std::vector<int>& ranks) {
  std::string eq;
  for (char c : equation) {
    if (c != ' ') eq.push_back(c);
  }
  std::string_view lhs = eq;
  std::string_view rhs;
  const size_t arrow = lhs.find("->");
  const bool explicit_output = arrow != std::string_view::npos;
  if (explicit_output) {
    rhs = lhs.substr(arrow + 2);
    lhs = lhs.substr(0, arrow);
  }
  std::vector<std::vector<int>> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    std::string_view term =
        lhs.substr(start, comma == std::string_view::npos ? lhs.npos : comma - start);
    KILN_ASSIGN_OR_RETURN(std::vector<int> labels, parse_term(term));
    terms.push_back(std::move(labels));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (terms.size() != ranks.size()) {
    return invalid_argument_error(
        fmt::format("einsum equation \"{}\" has {} input terms, got {} inputs", equation,
                    terms.size(), ranks.size()));
  }
  // Ellipsis widths, then the widest.
  std::vector<int> widths(terms.size(), 0);
  int widest = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    bool has = false;
    int letters = 0;
    for (int l : terms[i]) {
      if (l < 0) {
        has = true;
      } else {
        ++letters;
      }
    }
    const int width = ranks[i] - letters;
    if ((!has && width != 0) || width < 0) {
      return invalid_argument_error(
          fmt::format("einsum term {} of \"{}\" names {} dims, got an input of rank {}", i,
                      equation, letters, ranks[i]));
    }
    widths[i] = width;
    widest = std::max(widest, width);
  }
  EinsumEquation result;
  result.num_labels = EinsumEquation::kNumLetters + widest;
  auto expand = [&](const std::vector<int>& term, int width, std::vector<int>& out) {
    for (int l : term) {
      if (l >= 0) {
        out.push_back(l);
      } else {
        for (int j = widest - width; j < widest; ++j) {
          out.push_back(EinsumEquation::kNumLetters + j);
        }
      }
    }
  };
  std::vector<int> count(EinsumEquation::kNumLetters, 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    std::vector<int> labels;
    expand(terms[i], widths[i], labels);
    for (int l : terms[i]) {
      if (l >= 0) ++count[static_cast<size_t>(l)];
    }
    result.inputs.push_back(std::move(labels));
  }
  if (explicit_output) {
    KILN_ASSIGN_OR_RETURN(std::vector<int> out_term, parse_term(rhs));
    std::vector<bool> seen(EinsumEquation::kNumLetters, false);
    bool out_ellipsis = false;
    for (int l : out_term) {
      if (l < 0) {
        out_ellipsis = true;
        continue;
      }
      if (count[static_cast<size_t>(l)] == 0) {
        return invalid_argument_error(
            fmt::format("einsum output \"{}\" uses a letter no input term has", std::string(rhs)));
      }
      if (seen[static_cast<size_t>(l)]) {
        return invalid_argument_error(
            fmt::format("einsum output \"{}\" repeats a letter", std::string(rhs)));
      }
      seen[static_cast<size_t>(l)] = true;
    }
    if (widest > 0 && !out_ellipsis) {
      return invalid_argument_error(fmt::format(
          "einsum output \"{}\" has no \"...\" for the {} dims the inputs' ellipses stand for",
          std::string(rhs), widest));
    }
    expand(out_term, widest, result.output);
  } else {
    for (int j = 0; j < widest; ++j) result.output.push_back(EinsumEquation::kNumLetters + j);
    for (int l = 0; l < EinsumEquation::kNumLetters; ++l) {
      if (count[static_cast<size_t>(l)] == 1) result.output.push_back(l);
    }
  }
  return result;
}

}  // namespace kiln::compiler
