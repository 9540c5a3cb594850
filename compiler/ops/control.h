// SPDX-License-Identifier: Apache-2.0
// The control op family: attribute structs (ONNX semantics at the newest opset kiln imports).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/op.h"

namespace kiln::compiler::ops {

// If: see the ONNX operator documentation (opset 16).
struct If {
  static constexpr OpKind kKind = OpKind::kIf;
  GraphAttr else_branch;
  GraphAttr then_branch;

  template <class V>
  void reflect(V& v) {
    v("else_branch", else_branch);
    v("then_branch", then_branch);
  }
};

// Loop: see the ONNX operator documentation (opset 16).
struct Loop {
  static constexpr OpKind kKind = OpKind::kLoop;
  GraphAttr body;

  template <class V>
  void reflect(V& v) {
    v("body", body);
  }
};

// Scan: see the ONNX operator documentation (opset 16).
//
// `opset8_batched` (kiln only) selects the opset-8 form: input 0 is the optional sequence_lens,
// every other input and output has a leading batch axis the body does not see, scan inputs scan
// along axis 1 and scan outputs are padded to the longest sequence. The importer turns opset 8's
// `directions` into scan_input_directions.
struct Scan {
  static constexpr OpKind kKind = OpKind::kScan;
  GraphAttr body;
  std::optional<int64_t> num_scan_inputs;
  std::optional<std::vector<int64_t>> scan_input_axes;
  std::optional<std::vector<int64_t>> scan_input_directions;
  std::optional<std::vector<int64_t>> scan_output_axes;
  std::optional<std::vector<int64_t>> scan_output_directions;
  int64_t opset8_batched = 0;

  template <class V>
  void reflect(V& v) {
    v("body", body);
    v("num_scan_inputs", num_scan_inputs);
    v("scan_input_axes", scan_input_axes);
    v("scan_input_directions", scan_input_directions);
    v("scan_output_axes", scan_output_axes);
    v("scan_output_directions", scan_output_directions);
    v("opset8_batched", opset8_batched);
  }
};

// SequenceAt: see the ONNX operator documentation (opset 11).
struct SequenceAt {
  static constexpr OpKind kKind = OpKind::kSequenceAt;
  template <class V>
  void reflect(V&) {}
};

// SequenceConstruct: see the ONNX operator documentation (opset 11).
struct SequenceConstruct {
  static constexpr OpKind kKind = OpKind::kSequenceConstruct;
  template <class V>
  void reflect(V&) {}
};

// SequenceEmpty: see the ONNX operator documentation (opset 11).
struct SequenceEmpty {
  static constexpr OpKind kKind = OpKind::kSequenceEmpty;
  std::optional<DType> dtype;

  template <class V>
  void reflect(V& v) {
    v("dtype", dtype);
  }
};

// SequenceErase: see the ONNX operator documentation (opset 11).
struct SequenceErase {
  static constexpr OpKind kKind = OpKind::kSequenceErase;
  template <class V>
  void reflect(V&) {}
};

// SequenceInsert: see the ONNX operator documentation (opset 11).
struct SequenceInsert {
  static constexpr OpKind kKind = OpKind::kSequenceInsert;
  template <class V>
  void reflect(V&) {}
};

// SequenceLength: see the ONNX operator documentation (opset 11).
struct SequenceLength {
  static constexpr OpKind kKind = OpKind::kSequenceLength;
  template <class V>
  void reflect(V&) {}
};

// SequenceMap: see the ONNX operator documentation (opset 17).
struct SequenceMap {
  static constexpr OpKind kKind = OpKind::kSequenceMap;
  GraphAttr body;

  template <class V>
  void reflect(V& v) {
    v("body", body);
  }
};

// SplitToSequence: see the ONNX operator documentation (opset 11).
struct SplitToSequence {
  static constexpr OpKind kKind = OpKind::kSplitToSequence;
  int64_t axis = 0;
  int64_t keepdims = 1;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
    v("keepdims", keepdims);
  }
};

// ConcatFromSequence: see the ONNX operator documentation (opset 11).
struct ConcatFromSequence {
  static constexpr OpKind kKind = OpKind::kConcatFromSequence;
  std::optional<int64_t> axis;
  int64_t new_axis = 0;

  template <class V>
  void reflect(V& v) {
    v("axis", axis);
    v("new_axis", new_axis);
  }
};

// Optional: see the ONNX operator documentation (opset 15).
//
// ONNX's `type` attribute (a TypeProto: a tensor or a sequence of tensors) is held as three
// reflectable fields, filled by the importer: the element dtype (absent without `type`), whether
// it is a sequence, and the tensor dims (-1 for an unknown dim; absent for an unknown rank).
struct Optional {
  static constexpr OpKind kKind = OpKind::kOptional;
  std::optional<DType> type_dtype;
  int64_t type_is_sequence = 0;
  std::optional<std::vector<int64_t>> type_dims;

  template <class V>
  void reflect(V& v) {
    v("type_dtype", type_dtype);
    v("type_is_sequence", type_is_sequence);
    v("type_dims", type_dims);
  }
};

// OptionalGetElement: see the ONNX operator documentation (opset 15).
struct OptionalGetElement {
  static constexpr OpKind kKind = OpKind::kOptionalGetElement;
  template <class V>
  void reflect(V&) {}
};

// OptionalHasElement: see the ONNX operator documentation (opset 15).
struct OptionalHasElement {
  static constexpr OpKind kKind = OpKind::kOptionalHasElement;
  template <class V>
  void reflect(V&) {}
};

}  // namespace kiln::compiler::ops
