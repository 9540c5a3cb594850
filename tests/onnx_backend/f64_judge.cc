// SPDX-License-Identifier: Apache-2.0
// The ONNX backend runner's float64 judge: f16/bf16 outputs measured against a float64 reference.
#include "tests/onnx_backend/f64_judge.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "compiler/onnx/importer.h"
#include "compiler/quantize/quantize.h"

namespace kiln::onnx_backend {

using compiler::Argument;

namespace {

double element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kF16: return static_cast<float>(t.data<Half>()[i]);
    case DType::kBF16: return static_cast<float>(t.data<BFloat16>()[i]);
    case DType::kF64: return t.data<double>()[i];
    default: KILN_CHECK(false, "f64_judge: an f16, bf16 or f64 tensor expected");
  }
  return 0;
}

// |value - reference| in ulps at `reference`; 0 where both are the same NaN or infinity, infinite
// where only one of them is not finite.
double ulps_off(double value, double reference, DType dtype) {
  if (std::isnan(reference) || std::isnan(value)) {
    return std::isnan(reference) && std::isnan(value) ? 0 : std::numeric_limits<double>::infinity();
  }
  if (std::isinf(reference) || std::isinf(value)) {
    return value == reference ? 0 : std::numeric_limits<double>::infinity();
  }
  return std::abs(value - reference) / judge_ulp(dtype, reference);
}

Judgement failed(std::string reason) {
  Judgement j;
  j.reason = std::move(reason);
  return j;
}

}  // namespace

double judge_ulp(DType dtype, double reference) {
  switch (dtype) {
    case DType::kF16: return std::max(std::ldexp(std::abs(reference), -10), std::ldexp(1.0, -24));
    case DType::kBF16: return std::max(std::ldexp(std::abs(reference), -7), std::ldexp(1.0, -133));
    default: return 0;
  }
}

Judgement judge_against_f64(const Tensor& data, const Tensor& target, const Tensor& f64) {
  const DType dtype = data.dtype();
  if (dtype != DType::kF16 && dtype != DType::kBF16) {
    return failed(fmt::format("a {} output is not judged against float64 (f16 and bf16 are)",
                              dtype_name(dtype)));
  }
  if (target.dtype() != dtype || f64.dtype() != DType::kF64) {
    return failed(fmt::format("{} data, {} target and f64 reference expected, got {}, {}",
                              dtype_name(dtype), dtype_name(dtype), dtype_name(target.dtype()),
                              dtype_name(f64.dtype())));
  }
  if (!(target.shape() == data.shape()) || !(f64.shape() == data.shape())) {
    return failed(fmt::format("shapes differ: data {}, target {}, float64 {}",
                              data.shape().to_string(), target.shape().to_string(),
                              f64.shape().to_string()));
  }
  Judgement j;
  j.passed = true;
  for (int64_t i = 0; i < data.numel(); ++i) {
    const double r = element(f64, i), d = element(data, i), t = element(target, i);
    const double data_off = ulps_off(d, r, dtype), target_off = ulps_off(t, r, dtype);
    j.data_ulps = std::max(j.data_ulps, data_off);
    j.target_ulps = std::max(j.target_ulps, target_off);
    if (!j.passed) continue;
    const std::string where =
        fmt::format("element {}: float64 {}, data {} ({:.3g} ulp off), target {} ({:.3g} ulp off)",
                    i, r, d, data_off, t, target_off);
    if (!(data_off <= kDataUlpLimit)) {
      j.passed = false;
      j.reason = fmt::format(
          "{}: the data is more than {} ulp from float64, more than rounding explains (float64 "
          "is kiln's own reading of the ops and cannot judge that)",
          where, kDataUlpLimit);
    } else if (!(target_off <= 1.0 || target_off <= data_off)) {
      j.passed = false;
      j.reason = fmt::format(
          "{}: the target is neither within one ulp of float64 nor as close as "
          "the data",
          where);
    }
  }
  return j;
}

Judgement judge_against_f64(const Argument& data, const Argument& target, const Argument& f64) {
  if (data.kind() != target.kind() || data.kind() != f64.kind()) {
    return failed("the data, the target and the float64 reference are of different kinds");
  }
  if (data.is_tensor()) return judge_against_f64(data.tensor(), target.tensor(), f64.tensor());
  if (!data.is_sequence()) return failed("a tensor or sequence output expected");
  const size_t n = data.sequence().size();
  if (target.sequence().size() != n || f64.sequence().size() != n) {
    return failed("sequences of different lengths");
  }
  Judgement all;
  all.passed = true;
  for (size_t k = 0; k < n; ++k) {
    Judgement j = judge_against_f64(data.sequence()[k], target.sequence()[k], f64.sequence()[k]);
    all.data_ulps = std::max(all.data_ulps, j.data_ulps);
    all.target_ulps = std::max(all.target_ulps, j.target_ulps);
    if (all.passed && !j.passed) {
      all.passed = false;
      all.reason = fmt::format("sequence element {}: {}", k, j.reason);
    }
  }
  return all;
}

Result<std::vector<Argument>> float64_reference(const std::string& model_path,
                                                const compiler::Target& ref,
                                                std::vector<Argument> inputs) {
  auto step = [](std::string_view what, const Status& s) {
    return Status(s.code(), fmt::format("float64 reference: {}: {}", what, s.message()));
  };
  Result<std::unique_ptr<compiler::Model>> model = compiler::import_onnx_file(model_path);
  if (!model.ok()) return step("import", model.status());
  std::shared_ptr<compiler::Graph> graph(std::move((*model)->graph));
  if (Status s = compiler::convert_to_f64(*graph); !s.ok()) return step("conversion", s);
  Result<std::shared_ptr<compiler::Executable>> exe = compiler::compile(graph, ref);
  if (!exe.ok()) return step("compile", exe.status());
  Result<std::vector<Argument>> out = (*exe)->run(std::move(inputs));
  if (!out.ok()) return step("run", out.status());
  return out;
}

}  // namespace kiln::onnx_backend
