// SPDX-License-Identifier: Apache-2.0
// The attention op family: attribute structs of the transformer ops (ONNX semantics at the newest
// opset kiln imports).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/op.h"

namespace kiln::compiler::ops {

// Attention: see the ONNX operator documentation (opset 25; opset 23 lacks the nonpad_kv_seqlen
// input, 23 and 24 the window attributes). Inputs Q, K, V, attn_mask, past_key, past_value,
// nonpad_kv_seqlen; outputs Y, present_key, present_value, qk_matmul_output.
struct Attention {
  static constexpr OpKind kKind = OpKind::kAttention;
  int64_t is_causal = 0;
  std::optional<int64_t> kv_num_heads;  // 3-D inputs only
  int64_t left_window_size = -1;        // -1: unbounded
  std::optional<int64_t> q_num_heads;   // 3-D inputs only
  // What qk_matmul_output holds: 0 Q·K^T, 1 after softcap, 2 after the bias, 3 after softmax.
  int64_t qk_matmul_output_mode = 0;
  int64_t right_window_size = -1;  // -1: unbounded
  std::optional<float> scale;      // absent: 1/sqrt(head_size)
  float softcap = 0.0f;            // 0: none
  // The element type the softmax runs in; absent: the input's.
  std::optional<DType> softmax_precision;

  template <class V>
  void reflect(V& v) {
    v("is_causal", is_causal);
    v("kv_num_heads", kv_num_heads);
    v("left_window_size", left_window_size);
    v("q_num_heads", q_num_heads);
    v("qk_matmul_output_mode", qk_matmul_output_mode);
    v("right_window_size", right_window_size);
    v("scale", scale);
    v("softcap", softcap);
    v("softmax_precision", softmax_precision);
  }
};

// RMSNormalization: see the ONNX operator documentation (opset 23).
struct RMSNormalization {
  static constexpr OpKind kKind = OpKind::kRMSNormalization;
  int64_t axis = -1;
  float epsilon = 9.99999975e-06f;
  // The element type stage one (the mean square and the division by its root) runs in.
  DType stash_type = DType::kF32;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
    v("epsilon", epsilon);
    v("stash_type", stash_type);
  }
};

// RotaryEmbedding: see the ONNX operator documentation (opset 23). Inputs X, cos_cache,
// sin_cache and the optional position_ids.
struct RotaryEmbedding {
  static constexpr OpKind kKind = OpKind::kRotaryEmbedding;
  int64_t interleaved = 0;
  std::optional<int64_t> num_heads;  // required for 3-D inputs
  int64_t rotary_embedding_dim = 0;  // 0: the whole head

  template <class V>
  void reflect(V& v) {
    v("interleaved", interleaved);
    v("num_heads", num_heads);
    v("rotary_embedding_dim", rotary_embedding_dim);
  }
};

// LinearAttention: see the ONNX operator documentation (opset 27). Inputs query, key, value,
// past_state, decay, beta; outputs output and present_state.
struct LinearAttention {
  static constexpr OpKind kKind = OpKind::kLinearAttention;
  int64_t chunk_size = 64;  // a tuning hint without effect on the result
  std::optional<int64_t> kv_num_heads;
  std::optional<int64_t> q_num_heads;
  float scale = 0.0f;  // 0: 1/sqrt(d_k)
  std::string update_rule = "gated_delta";

  template <class V>
  void reflect(V& v) {
    v("chunk_size", chunk_size);
    v("kv_num_heads", kv_num_heads);
    v("q_num_heads", q_num_heads);
    v("scale", scale);
    v("update_rule", update_rule);
  }
};

// CausalConvWithState: see the ONNX operator documentation (opset 27). Inputs input, weight,
// bias, past_state; outputs output and present_state.
struct CausalConvWithState {
  static constexpr OpKind kKind = OpKind::kCausalConvWithState;
  std::string activation = "none";

  template <class V>
  void reflect(V& v) {
    v("activation", activation);
  }
};

// FlexAttention: see the ONNX operator documentation (ai.onnx.preview opset 1).
struct FlexAttention {
  static constexpr OpKind kKind = OpKind::kFlexAttention;
  GraphAttr prob_mod;  // (probs) -> probs, or none
  std::optional<float> scale;
  GraphAttr score_mod;  // (scores) -> scores, or none
  // The element type scores and probabilities are in; absent: f64 for f64 inputs, else f32.
  std::optional<DType> softmax_precision;

  template <class V>
  void reflect(V& v) {
    v("prob_mod", prob_mod);
    v("scale", scale);
    v("score_mod", score_mod);
    v("softmax_precision", softmax_precision);
  }
};

// TensorScatter: see the ONNX operator documentation (opset 24). Inputs past_cache, update and
// the optional write_indices.
struct TensorScatter {
  static constexpr OpKind kKind = OpKind::kTensorScatter;
  int64_t axis = -2;
  std::string mode = "linear";

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
    v("mode", mode);
  }
};

}  // namespace kiln::compiler::ops
