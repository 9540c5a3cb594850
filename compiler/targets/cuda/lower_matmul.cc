// SPDX-License-Identifier: Apache-2.0
// Lowering MatMul and Gemm to cuBLASLt (the algorithm timed among its heuristic's candidates), a
// following bias Add, scaling, residual Add, ReLU or GELU run as its epilogue.
#include <cublasLt.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/all_ops.h"
#include "compiler/targets/cuda/autotune.h"
#include "compiler/targets/cuda/lower_util.h"
#include "compiler/targets/cuda/lowering.h"
#include "compiler/targets/cuda/tuning.h"
#include "core/logging.h"

namespace kiln::compiler::cuda {

namespace {

// An element type as cuBLAS's data type.
cudaDataType_t blas_type(Elem e) {
  return e == Elem::kF32 ? CUDA_R_32F : e == Elem::kF16 ? CUDA_R_16F : CUDA_R_16BF;
}

struct LtPlan {
  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
    for (cublasLtMatrixLayout_t l : {a, b, d}) {
      if (l != nullptr) cublasLtMatrixLayoutDestroy(l);
    }
  }
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr;  // cuBLAS's A: our B
  cublasLtMatrixLayout_t b = nullptr;  // cuBLAS's B: our A
  cublasLtMatrixLayout_t d = nullptr;  // C and D
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  // The heuristic's first algorithm, run instead when the tuned one is refused at run time.
  bool has_fallback = false;
  cublasLtMatmulAlgo_t fallback{};
  size_t fallback_workspace = 0;
  std::atomic<bool> use_fallback{false};
  // The bias pointer is an attribute of the shared descriptor: set and used under this lock.
  std::mutex mutex;
};

constexpr size_t kLtWorkspace = size_t{32} << 20;

Status make_layout(cublasLtMatrixLayout_t* layout, cudaDataType_t type, int64_t rows, int64_t cols,
                   int64_t ld, int64_t batch, int64_t stride) {
  KILN_RETURN_IF_ERROR(
      check_cublas(cublasLtMatrixLayoutCreate(layout, type, static_cast<uint64_t>(rows),
                                              static_cast<uint64_t>(cols), ld),
                   "matrix layout"));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    KILN_RETURN_IF_ERROR(
        check_cublas(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                      &count, sizeof(count)),
                     "batch count"));
    KILN_RETURN_IF_ERROR(check_cublas(
        cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                         &stride, sizeof(stride)),
        "batch stride"));
  }
  return Status();
}

// A stored matmul choice: cuBLASLt's algorithm (opaque, valid for the same library and GPU).
struct MatmulChoice {
  cublasLtMatmulAlgo_t algo;
};

// The index of the fastest of cuBLASLt's `count` heuristic candidates, each timed over 3 runs
// after one warm-up on scratch operands; 0 (the heuristic's first) when there is one candidate or
// no room for the scratch. The descriptor's bias pointer is set to scratch only when the epilogue
// reads a bias (`bias_bytes` > 0), and is null again on return: cuBLASLt refuses a matmul whose
// descriptor carries a bias pointer its epilogue does not read (CUBLAS_STATUS_INVALID_VALUE), and
// the scratch is freed here.
int fastest_matmul(cublasLtHandle_t lt, const LtPlan& p, const cublasLtMatmulHeuristicResult_t* r,
                   int count, size_t a_bytes, size_t b_bytes, size_t d_bytes, size_t bias_bytes,
                   float alpha, float beta) {
  if (count <= 1) return 0;
  Scratch s;
  void* a = s.block(a_bytes);
  void* bm = s.block(b_bytes);
  void* d = s.block(d_bytes);
  void* bias = bias_bytes > 0 ? s.block(bias_bytes) : nullptr;
  void* workspace = s.block(kLtWorkspace);
  s.events.resize(2);
  if (a == nullptr || bm == nullptr || d == nullptr || (bias_bytes > 0 && bias == nullptr) ||
      workspace == nullptr ||
      cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreate(&s.events[0]) != cudaSuccess ||
      cudaEventCreate(&s.events[1]) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  if (bias != nullptr) {
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  }
  int best = 0;
  float best_ms = INFINITY;
  for (int i = 0; i < count; ++i) {
    if (r[i].workspaceSize > kLtWorkspace) continue;
    auto once = [&] {
      return cublasLtMatmul(lt, p.op, &alpha, bm, p.a, a, p.b, &beta, d, p.d, d, p.d, &r[i].algo,
                            workspace, r[i].workspaceSize, s.stream) == CUBLAS_STATUS_SUCCESS;
    };
    const float ms = candidate_ms(s, once);
    if (ms < best_ms) {
      best_ms = ms;
      best = i;
    }
  }
  cudaStreamSynchronize(s.stream);
  cudaGetLastError();
  if (bias != nullptr) {
    const void* none = nullptr;
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &none, sizeof(none));
  }
  return best;
}

bool same_algo(const cublasLtMatmulAlgo_t& x, const cublasLtMatmulAlgo_t& y) {
  return std::memcmp(&x, &y, sizeof(x)) == 0;
}

}  // namespace

// Row-major Y[M,N] = A[M,K] B[K,N] runs as column-major Y^T = B^T A^T: cuBLAS's A is our B.
Result<bool> lower_matmul(Builder& b, const Node& node) {
  if (node.num_inputs() < 2) return false;
  // f16/bf16 operands and result, f32 accumulation and scaling (alpha, beta); bias in the result's
  // type.
  const std::optional<Elem> e = common_elem({node.input(0), node.input(1), node.output(0)});
  if (!e) return false;
  const cudaDataType_t type = blas_type(*e);
  const Shape sa = shape_of(node.input(0));
  const Shape sb = shape_of(node.input(1));
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1.0f;
  float beta = 0.0f;
  int64_t m = 0, k = 0, n = 0, batch = 1;
  int c_buffer = -1;
  bool bias = false;
  if (node.kind() == OpKind::kGemm) {
    const auto& op = node.attrs<ops::Gemm>();
    if (sa.rank() != 2 || sb.rank() != 2) return false;
    trans_a = op.transA != 0;
    trans_b = op.transB != 0;
    alpha = op.alpha;
    m = trans_a ? sa[1] : sa[0];
    k = trans_a ? sa[0] : sa[1];
    n = trans_b ? sb[0] : sb[1];
    if (node.has_input(2)) {
      if (elem_of(node.input(2)) != e) return false;
      const Shape sc = shape_of(node.input(2));
      if ((sc == Shape{n} || sc == Shape{1, n}) && op.beta == 1.0f) {
        bias = true;
      } else if (sc == Shape{m, n}) {
        beta = op.beta;
      } else {
        return false;
      }
      c_buffer = b.buffer_of(node.input(2));
    }
  } else {
    if (sa.rank() < 2 || sb.rank() < 2) return false;
    k = sa[sa.rank() - 1];
    n = sb[sb.rank() - 1];
    if (sb.rank() == 2) {
      m = sa.numel() / k;  // leading dims fold into M
    } else {
      if (sa.rank() != sb.rank()) return false;
      for (int d = 0; d + 2 < sa.rank(); ++d) {
        if (sa[d] != sb[d]) return false;
        batch *= sa[d];
      }
      m = sa[sa.rank() - 2];
    }
  }
  if (m == 0 || n == 0 || k == 0) return false;
  // A MatMul's bias Add (a constant [n] of the result's type: a Linear layer's), or its scaling
  // by a constant (attention's 1/sqrt(d)), runs in the matmul.
  const Node* tail = &node;
  if (node.kind() == OpKind::kMatMul) {
    if (const Node* add = consumer_as(b, node.output(0), OpKind::kAdd)) {
      const Value* v = other_operand(*add, node.output(0));
      if (batch == 1 && v != nullptr && v->constant_value() != nullptr && elem_of(v) == e &&
          shape_of(v) == Shape{n}) {
        bias = true;
        // Its Constant node may come after the MatMul: a buffer of its own bytes.
        const Tensor* t = v->constant_value();
        const auto* raw = static_cast<const uint8_t*>(t->raw_data());
        c_buffer = b.has_buffer(v) ? b.buffer_of(v)
                                   : b.constant_bytes(t->dtype(), t->shape(),
                                                      std::vector<uint8_t>(raw, raw + t->nbytes()));
        tail = add;
      }
    }
    const Node* scale = b.only_consumer(node.output(0));
    if (!bias && scale != nullptr &&
        (scale->kind() == OpKind::kMul || scale->kind() == OpKind::kDiv) &&
        scale->input(0) == node.output(0) && elem_of(scale->output(0)) == e) {
      std::optional<std::vector<float>> c = constant_floats(scale->input(1));
      if (c && c->size() == 1 && (*c)[0] != 0.0f) {
        alpha = scale->kind() == OpKind::kMul ? (*c)[0] : 1.0f / (*c)[0];
        tail = scale;
      }
    }
  }
  // A residual Add of a value already computed, of the result's shape (a transformer block's
  // x + Linear(...)), runs as cuBLASLt's C with beta 1: no separate pass over three tensors.
  const Node* residual_add = nullptr;
  int residual = -1;
  if (node.kind() == OpKind::kMatMul && alpha == 1.0f && beta == 0.0f) {
    if (const Node* add = consumer_as(b, tail->output(0), OpKind::kAdd)) {
      const Value* r = other_operand(*add, tail->output(0));
      if (r != nullptr && r != tail->output(0) && b.has_buffer(r) && elem_of(r) == e &&
          shape_of(r) == shape_of(tail->output(0)) &&
          shape_of(add->output(0)) == shape_of(tail->output(0))) {
        residual_add = add;
        residual = b.buffer_of(r);
        beta = 1.0f;
      }
    }
  }
  const Node* end = residual_add != nullptr ? residual_add : tail;
  // A following ReLU runs as the epilogue, but not after a residual (the epilogue's order of the
  // ReLU and C is not relied on).
  const Node* relu = residual_add != nullptr ? nullptr : b.only_consumer(end->output(0));
  if (relu != nullptr && relu->kind() != OpKind::kRelu) relu = nullptr;
  // A GELU after the bias (a transformer's MLP) runs as the epilogue too, in f16/bf16.
  std::optional<std::vector<const Node*>> gelu;
  if (bias && relu == nullptr && residual_add == nullptr) gelu = gelu_reading(b, end->output(0));
  auto p = std::make_shared<LtPlan>();
  KILN_RETURN_IF_ERROR(
      check_cublas(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul"));
  const cublasOperation_t op_a = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  KILN_RETURN_IF_ERROR(check_cublas(
      cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)),
      "transa"));
  KILN_RETURN_IF_ERROR(check_cublas(
      cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)),
      "transb"));
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (bias)
    epilogue = relu != nullptr ? CUBLASLT_EPILOGUE_RELU_BIAS
               : gelu          ? CUBLASLT_EPILOGUE_GELU_BIAS
                               : CUBLASLT_EPILOGUE_BIAS;
  else if (relu != nullptr)
    epilogue = CUBLASLT_EPILOGUE_RELU;
  KILN_RETURN_IF_ERROR(
      check_cublas(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                  sizeof(epilogue)),
                   "epilogue"));
  KILN_RETURN_IF_ERROR(trans_b ? make_layout(&p->a, type, k, n, k, batch, k * n)
                               : make_layout(&p->a, type, n, k, n, batch, k * n));
  KILN_RETURN_IF_ERROR(trans_a ? make_layout(&p->b, type, m, k, m, batch, m * k)
                               : make_layout(&p->b, type, k, m, k, batch, m * k));
  KILN_RETURN_IF_ERROR(make_layout(&p->d, type, n, m, n, batch, m * n));
  cublasLtMatmulPreference_t pref = nullptr;
  KILN_RETURN_IF_ERROR(check_cublas(cublasLtMatmulPreferenceCreate(&pref), "preference"));
  const uint64_t cap = kLtWorkspace;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &cap,
                                       sizeof(cap));
  // A choice known for this GPU when cuBLASLt still takes it; else the fastest of its heuristic's
  // first 8 candidates.
  const size_t es = dtype_size(node.input(0)->tensor_type().dtype);
  const std::string key =
      fmt::format("matmul {} m{} n{} k{} batch{} ta{} tb{} epilogue{} beta{}",
                  dtype_name(node.input(0)->tensor_type().dtype), m, n, k, batch, trans_a, trans_b,
                  static_cast<int>(epilogue), beta != 0.0f);
  constexpr int kCandidates = 8;
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  if (cublasLtMatmulAlgoGetHeuristic(b.lt(), p->op, p->a, p->b, p->d, p->d, pref, kCandidates,
                                     results, &found) != CUBLAS_STATUS_SUCCESS) {
    found = 0;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  bool chosen = false;
  if (const std::vector<uint8_t>* known = b.known_choice(key)) {
    std::optional<MatmulChoice> c = choice_value<MatmulChoice>(*known);
    cublasLtMatmulHeuristicResult_t check{};
    if (c &&
        cublasLtMatmulAlgoCheck(b.lt(), p->op, p->a, p->b, p->d, p->d, &c->algo, &check) ==
            CUBLAS_STATUS_SUCCESS &&
        check.workspaceSize <= kLtWorkspace) {
      p->algo = c->algo;
      p->workspace = check.workspaceSize;
      b.record_choice(key, *known, false);
      chosen = true;
    }
  }
  if (!chosen) {
    if (found == 0) return false;  // the host runs it
    const auto bytes = [&](int64_t elements) { return static_cast<size_t>(elements) * es; };
    const int best =
        fastest_matmul(b.lt(), *p, results, found, bytes(batch * m * k), bytes(batch * k * n),
                       bytes(batch * m * n), bias ? bytes(n) : 0, alpha, beta);
    p->algo = results[best].algo;
    p->workspace = results[best].workspaceSize;
    b.record_choice(key, choice_bytes(MatmulChoice{p->algo}), true);
  }
  if (found > 0 && !same_algo(p->algo, results[0].algo)) {
    p->has_fallback = true;
    p->fallback = results[0].algo;
    p->fallback_workspace = results[0].workspaceSize;
  }
  b.need_workspace(std::max(p->workspace, p->fallback_workspace));
  const int ai = b.buffer_of(node.input(0));
  const int bi = b.buffer_of(node.input(1));
  const Node* last = relu != nullptr ? relu : gelu ? gelu->back() : end;
  if (gelu) {
    for (const Node* n : *gelu) b.mark_fused(n);
  }
  if (tail != &node) b.mark_fused(tail);
  if (residual_add != nullptr) b.mark_fused(residual_add);
  if (relu != nullptr) b.mark_fused(relu);
  const int yi = b.define(last->output(0));
  std::vector<int> reads = {ai, bi};
  if (c_buffer >= 0) reads.push_back(c_buffer);
  if (residual >= 0) reads.push_back(residual);
  std::string kind = std::string(node.op().name()) + (bias ? "+Bias" : "") +
                     (alpha != 1.0f ? "+Scale" : "") + (residual >= 0 ? "+Residual" : "") +
                     (relu != nullptr ? "+Relu" : "") + (gelu ? "+Gelu" : "");
  add(b, node, kind, reads, {yi}, [=](Session& s) -> Status {
    std::unique_lock<std::mutex> lock(p->mutex, std::defer_lock);
    if (bias) {
      lock.lock();
      const void* ptr = s.device[static_cast<size_t>(c_buffer)];
      KILN_RETURN_IF_ERROR(
          check_cublas(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                      &ptr, sizeof(ptr)),
                       "bias pointer"));
    }
    const void* c = residual >= 0  ? ptr(s, residual)
                    : beta != 0.0f ? s.device[static_cast<size_t>(c_buffer)]
                                   : ptr(s, yi);
    const auto matmul = [&](bool fallback) {
      return cublasLtMatmul(s.lt, p->op, &alpha, ptr(s, bi), p->a, ptr(s, ai), p->b, &beta, c, p->d,
                            ptr(s, yi), p->d, fallback ? &p->fallback : &p->algo, s.workspace,
                            fallback ? p->fallback_workspace : p->workspace, s.stream);
    };
    const bool fallback = p->use_fallback.load(std::memory_order_relaxed);
    cublasStatus_t status = matmul(fallback);
    if (!fallback && p->has_fallback &&
        (status == CUBLAS_STATUS_INVALID_VALUE || status == CUBLAS_STATUS_NOT_SUPPORTED)) {
      // The tuned algorithm (measured, or taken from an artifact) is refused: cuBLASLt's own first
      // choice for these descriptors runs from now on.
      p->use_fallback.store(true, std::memory_order_relaxed);
      static std::once_flag logged;
      std::call_once(logged, [&] {
        log(LogLevel::kWarning,
            "cuda target: cuBLASLt refused a tuned matmul algorithm (status {}); that matmul runs "
            "cuBLASLt's heuristic first choice instead (reported once per process)",
            static_cast<int>(status));
      });
      status = matmul(true);
    }
    return check_cublas(status, "matmul");
  });
  return true;
}

}  // namespace kiln::compiler::cuda
