// SPDX-License-Identifier: Apache-2.0
// The ml op family (ONNX's ai.onnx.ml domain): attribute structs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/op.h"

namespace kiln::compiler::ops {

// LabelEncoder: see the ONNX-ML operator documentation (ai.onnx.ml opset 4). The keys come from
// one of the keys_* attributes and the values from one of the values_*; the output takes the
// values' type, and inputs matching no key take the default of that type.
struct LabelEncoder {
  static constexpr OpKind kKind = OpKind::kLabelEncoder;
  float default_float = -0.0f;
  int64_t default_int64 = -1;
  std::string default_string = "_Unused";
  Tensor default_tensor;
  std::vector<float> keys_floats;  // (empty: not given)
  std::vector<int64_t> keys_int64s;
  std::vector<std::string> keys_strings;
  Tensor keys_tensor;
  std::vector<float> values_floats;
  std::vector<int64_t> values_int64s;
  std::vector<std::string> values_strings;
  Tensor values_tensor;

  template <class V>
  void reflect(V& v) {
    v("default_float", default_float);
    v("default_int64", default_int64);
    v("default_string", default_string);
    v("default_tensor", default_tensor);
    v("keys_floats", keys_floats);
    v("keys_int64s", keys_int64s);
    v("keys_strings", keys_strings);
    v("keys_tensor", keys_tensor);
    v("values_floats", values_floats);
    v("values_int64s", values_int64s);
    v("values_strings", values_strings);
    v("values_tensor", values_tensor);
  }
};

// TreeEnsemble: see the ONNX-ML operator documentation (ai.onnx.ml opset 5). Nodes and leaves are
// indexed arrays: node i compares feature nodes_featureids[i] with nodes_splits[i] by
// nodes_modes[i] and continues at nodes_truenodeids[i] (a leaf index when nodes_trueleafs[i]) or
// the false side; each leaf adds leaf_weights[l] to target leaf_targetids[l].
struct TreeEnsemble {
  static constexpr OpKind kKind = OpKind::kTreeEnsemble;
  int64_t aggregate_function = 1;  // 0 average, 1 sum, 2 min, 3 max
  std::vector<int64_t> leaf_targetids;
  Tensor leaf_weights;
  Tensor membership_values;  // the sets of MEMBER nodes, in node order, each ended by NaN
  std::optional<int64_t> n_targets;
  std::vector<int64_t> nodes_falseleafs;
  std::vector<int64_t> nodes_falsenodeids;
  std::vector<int64_t> nodes_featureids;
  Tensor nodes_hitrates;
  std::vector<int64_t> nodes_missing_value_tracks_true;
  Tensor nodes_modes;  // u8: 0 <=, 1 <, 2 >=, 3 >, 4 ==, 5 !=, 6 member of a set
  Tensor nodes_splits;
  std::vector<int64_t> nodes_trueleafs;
  std::vector<int64_t> nodes_truenodeids;
  int64_t post_transform = 0;  // 0 none, 1 softmax, 2 logistic, 3 softmax_zero, 4 probit
  std::vector<int64_t> tree_roots;

  template <class V>
  void reflect(V& v) {
    v("aggregate_function", aggregate_function);
    v("leaf_targetids", leaf_targetids);
    v("leaf_weights", leaf_weights);
    v("membership_values", membership_values);
    v("n_targets", n_targets);
    v("nodes_falseleafs", nodes_falseleafs);
    v("nodes_falsenodeids", nodes_falsenodeids);
    v("nodes_featureids", nodes_featureids);
    v("nodes_hitrates", nodes_hitrates);
    v("nodes_missing_value_tracks_true", nodes_missing_value_tracks_true);
    v("nodes_modes", nodes_modes);
    v("nodes_splits", nodes_splits);
    v("nodes_trueleafs", nodes_trueleafs);
    v("nodes_truenodeids", nodes_truenodeids);
    v("post_transform", post_transform);
    v("tree_roots", tree_roots);
  }
};

}  // namespace kiln::compiler::ops
