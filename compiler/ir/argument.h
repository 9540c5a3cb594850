// SPDX-License-Identifier: Apache-2.0
// Argument: a runtime value — a tensor, a sequence of tensors, or none (an empty optional).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"

namespace kiln::compiler {

class Argument {
 public:
  enum class Kind : uint8_t { kNone, kTensor, kSequence };

  Argument() = default;                                                          // none
  Argument(Tensor tensor) : kind_(Kind::kTensor), tensor_(std::move(tensor)) {}  // NOLINT implicit
  static Argument sequence(std::vector<Tensor> elements) {
    Argument a;
    a.kind_ = Kind::kSequence;
    a.sequence_ = std::move(elements);
    return a;
  }

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  bool is_sequence() const { return kind_ == Kind::kSequence; }

  const Tensor& tensor() const {
    KILN_CHECK(is_tensor(), "Argument::tensor() on a non-tensor");
    return tensor_;
  }
  Tensor& tensor() {
    KILN_CHECK(is_tensor(), "Argument::tensor() on a non-tensor");
    return tensor_;
  }
  const std::vector<Tensor>& sequence() const {
    KILN_CHECK(is_sequence(), "Argument::sequence() on a non-sequence");
    return sequence_;
  }

  // "f32[2,3]", "seq(3)", "none".
  std::string to_string() const;

 private:
  Kind kind_ = Kind::kNone;
  Tensor tensor_;
  std::vector<Tensor> sequence_;
};

}  // namespace kiln::compiler
