// SPDX-License-Identifier: Apache-2.0
// Quantization of a graph, target-independent: fp16/bf16 conversion, int8 post-training
// quantization with calibration that writes standard ONNX QDQ form, and the f64 conversion of a
// float64 reference.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/passes/pass.h"
#include "compiler/targets/target.h"
#include "core/progress.h"
#include "core/status.h"

namespace kiln::compiler {

// ---- fp16 / bf16 ----

// The op kinds quantize_fp16/bf16 convert when no list is given: the compute ops (Conv, MatMul,
// Gemm, pooling, activations, element-wise arithmetic) and the data movement between them.
// Numerically sensitive ops (Softmax, normalizations, reductions, Exp, Log, Pow, Sqrt, Erf)
// stay in fp32 unless named explicitly.
std::vector<OpKind> default_float_quantize_ops();

// Resolves op names to kinds: ONNX names ("Conv", "MatMul"), MIGraphX's ("convolution", "dot"),
// and "all" for default_float_quantize_ops(). Fails naming an unknown op, or one that cannot
// change precision (Constant, Cast, Shape, control flow, Q/DQ).
Result<std::vector<OpKind>> resolve_quantize_ops(const std::vector<std::string>& names);

// Converts every selected node (of a kind in `ops`; empty: the defaults) whose float tensors are
// f32 to `dtype` (kF16 or kBF16): its f32 constant inputs become `dtype` constants, its other
// f32 inputs and outputs change type, and Casts appear only where a value crosses the edge of a
// converted region (graph inputs and outputs keep f32, so callers see the same signature). A
// value used by several converted nodes is cast once.
std::unique_ptr<Pass> make_float_precision_conversion(DType dtype, std::vector<OpKind> ops = {});

// MIGraphX's quantize_fp16 / quantize_bf16: the standard clean-up passes in fp32 first (so
// BatchNormalization folds into Conv weights before rounding), then the conversion above. `ops`
// as for resolve_quantize_ops (empty or {"all"}: the defaults).
Status quantize_fp16(Graph& graph, const std::vector<std::string>& ops = {});
Status quantize_bf16(Graph& graph, const std::vector<std::string>& ops = {});

// ---- float64 reference ----

// Converts every f32, f16 and bf16 tensor of `graph` to f64: constants, value types (subgraphs
// included), the element-type attributes that make those types (Cast's `to`, random ops' `dtype`,
// `stash_type`, `softmax_precision`) and such tensor attributes (ConstantOfShape's `value`). Graph
// inputs of those types keep their type, each followed by a Cast to f64, so callers feed the same
// inputs; outputs become f64. Inputs ONNX requires in f32 whatever the data type (Resize's and
// Upsample's scales, NonMaxSuppression's boxes and scores) get a Cast back to f32, and the
// quantization ops (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearConv,
// QLinearMatMul), which ONNX defines for no f64 scale, compute in f32 between Casts. Compiled for
// ref, whose kernels compute in double, the graph gives a float64 reference of the model, of a
// half-precision one too (`kiln run --precision f64`): widening is exact, so the reference sees
// the same inputs and weights and only rounds in double. Fails naming the node when a converted
// node does not type-check, except inside If branches (left to run time, as type_refinement does).
Status convert_to_f64(Graph& graph);

// ---- int8 ----

enum class CalibrationMethod {
  kMax,         // the largest |x| seen
  kPercentile,  // the given percentile of |x| (outliers clipped)
  kEntropy,     // the threshold whose int8 histogram is closest (KL divergence) to the fp32 one
};

// "max", "percentile", "entropy"; an error listing them otherwise.
Result<CalibrationMethod> parse_calibration_method(std::string_view name);
std::string_view calibration_method_name(CalibrationMethod method);

// One calibration batch: a tensor for every graph input, by name.
using CalibrationBatch = std::map<std::string, Tensor>;

// What calibration saw, by IR value name (Int8Report::observed; calibration.h): handed back to
// quantize_int8 of the same model (imported the same way) through Int8Options::observed, it
// spares calibrating the values it holds again: another placement of the same graph (other
// excluded nodes) quantizes with the same ranges at once.
struct ObservedRanges;

struct Int8Options {
  // Op names as for resolve_quantize_ops among Conv, MatMul and Gemm (MIGraphX: "convolution",
  // "dot"); empty: all three.
  std::vector<std::string> ops;
  // Nodes to keep in float: node names or op names ("Add", "MaxPool", "Conv"); an excluded node
  // reads and writes f32 (its neighbours still quantize what they read).
  std::vector<std::string> exclude;
  // Every activation s8 with zero point 0 (symmetric), never-negative ones too, which then use half
  // the range: what the cuda target's int8 kernels take (centered s8). Unset: true for the cuda
  // target, else u8 for never-negative activations.
  std::optional<bool> symmetric_activations;
  // Every node reading a quantized activation reads its DequantizeLinear, the float ops too (as
  // ONNX Runtime's quantize_static does), not only the int8 ones: a SiLU's output that a
  // squeeze-and-excitation Mul reads beside a convolution is then int8 alone, so the convolution
  // writes int8 (the cuda target fuses the SiLU into it). Unset: true for the cuda target.
  std::optional<bool> dequantize_every_reader;
  CalibrationMethod method = CalibrationMethod::kMax;
  double percentile = 99.99;  // kPercentile: which percentile of |x|, in (0, 100]
  int bins = 2048;            // histogram bins for kPercentile and kEntropy
  // Called after each calibration batch (a ProgressBar's callback() draws a bar).
  ProgressCallback progress;
  // How the calibration copy of the graph is compiled for the target.
  CompileOptions compile;
  // Ranges an earlier quantize_int8 of this graph observed: the values found here are not
  // calibrated again (and with every value found, no calibration runs and no batches are read).
  std::shared_ptr<const ObservedRanges> observed;
};

// One quantized activation, for reports and tests.
struct ActivationScale {
  std::string value;  // the IR value's name
  double min = 0;     // observed over all batches
  double max = 0;
  double threshold = 0;  // the |x| range the method chose
  float scale = 0;
  bool is_unsigned = false;  // u8 (never negative) or s8
};

struct Int8Report {
  int64_t batches = 0;
  int quantized_nodes = 0;
  std::vector<ActivationScale> activations;
  // The names of the Conv, MatMul and Gemm nodes given int8 weights, in graph order.
  std::vector<std::string> quantized_names;
  // Every range used, observed now or taken from Int8Options::observed.
  std::shared_ptr<const ObservedRanges> observed;
};

// Reads calibration batch `index` (0 <= index < count).
using CalibrationReader = std::function<Result<CalibrationBatch>(int64_t index)>;

// Post-training int8 quantization. Runs the standard clean-up passes in fp32, places QDQ pairs as
// ONNX Runtime's quantize_static does -- on every value an int8 op reads: the inputs of the
// selected nodes with a constant weight, of residual Adds, MaxPools and element-moving ops whose
// outputs an int8 op reads in turn, and of GlobalAveragePools -- compiles a copy of the graph for
// `target` that also returns those values, runs it on the `count` calibration batches to find
// each one's range with `method` (a MaxPool's or element-moving op's output takes its input's),
// then rewrites the graph into standard ONNX QDQ form:
//   activation -> QuantizeLinear(scale, zero point 0; u8 when never negative, else s8)
//              -> DequantizeLinear -> every int8 reader (every reader: dequantize_every_reader)
//   weight     -> int8 constant (symmetric, per output channel, in [-127, 127])
//              -> DequantizeLinear(axis = the output-channel axis, per-channel scales) -> node
// Biases stay float. Scales are graph constants, so they are stored in artifacts. Fails naming
// the batch and input when calibration data does not match the graph.
Result<Int8Report> quantize_int8(Graph& graph, const Target& target, int64_t count,
                                 const CalibrationReader& read, const Int8Options& options = {});
// The same over batches held in memory (MIGraphX's calibration parameter maps), rebatched first
// (rebatch_calibration).
Result<Int8Report> quantize_int8(Graph& graph, const Target& target,
                                 const std::vector<CalibrationBatch>& calibration,
                                 const Int8Options& options = {});

// Calibration batches of the batch size `graph` takes: where an input's first dim is a fixed B
// and the batches hold another number of samples (files of one image for a model compiled at
// batch 256), their samples are joined and cut into batches of B, the last partial one left out.
// Batches of a dynamic first dim, or of B already, stay as they are. Fails naming the input when
// the batches hold fewer than B samples in all, or other dims than the graph's.
Result<std::vector<CalibrationBatch>> rebatch_calibration(const Graph& graph,
                                                          std::vector<CalibrationBatch> batches);

}  // namespace kiln::compiler
