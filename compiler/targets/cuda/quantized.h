// SPDX-License-Identifier: Apache-2.0
// What the files of the cuda target's int8 path share (quantized.cc has the overview): 8-bit
// quantization parameters, the QDQ patterns it matches, the centered buffers between its kernels
// and each file's lowering.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/ops/nn_util.h"
#include "compiler/targets/cuda/builder.h"
#include "compiler/targets/cuda/kernels/int8.h"
#include "core/status.h"

namespace kiln::compiler::cuda {

// 8-bit types' ranges and quantization parameters (quantized.cc).
bool is_8bit(DType d);
int32_t qmin(DType t);
int32_t qmax(DType t);
bool is_static4(const Value* v);

// Per-tensor quantization parameters: a constant positive scalar scale, a constant scalar zero
// point (absent: 0) and the 8-bit type of `q`.
struct QParams {
  float scale = 1.0f;
  int32_t zp = 0;
  DType type = DType::kU8;
};

std::optional<QParams> qparams(const Node& node, int scale_input, int zp_input, const Value* q);

// Q/DQ parameters of a QuantizeLinear (its output) or DequantizeLinear (its input).
std::optional<QParams> qdq_params(const Node& node);

// The clamp of a centered value quantized with `p` (after a ReLU when `relu`).
std::pair<int32_t, int32_t> centered_bounds(const QParams& p, bool relu);

// Whether every value quantized with `p` fits the centered s8 form (`q - zero_point` in
// [-128, 127]): int8 always with zero point 0, uint8 only with zero point 128. Others (uint8 with
// zero point 0, kiln's own calibration's after a ReLU) would saturate at half their range, so
// their nodes take the float path.
bool centerable(const QParams& p);

// The only node reading `v` (null for a null `v`), else nullptr.
const Node* sole_reader(const Builder& b, const Value* v);

// The patterns of the int8 Add, MaxPool and GlobalAveragePool between Q/DQ, matched in
// lower_int8_add_pool.cc.

// Q(Relu?(Add(DQ(a), DQ(b)))), per-tensor parameters, a and b 8-bit of one static shape.
struct IntAdd {
  const Node* add = nullptr;
  const Node* dq[2] = {nullptr, nullptr};
  QParams in[2];
  const Node* relu = nullptr;
  const Node* q = nullptr;
  QParams out;
};

std::optional<IntAdd> int_add(const Builder& b, const Node& add);

// Q(MaxPool(DQ(x))) with the same parameters on both sides: max commutes with the monotonic
// quantization, so it runs on the 8-bit values.
struct IntPool {
  const Node* dq = nullptr;
  const Node* pool = nullptr;
  const Node* q = nullptr;
  Pool8 p;
};

std::optional<IntPool> int_pool(const Builder& b, const Node& pool);

// GlobalAveragePool(DQ(x)) with a per-tensor DQ, x 8-bit 4-D static, an f32 result: the mean of
// the 8-bit values, scaled once (ResNet's head: the DequantizeLinear alone took 0.22 ms at batch
// 256 on an H200, writing 103 MB of f32).
struct IntMean {
  const Node* dq = nullptr;
  const Node* pool = nullptr;
  QParams in;
};

std::optional<IntMean> int_mean(const Builder& b, const Node& pool);

// Q(Mul(DQ(x), Sigmoid(s))) (either order), squeeze-and-excitation's scaling of x [N, C, H, W] by
// the sigmoid of s [N, C, 1, 1], per-tensor parameters: on the 8-bit values, the DequantizeLinear
// and QuantizeLinear in the same pass (EfficientNet: with the SiLU fused into the convolutions
// before it, its blocks stay int8 from one convolution to the next). Matched at the Sigmoid.
struct IntScale {
  const Node* dq = nullptr;
  const Node* sigmoid = nullptr;
  const Node* mul = nullptr;
  const Node* q = nullptr;
  QParams in, out;
};

std::optional<IntScale> int_channel_scale(const Builder& b, const Node& sigmoid);

// A DequantizeLinear whose step is its readers' (int8 Adds, MaxPools, GlobalAveragePools or
// channel scalings, every reader one).
bool deferred_dq(const Builder& b, const Node& dq);

// What QLinearConv takes, and its space-to-depth form (lower_qlinear_conv.cc).

// What a QLinearConv needs to run here: 4-D static, a constant s8 filter [K, C, R, S] with zero
// points 0 and per-tensor or per-K scales, group 1 or depthwise (group = C = K, filter
// [C, 1, R, S]), per-tensor x and y parameters, a constant int32 bias [K] or none.
struct IntConv {
  QParams x, y;
  const Tensor* w = nullptr;
  std::vector<float> w_scales;
  const Tensor* bias = nullptr;
  WindowGeometry g;
  int64_t group = 1;
  // The output's scale when the node applies its activation "SiLU" before quantizing (qdq_fusion
  // with the cuda target's silu_convs), else 0: the own kernels' epilogue computes it.
  float silu = 0.0f;
};

std::optional<IntConv> int_conv(const Node& node);

// Whether the float Conv `conv` of a QDQ region, followed by a SiLU, would run as one int8
// convolution with the SiLU in its epilogue (the own implicit GEMM, the space-to-depth stem, the
// depthwise kernel): qdq_fusion's silu_convs for the cuda target.
bool int8_silu_conv(const Node& conv);

// A stride-2 convolution of an image with even height and width over its 2x2 blocks (space to
// depth: 4x the channels, half the height and width) as a stride-1 one, per spatial dim: input
// row 2 * oy - pad + r is row dy of block oy + b - pre, so filter tap (b, dy) is r = 2 * b + dy -
// 2 * pre + pad (zero outside the filter). For ResNet's 7x7/2 stem with pads 3: 4x4 taps, pads
// 2 and 1, 16 channels (12 used) instead of 8 (3 used): 0.65x the multiply-adds.
struct S2d {
  int64_t taps[2] = {0, 0};
  int64_t pre[2] = {0, 0};
  int64_t post[2] = {0, 0};
};

std::optional<S2d> s2d_geometry(const IntConv& c, const Shape& x, const Shape& y);

// The centered buffers between the int8 kernels (quantized.cc).

// Whether every reader of the 8-bit value `v` is an int8 kernel here (so it may stay centered):
// a QLinearConv reading it as its input, or a per-tensor DequantizeLinear.
bool centered_readers(const Builder& b, const Value* v);

// A new centered s8 buffer (NHWC with `stored_c` channels when 4-D), `v`'s when not null.
int new_centered(Builder& b, const Value* v, const Shape& logical, int64_t stored_c);

// `v` (8-bit, parameters `p`) as a centered buffer: its own when it is one, else a converted copy
// (NHWC when 4-D).
int centered_input(Builder& b, const Value* v, const QParams& p);

// Where an int8 kernel writes the 8-bit value `v`: its own centered buffer when every reader
// takes that (`raw` -1), else a centered scratch buffer that finish_output converts into `v`'s
// ONNX values (`raw`).
struct Out {
  int centered = -1;
  int raw = -1;
};

Out define_output(Builder& b, const Value* v, int64_t stored_c);

// Converts the centered output `o` of `v` (parameters `p`) into `v`'s buffer, when it has one of
// its own (`o.raw`).
void finish_output(Builder& b, const Out& o, const Value* v, const QParams& p);

// lower_qdq.cc: QuantizeLinear into centered s8 (or the f16 integers of a first convolution),
// DequantizeLinear (of a constant: its values, computed here).
Result<bool> lower_quantize(Builder& b, const Node& node);
bool lower_dequantize(Builder& b, const Node& node);

// lower_int8_add_pool.cc: the patterns int_add, int_pool, int_mean and int_channel_scale matched.
bool lower_int_add(Builder& b, const IntAdd& a);
bool lower_int_pool(Builder& b, IntPool r);
bool lower_int_mean(Builder& b, const IntMean& m);
bool lower_int_channel_scale(Builder& b, const IntScale& r);

// lower_qlinear_conv.cc: QLinearConv on cuDNN's int8 engines or the own int8 implicit GEMM,
// whichever is timed faster, a residual Add after it fused.
Result<bool> lower_qlinear_conv(Builder& b, const Node& node);

// The own kernel's configuration for the space-to-depth first convolution `conv` of an image of
// `x` (its s8 input written by the QuantizeLinear), or -1 where cuDNN's f16 engines run it.
Result<int> s2d_stem_config(Builder& b, const Node& conv, const Shape& x);

}  // namespace kiln::compiler::cuda
