// SPDX-License-Identifier: Apache-2.0
// The misc op family: attribute structs (ONNX semantics at the newest opset kiln imports).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/op.h"

namespace kiln::compiler::ops {

// NegativeLogLikelihoodLoss: see the ONNX operator documentation (opset 13).
struct NegativeLogLikelihoodLoss {
  static constexpr OpKind kKind = OpKind::kNegativeLogLikelihoodLoss;
  std::optional<int64_t> ignore_index;
  std::string reduction = "mean";

  template <class V>
  void reflect(V& v) {
    v("ignore_index", ignore_index);
    v("reduction", reduction);
  }
};

// SoftmaxCrossEntropyLoss: see the ONNX operator documentation (opset 13).
struct SoftmaxCrossEntropyLoss {
  static constexpr OpKind kKind = OpKind::kSoftmaxCrossEntropyLoss;
  std::optional<int64_t> ignore_index;
  std::string reduction = "mean";

  template <class V>
  void reflect(V& v) {
    v("ignore_index", ignore_index);
    v("reduction", reduction);
  }
};

// StringNormalizer: see the ONNX operator documentation (opset 10).
struct StringNormalizer {
  static constexpr OpKind kKind = OpKind::kStringNormalizer;
  std::string case_change_action = "NONE";
  int64_t is_case_sensitive = 0;
  std::optional<std::string> locale;
  std::vector<std::string> stopwords;

  template <class V>
  void reflect(V& v) {
    v("case_change_action", case_change_action);
    v("is_case_sensitive", is_case_sensitive);
    v("locale", locale);
    v("stopwords", stopwords);
  }
};

// TfIdfVectorizer: see the ONNX operator documentation (opset 9).
struct TfIdfVectorizer {
  static constexpr OpKind kKind = OpKind::kTfIdfVectorizer;
  std::optional<int64_t> max_gram_length;
  std::optional<int64_t> max_skip_count;
  std::optional<int64_t> min_gram_length;
  std::optional<std::string> mode;
  std::optional<std::vector<int64_t>> ngram_counts;
  std::optional<std::vector<int64_t>> ngram_indexes;
  std::optional<std::vector<int64_t>> pool_int64s;
  std::vector<std::string> pool_strings;
  std::optional<std::vector<float>> weights;

  template <class V>
  void reflect(V& v) {
    v("max_gram_length", max_gram_length);
    v("max_skip_count", max_skip_count);
    v("min_gram_length", min_gram_length);
    v("mode", mode);
    v("ngram_counts", ngram_counts);
    v("ngram_indexes", ngram_indexes);
    v("pool_int64s", pool_int64s);
    v("pool_strings", pool_strings);
    v("weights", weights);
  }
};

// StringConcat: see the ONNX operator documentation (opset 20).
struct StringConcat {
  static constexpr OpKind kKind = OpKind::kStringConcat;
  template <class V>
  void reflect(V&) {}
};

// StringSplit: see the ONNX operator documentation (opset 20). Output 0 gains an axis as long as
// the most substrings of any element, padded with ""; output 1 counts each element's substrings.
struct StringSplit {
  static constexpr OpKind kKind = OpKind::kStringSplit;
  std::optional<std::string> delimiter;  // absent or "": runs of whitespace, ends trimmed
  std::optional<int64_t> maxsplit;

  template <class V>
  void reflect(V& v) {
    v("delimiter", delimiter);
    v("maxsplit", maxsplit);
  }
};

// RegexFullMatch: see the ONNX operator documentation (opset 20); RE2 syntax.
struct RegexFullMatch {
  static constexpr OpKind kKind = OpKind::kRegexFullMatch;
  std::optional<std::string> pattern;

  template <class V>
  void reflect(V& v) {
    v("pattern", pattern);
  }
};

// Adagrad: see the ONNX operator documentation (opset 1).
struct Adagrad {
  static constexpr OpKind kKind = OpKind::kAdagrad;
  float decay_factor = 0.0f;
  float epsilon = 9.99999997e-07f;
  float norm_coefficient = 0.0f;

  template <class V>
  void reflect(V& v) {
    v("decay_factor", decay_factor);
    v("epsilon", epsilon);
    v("norm_coefficient", norm_coefficient);
  }
};

// Adam: see the ONNX operator documentation (opset 1).
struct Adam {
  static constexpr OpKind kKind = OpKind::kAdam;
  float alpha = 0.899999976f;
  float beta = 0.999000013f;
  float epsilon = 9.99999997e-07f;
  float norm_coefficient = 0.0f;
  float norm_coefficient_post = 0.0f;

  template <class V>
  void reflect(V& v) {
    v("alpha", alpha);
    v("beta", beta);
    v("epsilon", epsilon);
    v("norm_coefficient", norm_coefficient);
    v("norm_coefficient_post", norm_coefficient_post);
  }
};

// Momentum: see the ONNX operator documentation (opset 1).
struct Momentum {
  static constexpr OpKind kKind = OpKind::kMomentum;
  std::optional<float> alpha;
  std::optional<float> beta;
  std::optional<std::string> mode;
  std::optional<float> norm_coefficient;

  template <class V>
  void reflect(V& v) {
    v("alpha", alpha);
    v("beta", beta);
    v("mode", mode);
    v("norm_coefficient", norm_coefficient);
  }
};

}  // namespace kiln::compiler::ops
