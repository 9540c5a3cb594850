// SPDX-License-Identifier: Apache-2.0
// Which library runs int8 convolutions on tensor cores on this GPU? Times ResNet-50's two
// bottleneck shapes at batch 256, 56x56 (a 1x1 256->64 and a 3x3 64->64, NHWC) as
//   fp16  cuDNN legacy API (every algorithm cuDNN lists; the fastest)
//   int8  cuDNN legacy API, NHWC INT8 in/out and INT8 in / FLOAT out (INT32 compute)
//   int8  cuDNN backend graph: conv (INT32) -> x per-channel scale -> + bias -> ReLU -> int8
//   int8  cuBLASLt (1x1 only, and the 3x3 as an im2col GEMM): s8 x s8 -> s8 with a per-row
//         scale, bias and ReLU epilogue
// Each int8 result is checked against a naive int32 convolution on the GPU. Prints a table and
// writes JSON (argv[1], default int8_conv_micro.json).
//   nvcc -O2 -arch=sm_90 -o int8_conv_micro int8_conv_micro.cu -lcudnn -lcublasLt
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#define CK(x)                                                                            \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

static bool ok_dnn(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) {
    fprintf(stderr, "  %s: %s\n", what, cudnnGetErrorString(s));
    return false;
  }
  return true;
}

struct Shape {
  const char* name;
  int n, c, h, w, k, r, s, pad;
};

static cudaStream_t g_stream;

// Median milliseconds of `fn` over 20 runs after 3 warm-ups; infinity when a run fails.
static float time_ms(const std::function<bool()>& fn) {
  for (int i = 0; i < 3; ++i) {
    if (!fn()) return INFINITY;
  }
  if (cudaStreamSynchronize(g_stream) != cudaSuccess) return INFINITY;
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> t;
  for (int i = 0; i < 20; ++i) {
    cudaEventRecord(a, g_stream);
    fn();
    cudaEventRecord(b, g_stream);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  if (cudaGetLastError() != cudaSuccess) return INFINITY;
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

__global__ void fill_s8(int8_t* p, size_t n, uint32_t seed, int lo, int hi) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint32_t x = (uint32_t)i * 2654435761u ^ seed;
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  x ^= x >> 15;
  p[i] = (int8_t)(lo + (int)(x % (uint32_t)(hi - lo + 1)));
}

__global__ void s8_to_h(const int8_t* a, __half* b, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) b[i] = __float2half((float)a[i] / 16.0f);
}

// Naive NHWC conv, int32 accumulation, for sampled outputs (every `step`-th).
__global__ void ref_conv(const int8_t* x, const int8_t* w, int32_t* y, Shape s, int oh, int ow,
                         size_t count, size_t step) {
  size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (t >= count) return;
  size_t o = t * step;
  int k = o % s.k;
  size_t p = o / s.k;
  int xo = p % ow, yo = (p / ow) % oh, n = p / ((size_t)ow * oh);
  int32_t acc = 0;
  for (int r = 0; r < s.r; ++r) {
    for (int q = 0; q < s.s; ++q) {
      int yi = yo + r - s.pad, xi = xo + q - s.pad;
      if (yi < 0 || yi >= s.h || xi < 0 || xi >= s.w) continue;
      const int8_t* xp = x + (((size_t)n * s.h + yi) * s.w + xi) * s.c;
      const int8_t* wp = w + (((size_t)k * s.r + r) * s.s + q) * s.c;
      for (int c = 0; c < s.c; ++c) acc += (int32_t)xp[c] * (int32_t)wp[c];
    }
  }
  y[t] = acc;
}

// im2col of an NHWC int8 image for a stride-1 conv: rows (n, y, x), columns (r, s, c).
__global__ void im2col_s8(const int8_t* x, int8_t* col, Shape s) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  const size_t kcol = (size_t)s.r * s.s * s.c / 16;
  const size_t total = (size_t)s.n * s.h * s.w * kcol;
  if (i >= total) return;
  size_t row = i / kcol;
  int j = (i % kcol) * 16;
  int c = j % s.c, q = (j / s.c) % s.s, r = j / (s.c * s.s);
  int xo = row % s.w, yo = (row / s.w) % s.h, n = row / ((size_t)s.w * s.h);
  int yi = yo + r - s.pad, xi = xo + q - s.pad;
  int4 v = make_int4(0, 0, 0, 0);
  if (yi >= 0 && yi < s.h && xi >= 0 && xi < s.w) {
    v = *reinterpret_cast<const int4*>(x + (((size_t)n * s.h + yi) * s.w + xi) * s.c + c);
  }
  *reinterpret_cast<int4*>(col + row * kcol * 16 + j) = v;
}

// Requantized int8 expected from the int32 reference: sat(round(acc*scale[k] + bias[k])) with ReLU.
static std::vector<int8_t> expect_s8(const std::vector<int32_t>& acc,
                                     const std::vector<float>& scale,
                                     const std::vector<float>& bias, int K, size_t step) {
  std::vector<int8_t> out(acc.size());
  for (size_t t = 0; t < acc.size(); ++t) {
    int k = (t * step) % K;
    float v = std::nearbyint((float)acc[t] * scale[k] + bias[k]);
    v = std::min(127.0f, std::max(0.0f, v));
    out[t] = (int8_t)v;
  }
  return out;
}

// The largest difference between sampled entries of device int8 output `y` and `want`.
static int max_diff(const int8_t* y, const std::vector<int8_t>& want, size_t step) {
  std::vector<int8_t> all((size_t)want.size() * step);
  CK(cudaMemcpy(all.data(), y, all.size(), cudaMemcpyDeviceToHost));
  int worst = 0;
  for (size_t t = 0; t < want.size(); ++t)
    worst = std::max(worst, std::abs(all[t * step] - want[t]));
  return worst;
}

// ---- cuDNN backend helpers ----
struct Bd {
  cudnnBackendDescriptor_t d = nullptr;
  explicit Bd(cudnnBackendDescriptorType_t t) { cudnnBackendCreateDescriptor(t, &d); }
  ~Bd() {
    if (d) cudnnBackendDestroyDescriptor(d);
  }
  Bd(const Bd&) = delete;
  template <class T>
  bool set(cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t n, const T* v) {
    return cudnnBackendSetAttribute(d, a, t, n, v) == CUDNN_STATUS_SUCCESS;
  }
  bool fin(const char* what) { return ok_dnn(cudnnBackendFinalize(d), what); }
};

static bool make_tensor(Bd& t, int64_t uid, cudnnDataType_t dt, std::vector<int64_t> dims,
                        std::vector<int64_t> strides, bool is_virtual) {
  int64_t align = 16;
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
  t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
  t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
  t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  return t.fin("tensor");
}

static bool make_pw_op(Bd& op, Bd& pw, cudnnPointwiseMode_t mode, Bd& x, Bd* b, Bd& y) {
  cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
  if (!pw.fin("pointwise")) return false;
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw.d);
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x.d);
  if (b) op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b->d);
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y.d);
  return op.fin("pointwise op");
}

// conv(x, w) * scale + bias, ReLU, to int8 y, through the backend API; times every engine config
// the heuristics (mode A, then fallback) offer; returns the best time and checks its output.
static float backend_int8(cudnnHandle_t h, const Shape& s, int8_t* x, int8_t* w, float* scale,
                          float* bias, int8_t* y, void* ws, size_t ws_bytes, std::string& detail) {
  const int64_t N = s.n, C = s.c, H = s.h, W = s.w, K = s.k, R = s.r, S = s.s;
  Bd tx(CUDNN_BACKEND_TENSOR_DESCRIPTOR), tw(CUDNN_BACKEND_TENSOR_DESCRIPTOR),
      tc(CUDNN_BACKEND_TENSOR_DESCRIPTOR), tsc(CUDNN_BACKEND_TENSOR_DESCRIPTOR),
      t1(CUDNN_BACKEND_TENSOR_DESCRIPTOR), tb(CUDNN_BACKEND_TENSOR_DESCRIPTOR),
      t2(CUDNN_BACKEND_TENSOR_DESCRIPTOR), ty(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  bool ok = make_tensor(tx, 'x', CUDNN_DATA_INT8, {N, C, H, W}, {H * W * C, 1, W * C, C}, false) &&
            make_tensor(tw, 'w', CUDNN_DATA_INT8, {K, C, R, S}, {R * S * C, 1, S * C, C}, false) &&
            make_tensor(tc, 'c', CUDNN_DATA_FLOAT, {N, K, H, W}, {H * W * K, 1, W * K, K}, true) &&
            make_tensor(tsc, 's', CUDNN_DATA_FLOAT, {1, K, 1, 1}, {K, 1, K, K}, false) &&
            make_tensor(t1, '1', CUDNN_DATA_FLOAT, {N, K, H, W}, {H * W * K, 1, W * K, K}, true) &&
            make_tensor(tb, 'b', CUDNN_DATA_FLOAT, {1, K, 1, 1}, {K, 1, K, K}, false) &&
            make_tensor(t2, '2', CUDNN_DATA_FLOAT, {N, K, H, W}, {H * W * K, 1, W * K, K}, true) &&
            make_tensor(ty, 'y', CUDNN_DATA_INT8, {N, K, H, W}, {H * W * K, 1, W * K, K}, false);
  if (!ok) return INFINITY;
  Bd conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  cudnnDataType_t comp = CUDNN_DATA_INT32;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  int64_t dims = 2, one[2] = {1, 1}, pad[2] = {s.pad, s.pad};
  conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
  conv.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  conv.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
  conv.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, one);
  conv.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, one);
  conv.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
  conv.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
  if (!conv.fin("conv desc")) return INFINITY;
  Bd cop(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  float alpha = 1.0f, beta = 0.0f;
  cop.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tx.d);
  cop.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tw.d);
  cop.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tc.d);
  cop.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
          &conv.d);
  cop.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
  cop.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  if (!cop.fin("conv op")) return INFINITY;
  Bd pw1(CUDNN_BACKEND_POINTWISE_DESCRIPTOR), op1(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  Bd pw2(CUDNN_BACKEND_POINTWISE_DESCRIPTOR), op2(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  Bd pw3(CUDNN_BACKEND_POINTWISE_DESCRIPTOR), op3(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  if (!make_pw_op(op1, pw1, CUDNN_POINTWISE_MUL, tc, &tsc, t1) ||
      !make_pw_op(op2, pw2, CUDNN_POINTWISE_ADD, t1, &tb, t2) ||
      !make_pw_op(op3, pw3, CUDNN_POINTWISE_RELU_FWD, t2, nullptr, ty)) {
    return INFINITY;
  }
  Bd graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  cudnnBackendDescriptor_t ops[4] = {cop.d, op1.d, op2.d, op3.d};
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 4, ops);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  if (!graph.fin("op graph")) return INFINITY;
  int64_t uids[6] = {'x', 'w', 's', 'b', 'y'};
  void* ptrs[6] = {x, w, scale, bias, y};
  float best = INFINITY;
  for (cudnnBackendHeurMode_t hm : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    Bd heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph.d);
    heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm);
    if (!heur.fin("heuristics")) continue;
    int64_t count = 0;
    cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                             0, &count, nullptr);
    std::vector<cudnnBackendDescriptor_t> cfgs((size_t)count);
    for (auto& c : cfgs) cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &c);
    int64_t got = 0;
    cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                             count, &got, cfgs.data());
    detail += (hm == CUDNN_HEUR_MODE_A ? " heurA:" : " fallback:") + std::to_string(got);
    for (int64_t i = 0; i < got && i < 8; ++i) {
      Bd plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]);
      if (cudnnBackendFinalize(plan.d) != CUDNN_STATUS_SUCCESS) continue;
      int64_t wsz = 0;
      cudnnBackendGetAttribute(plan.d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                               1, nullptr, &wsz);
      if ((size_t)wsz > ws_bytes) continue;
      Bd pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
      pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 5, uids);
      pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 5, ptrs);
      pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
      if (!pack.fin("variant pack")) continue;
      float t =
          time_ms([&] { return cudnnBackendExecute(h, plan.d, pack.d) == CUDNN_STATUS_SUCCESS; });
      detail += " [" + std::to_string(i) + "]=" + std::to_string(t);
      best = std::min(best, t);
    }
    for (auto& c : cfgs) cudnnBackendDestroyDescriptor(c);
  }
  return best;
}

// ---- cuBLASLt ----
// Y[M rows of pixels, K] = X[M, Ck] * W[K, Ck]^T, column-major: Y^T (K x M) = W (op T) * X^T.
static float lt_gemm(cublasLtHandle_t lt, int64_t m_pix, int64_t k_out, int64_t ck, const void* w,
                     const void* x, void* y, bool int8, bool epilogue, const float* scale,
                     const float* bias, void* ws, size_t ws_bytes, std::string& detail) {
  cublasLtMatmulDesc_t desc;
  cublasComputeType_t ct = int8 ? CUBLAS_COMPUTE_32I : CUBLAS_COMPUTE_32F;
  cudaDataType_t io = int8 ? CUDA_R_8I : CUDA_R_16F;
  cublasLtMatmulDescCreate(&desc, ct, CUDA_R_32F);
  cublasOperation_t tA = CUBLAS_OP_T, tB = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof(tA));
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof(tB));
  float one = 1.0f, zero = 0.0f;
  const void* alpha = &one;
  if (epilogue) {
    cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_RELU_BIAS;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
    if (int8) {
      cudaDataType_t bt = CUDA_R_32F;
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt));
      cublasLtPointerMode_t pm = CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST;
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof(pm));
      alpha = scale;
    }
  }
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatrixLayoutCreate(&la, io, ck, k_out, ck);
  cublasLtMatrixLayoutCreate(&lb, io, ck, m_pix, ck);
  cublasLtMatrixLayoutCreate(&lc, io, k_out, m_pix, k_out);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  uint64_t wsb = ws_bytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                       sizeof(wsb));
  cublasLtMatmulHeuristicResult_t res[8];
  int n = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 8, res, &n);
  float best = INFINITY;
  detail += " heur=" + std::to_string(n) + (st == CUBLAS_STATUS_SUCCESS ? "" : "(fail)");
  for (int i = 0; i < n; ++i) {
    float t = time_ms([&] {
      return cublasLtMatmul(lt, desc, alpha, w, la, x, lb, &zero, y, lc, y, lc, &res[i].algo, ws,
                            ws_bytes, g_stream) == CUBLAS_STATUS_SUCCESS;
    });
    best = std::min(best, t);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(desc);
  return best;
}

// ---- cuDNN legacy ----
static float legacy(cudnnHandle_t h, const Shape& s, cudnnDataType_t in_t, cudnnDataType_t out_t,
                    cudnnDataType_t comp, cudnnTensorFormat_t fmt, const void* x, const void* w,
                    void* y, void* ws, size_t ws_bytes, std::string& detail) {
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  cudnnCreateTensorDescriptor(&xd);
  cudnnCreateTensorDescriptor(&yd);
  cudnnCreateFilterDescriptor(&wd);
  cudnnCreateConvolutionDescriptor(&cd);
  float best = INFINITY;
  if (ok_dnn(cudnnSetTensor4dDescriptor(xd, fmt, in_t, s.n, s.c, s.h, s.w), "x desc") &&
      ok_dnn(cudnnSetTensor4dDescriptor(yd, fmt, out_t, s.n, s.k, s.h, s.w), "y desc") &&
      ok_dnn(cudnnSetFilter4dDescriptor(wd, in_t, fmt, s.k, s.c, s.r, s.s), "w desc") &&
      ok_dnn(cudnnSetConvolution2dDescriptor(cd, s.pad, s.pad, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                             comp),
             "conv desc")) {
    cudnnSetConvolutionMathType(cd, CUDNN_TENSOR_OP_MATH);
    for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
      auto algo = (cudnnConvolutionFwdAlgo_t)a;
      size_t need = 0;
      if (cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, algo, &need) !=
              CUDNN_STATUS_SUCCESS ||
          need > ws_bytes) {
        continue;
      }
      float one = 1.0f, zero = 0.0f;
      float t = time_ms([&] {
        return cudnnConvolutionForward(h, &one, xd, x, wd, w, cd, algo, ws, ws_bytes, &zero, yd,
                                       y) == CUDNN_STATUS_SUCCESS;
      });
      if (std::isfinite(t)) detail += " a" + std::to_string(a) + "=" + std::to_string(t);
      best = std::min(best, t);
    }
  }
  cudnnDestroyTensorDescriptor(xd);
  cudnnDestroyTensorDescriptor(yd);
  cudnnDestroyFilterDescriptor(wd);
  cudnnDestroyConvolutionDescriptor(cd);
  return best;
}

int main(int argc, char** argv) {
  const char* json_path = argc > 1 ? argv[1] : "int8_conv_micro.json";
  CK(cudaStreamCreate(&g_stream));
  cudnnHandle_t h;
  cudnnCreate(&h);
  cudnnSetStream(h, g_stream);
  cublasLtHandle_t lt;
  cublasLtCreate(&lt);
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("GPU %s, cuDNN %zu, cuBLASLt %zu\n", prop.name, cudnnGetVersion(), cublasLtGetVersion());
  const size_t ws_bytes = 256u << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_bytes));
  Shape shapes[2] = {{"1x1 256->64", 256, 256, 56, 56, 64, 1, 1, 0},
                     {"3x3 64->64", 256, 64, 56, 56, 64, 3, 3, 1}};
  FILE* js = fopen(json_path, "w");
  fprintf(js, "{\"gpu\": \"%s\", \"cudnn\": %zu, \"results\": [\n", prop.name, cudnnGetVersion());
  bool first = true;
  for (const Shape& s : shapes) {
    const size_t nx = (size_t)s.n * s.h * s.w * s.c, nw = (size_t)s.k * s.r * s.s * s.c,
                 ny = (size_t)s.n * s.h * s.w * s.k;
    const double gops = 2.0 * ny * s.c * s.r * s.s / 1e9;
    int8_t *x8, *w8, *y8, *col = nullptr;
    __half *xh, *wh, *yh;
    float *yf, *scale, *bias;
    int32_t* ref;
    CK(cudaMalloc(&x8, nx));
    CK(cudaMalloc(&w8, nw));
    CK(cudaMalloc(&y8, ny));
    CK(cudaMalloc(&xh, nx * 2));
    CK(cudaMalloc(&wh, nw * 2));
    CK(cudaMalloc(&yh, ny * 2));
    CK(cudaMalloc(&yf, ny * 4));
    CK(cudaMalloc(&scale, s.k * 4));
    CK(cudaMalloc(&bias, s.k * 4));
    fill_s8<<<(nx + 255) / 256, 256, 0, g_stream>>>(x8, nx, 1, 0, 127);
    fill_s8<<<(nw + 255) / 256, 256, 0, g_stream>>>(w8, nw, 2, -127, 127);
    s8_to_h<<<(nx + 255) / 256, 256, 0, g_stream>>>(x8, xh, nx);
    s8_to_h<<<(nw + 255) / 256, 256, 0, g_stream>>>(w8, wh, nw);
    std::vector<float> hs(s.k), hb(s.k);
    for (int k = 0; k < s.k; ++k) {
      hs[k] = 1.0f / (2000.0f + 97.0f * k);
      hb[k] = (float)((k * 37) % 11) - 5.0f;
    }
    CK(cudaMemcpy(scale, hs.data(), s.k * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(bias, hb.data(), s.k * 4, cudaMemcpyHostToDevice));
    const size_t step = 9973, count = ny / step;
    CK(cudaMalloc(&ref, count * 4));
    ref_conv<<<(count + 127) / 128, 128, 0, g_stream>>>(x8, w8, ref, s, s.h, s.w, count, step);
    CK(cudaStreamSynchronize(g_stream));
    std::vector<int32_t> acc(count);
    CK(cudaMemcpy(acc.data(), ref, count * 4, cudaMemcpyDeviceToHost));
    const std::vector<int8_t> want = expect_s8(acc, hs, hb, s.k, step);

    struct Row {
      std::string what, detail;
      float ms;
      int err;
    };
    std::vector<Row> rows;
    std::string d;
    float t = legacy(h, s, CUDNN_DATA_HALF, CUDNN_DATA_HALF, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC,
                     xh, wh, yh, ws, ws_bytes, d);
    rows.push_back({"fp16 cudnn legacy NHWC", d, t, -1});
    d.clear();
    t = legacy(h, s, CUDNN_DATA_INT8, CUDNN_DATA_INT8, CUDNN_DATA_INT32, CUDNN_TENSOR_NHWC, x8, w8,
               y8, ws, ws_bytes, d);
    rows.push_back({"int8 cudnn legacy NHWC s8 out", d, t, -1});
    d.clear();
    t = legacy(h, s, CUDNN_DATA_INT8, CUDNN_DATA_FLOAT, CUDNN_DATA_INT32, CUDNN_TENSOR_NHWC, x8, w8,
               yf, ws, ws_bytes, d);
    rows.push_back({"int8 cudnn legacy NHWC f32 out", d, t, -1});
    d.clear();
    CK(cudaMemset(y8, 0x7f, ny));
    t = backend_int8(h, s, x8, w8, scale, bias, y8, ws, ws_bytes, d);
    rows.push_back({"int8 cudnn graph conv*scale+bias,relu", d, t,
                    std::isfinite(t) ? max_diff(y8, want, step) : -1});
    d.clear();
    if (s.r == 1) {
      CK(cudaMemset(y8, 0x7f, ny));
      t = lt_gemm(lt, (int64_t)s.n * s.h * s.w, s.k, s.c, w8, x8, y8, true, true, scale, bias, ws,
                  ws_bytes, d);
      rows.push_back({"int8 cublasLt s8 out, scale+bias+relu", d, t,
                      std::isfinite(t) ? max_diff(y8, want, step) : -1});
      d.clear();
      t = lt_gemm(lt, (int64_t)s.n * s.h * s.w, s.k, s.c, wh, xh, yh, false, false, nullptr,
                  nullptr, ws, ws_bytes, d);
      rows.push_back({"fp16 cublasLt", d, t, -1});
    } else {
      const size_t ncol = (size_t)s.n * s.h * s.w * s.r * s.s * s.c;
      CK(cudaMalloc(&col, ncol));
      const size_t threads = ncol / 16;
      float ti = time_ms([&] {
        im2col_s8<<<(threads + 255) / 256, 256, 0, g_stream>>>(x8, col, s);
        return cudaGetLastError() == cudaSuccess;
      });
      rows.push_back({"int8 im2col alone", "", ti, -1});
      CK(cudaMemset(y8, 0x7f, ny));
      d.clear();
      t = lt_gemm(lt, (int64_t)s.n * s.h * s.w, s.k, (int64_t)s.r * s.s * s.c, w8, col, y8, true,
                  true, scale, bias, ws, ws_bytes, d);
      rows.push_back({"int8 cublasLt on im2col (gemm only)", d, t,
                      std::isfinite(t) ? max_diff(y8, want, step) : -1});
      CK(cudaFree(col));
    }
    printf("\n%s, batch %d, %dx%d: %.1f GOP\n", s.name, s.n, s.h, s.w, gops);
    for (const Row& r : rows) {
      printf("  %-42s %8.3f ms %7.0f TOPS  maxerr %d |%s\n", r.what.c_str(), r.ms, gops / r.ms,
             r.err, r.detail.c_str());
      fprintf(js,
              "%s{\"shape\": \"%s\", \"what\": \"%s\", \"ms\": %.4f, \"max_err\": %d, \"detail\": "
              "\"%s\"}",
              first ? "" : ",\n", s.name, r.what.c_str(), std::isfinite(r.ms) ? r.ms : -1.0, r.err,
              r.detail.c_str());
      first = false;
    }
    cudaFree(x8);
    cudaFree(w8);
    cudaFree(y8);
    cudaFree(xh);
    cudaFree(wh);
    cudaFree(yh);
    cudaFree(yf);
    cudaFree(scale);
    cudaFree(bias);
    cudaFree(ref);
  }
  fprintf(js, "\n]}\n");
  fclose(js);
  return 0;
}
