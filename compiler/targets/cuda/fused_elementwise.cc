// SPDX-License-Identifier: Apache-2.0
// Fused elementwise chains: source generation, NVRTC (through dlopen), the CUBIN disk cache, and
// loading through the CUDA runtime's library API (libcuda is not linked: CI has no driver).
#include "compiler/targets/cuda/fused_elementwise.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <nvrtc.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "core/cache_dir.h"
#include "core/check.h"
#include "core/logging.h"

namespace kiln::compiler::cuda {

const char* unary_formula(Unary op) {
  switch (op) {
    case Unary::kRelu: return "x > 0.0f ? x : 0.0f";
    case Unary::kSigmoid: return "1.0f / (1.0f + expf(-x))";
    case Unary::kTanh: return "tanhf(x)";
    case Unary::kExp: return "expf(x)";
    case Unary::kLog: return "logf(x)";
    case Unary::kNeg: return "-x";
    case Unary::kAbs: return "fabsf(x)";
    case Unary::kSqrt: return "sqrtf(x)";
    case Unary::kErf: return "erff(x)";
    case Unary::kReciprocal: return "1.0f / x";
    case Unary::kFloor: return "floorf(x)";
    case Unary::kCeil: return "ceilf(x)";
    case Unary::kSin: return "sinf(x)";
    case Unary::kCos: return "cosf(x)";
    case Unary::kSoftplus: return "x > 20.0f ? x : log1pf(expf(x))";
    case Unary::kLeakyRelu: return "x >= 0.0f ? x : alpha * x";
    case Unary::kElu: return "x >= 0.0f ? x : alpha * (expf(x) - 1.0f)";
    case Unary::kClip: return "fminf(fmaxf(x, alpha), beta)";
    case Unary::kHardSigmoid: return "fmaxf(0.0f, fminf(1.0f, alpha * x + beta))";
    case Unary::kHardSwish: return "x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f))";
    case Unary::kGelu: return "0.5f * x * (1.0f + erff(x * 0.70710678118654752f))";
    case Unary::kGeluTanh:
      return "0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)))";
    case Unary::kSwish: return "x / (1.0f + expf(-alpha * x))";
    case Unary::kIdentity: return "x";
    case Unary::kScale: return "alpha * x";
  }
  return nullptr;
}

const char* binary_formula(Binary op) {
  switch (op) {
    case Binary::kAdd: return "a + b";
    case Binary::kSub: return "a - b";
    case Binary::kMul: return "a * b";
    case Binary::kDiv: return "a / b";
    case Binary::kPow: return "powf(a, b)";
    case Binary::kMax: return "fmaxf(a, b)";
    case Binary::kMin: return "fminf(a, b)";
  }
  return nullptr;
}

namespace {

// A float literal that is exact for every value (NaN and infinities included).
std::string float_literal(float v) {
  uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof(bits));
  return fmt::format("__int_as_float(0x{:08x})", bits);
}

// Element storage and f32 conversions (round to nearest even), without cuda_fp16.h.
constexpr const char* kPrelude = R"(typedef unsigned short u16;
__device__ __forceinline__ float ld(float v) { return v; }
__device__ __forceinline__ float ld_f16(u16 v) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v)); return f; }
__device__ __forceinline__ float ld_bf16(u16 v) { return __int_as_float(((unsigned)v) << 16); }
__device__ __forceinline__ u16 st_f16(float f) { u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u16 st_bf16(float f) { u16 h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
)";

struct ElemCode {
  const char* type;
  const char* load;
  const char* store;
};
ElemCode elem_code(Elem e) {
  switch (e) {
    case Elem::kF16: return {"u16", "ld_f16", "st_f16"};
    case Elem::kBF16: return {"u16", "ld_bf16", "st_bf16"};
    case Elem::kF32: break;
  }
  return {"float", "ld", ""};
}

Status check_operand(const ElementwiseChain& chain, const ChainOperand& o, size_t op) {
  const bool ok =
      o.kind == ChainOperand::Kind::kScalar ||
      (o.kind == ChainOperand::Kind::kInput && o.index >= 0 && o.index < chain.inputs) ||
      (o.kind == ChainOperand::Kind::kValue && o.index >= 0 && static_cast<size_t>(o.index) < op);
  if (ok) return Status();
  return invalid_argument_error(fmt::format(
      "fused elementwise chain: op {} reads operand {} of kind {} (the chain has {} inputs; an op "
      "may read only earlier ops' values)",
      op, o.index, static_cast<int>(o.kind), chain.inputs));
}

std::string operand_code(const ChainOperand& o) {
  switch (o.kind) {
    case ChainOperand::Kind::kInput: return fmt::format("x{}", o.index);
    case ChainOperand::Kind::kValue: return fmt::format("v{}", o.index);
    case ChainOperand::Kind::kScalar: break;
  }
  return float_literal(o.scalar);
}

}  // namespace

const TensorAccess& ElementwiseChain::access_of(int input) const {
  static const TensorAccess kContiguous;
  return static_cast<size_t>(input) < access.size() ? access[static_cast<size_t>(input)]
                                                    : kContiguous;
}

std::string kernel_prelude(Elem elem) {
  // rnd(v): v rounded to the element type, as storing it and loading it back would.
  const ElemCode code = elem_code(elem);
  const std::string rnd =
      elem == Elem::kF32 ? "v" : fmt::format("{}({}(v))", code.load, code.store);
  return std::string(kPrelude) +
         fmt::format("typedef {} T;\n__device__ __forceinline__ float rnd(float v) {{ return {}; }}\n",
                     code.type, rnd);
}

std::string access_offset(const TensorAccess& access, const std::string& index) {
  if (access.contiguous()) return index;
  std::string sum;
  int64_t inner = 1;
  for (size_t d = access.dims.size(); d-- > 0;) {
    const int64_t dim = access.dims[d];
    if (access.strides[d] != 0 && dim != 1) {
      std::string term = inner == 1 ? index : fmt::format("{} / {}LL", index, inner);
      if (d > 0) term = fmt::format("({} % {}LL)", term, dim);
      sum += fmt::format("{}{} * {}LL", sum.empty() ? "" : " + ", term, access.strides[d]);
    }
    inner *= dim;
  }
  return sum.empty() ? "0" : "(" + sum + ")";
}

std::string load_code(Elem elem, const std::string& pointer, const std::string& offset) {
  return fmt::format("{}({}[{}])", elem_code(elem).load, pointer, offset);
}

std::string store_code(Elem elem, const std::string& value) {
  return fmt::format("{}({})", elem_code(elem).store, value);
}

Result<std::string> chain_function_source(const ElementwiseChain& chain, const std::string& fn) {
  if (chain.ops.empty() || chain.inputs < 1) {
    return invalid_argument_error("fused elementwise chain: needs at least one input and one op");
  }
  // The chain's body, on f32 values x<i> (the loaded inputs), writing v<k> for op k. Each value is
  // rounded to the element type (rnd), so that a fused chain of f16 or bf16 ops gives what the
  // ops one by one give (ONNX rounds every op's output to its type), bit for bit.
  std::string body;
  for (size_t k = 0; k < chain.ops.size(); ++k) {
    const ChainOp& op = chain.ops[k];
    KILN_RETURN_IF_ERROR(check_operand(chain, op.a, k));
    if (op.is_binary) {
      KILN_RETURN_IF_ERROR(check_operand(chain, op.b, k));
      const char* f = binary_formula(op.binary);
      if (f == nullptr) return invalid_argument_error("fused elementwise chain: unknown binary op");
      body += fmt::format("  float v{}; {{ const float a = {}, b = {}; v{} = rnd({}); }}\n", k,
                          operand_code(op.a), operand_code(op.b), k, f);
    } else {
      const char* f = unary_formula(op.unary);
      if (f == nullptr) return invalid_argument_error("fused elementwise chain: unknown unary op");
      body += fmt::format(
          "  float v{}; {{ const float x = {}, alpha = {}, beta = {}; (void)alpha; (void)beta; "
          "v{} = rnd({}); }}\n",
          k, operand_code(op.a), float_literal(op.alpha), float_literal(op.beta), k, f);
    }
  }
  std::string src = fmt::format("__device__ __forceinline__ float {}(", fn);
  for (int i = 0; i < chain.inputs; ++i) src += fmt::format("{}float x{}", i > 0 ? ", " : "", i);
  src += ") {\n" + body + fmt::format("  return v{};\n}}\n", chain.ops.size() - 1);
  return src;
}

Result<std::string> fused_elementwise_source(const ElementwiseChain& chain,
                                             const std::string& name) {
  KILN_ASSIGN_OR_RETURN(std::string function, chain_function_source(chain, "chain"));
  bool contiguous = true;
  for (int i = 0; i < chain.inputs; ++i) contiguous = contiguous && chain.access_of(i).contiguous();
  std::string params;
  for (int i = 0; i < chain.inputs; ++i) params += fmt::format("const T* __restrict__ in{}, ", i);
  params += "T* __restrict__ out, long long n";

  std::string src = kernel_prelude(chain.elem);
  src +=
      fmt::format("struct __align__({}) P8 {{ T v[8]; }};\n", chain.elem == Elem::kF32 ? 32 : 16);
  src += function;
  // The chain on element `i` of the result, input k read at `operand(k, offset)`.
  auto call = [&](const std::function<std::string(int)>& operand) {
    std::string args;
    for (int k = 0; k < chain.inputs; ++k) args += (k > 0 ? ", " : "") + operand(k);
    return store_code(chain.elem, fmt::format("chain({})", args));
  };
  const char* stride =
      "blockIdx.x * (long long)blockDim.x + threadIdx.x; i < {}; "
      "i += (long long)blockDim.x * gridDim.x";
  src += fmt::format("extern \"C\" __global__ void {}({}) {{\n  for (long long i = {}) {{\n", name,
                     params, fmt::format(fmt::runtime(stride), "n"));
  src += fmt::format("    out[i] = {};\n  }}\n}}\n", call([&](int k) {
                       return load_code(chain.elem, fmt::format("in{}", k),
                                        access_offset(chain.access_of(k), "i"));
                     }));
  if (!contiguous) return src;
  src += fmt::format("extern \"C\" __global__ void {}_v8({}) {{\n  for (long long i = {}) {{\n",
                     name, params, fmt::format(fmt::runtime(stride), "n / 8"));
  for (int i = 0; i < chain.inputs; ++i) {
    src += fmt::format("    const P8 p{} = reinterpret_cast<const P8*>(in{})[i];\n", i, i);
  }
  src += "    P8 r;\n#pragma unroll\n    for (int k = 0; k < 8; ++k) r.v[k] = ";
  src += call([&](int k) { return fmt::format("{}(p{}.v[k])", elem_code(chain.elem).load, k); });
  src += ";\n    reinterpret_cast<P8*>(out)[i] = r;\n  }\n}\n";
  return src;
}

// ---- NVRTC, through dlopen ---------------------------------------------------------------------

namespace {

constexpr const char* kNvrtcLibrary = "libnvrtc.so." KILN_NVRTC_SOVERSION;

struct Nvrtc {
  void* handle = nullptr;
  std::string error;
  decltype(&nvrtcVersion) version = nullptr;
  decltype(&nvrtcGetErrorString) error_string = nullptr;
  decltype(&nvrtcCreateProgram) create = nullptr;
  decltype(&nvrtcCompileProgram) compile = nullptr;
  decltype(&nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&nvrtcGetCUBIN) cubin = nullptr;
  decltype(&nvrtcDestroyProgram) destroy = nullptr;
};

template <class Fn>
void bind(Nvrtc& n, Fn& fn, const char* name) {
  fn = reinterpret_cast<Fn>(dlsym(n.handle, name));
  if (fn == nullptr && n.error.empty()) n.error = fmt::format("no symbol {}", name);
}

const Nvrtc& nvrtc() {
  static const Nvrtc lib = [] {
    Nvrtc n;
    n.handle = dlopen(kNvrtcLibrary, RTLD_NOW | RTLD_LOCAL);
    if (n.handle == nullptr) {
      const char* reason = dlerror();
      n.error = reason != nullptr ? reason : "unknown loader error";
      return n;
    }
    bind(n, n.version, "nvrtcVersion");
    bind(n, n.error_string, "nvrtcGetErrorString");
    bind(n, n.create, "nvrtcCreateProgram");
    bind(n, n.compile, "nvrtcCompileProgram");
    bind(n, n.log_size, "nvrtcGetProgramLogSize");
    bind(n, n.log, "nvrtcGetProgramLog");
    bind(n, n.cubin_size, "nvrtcGetCUBINSize");
    bind(n, n.cubin, "nvrtcGetCUBIN");
    bind(n, n.destroy, "nvrtcDestroyProgram");
    return n;
  }();
  return lib;
}

Status nvrtc_loaded() {
  const Nvrtc& n = nvrtc();
  if (n.handle != nullptr && n.error.empty()) return Status();
  return unavailable_error(fmt::format(
      "target cuda: cannot load NVRTC {} ({}); install the CUDA toolkit's NVRTC (cuda-nvrtc) or "
      "add its lib64 folder to LD_LIBRARY_PATH",
      kNvrtcLibrary, n.error));
}

Status nvrtc_error(nvrtcResult r, const char* what, const std::string& log = {}) {
  return internal_error(fmt::format("NVRTC {} failed: {}{}{}", what, nvrtc().error_string(r),
                                    log.empty() ? "" : "; NVRTC log:\n", log));
}

Result<std::vector<char>> nvrtc_compile(const std::string& source, const std::string& arch) {
  const Nvrtc& n = nvrtc();
  nvrtcProgram prog = nullptr;
  nvrtcResult r = n.create(&prog, source.c_str(), "kiln_fused.cu", 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) return nvrtc_error(r, "nvrtcCreateProgram");
  const std::string arch_option = "--gpu-architecture=" + arch;
  // No fast math: IEEE division and square root, denormals kept, as nvcc builds kernels/*.cu.
  const char* options[] = {arch_option.c_str(), "-default-device",  "--ftz=false",
                           "--prec-div=true",   "--prec-sqrt=true", "-std=c++17"};
  r = n.compile(prog, static_cast<int>(std::size(options)), options);
  std::string log;
  size_t log_bytes = 0;
  if (n.log_size(prog, &log_bytes) == NVRTC_SUCCESS && log_bytes > 1) {
    log.resize(log_bytes);
    if (n.log(prog, log.data()) != NVRTC_SUCCESS) log.clear();
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  }
  std::vector<char> cubin;
  if (r == NVRTC_SUCCESS) {
    size_t bytes = 0;
    r = n.cubin_size(prog, &bytes);
    if (r == NVRTC_SUCCESS) {
      cubin.resize(bytes);
      r = n.cubin(prog, cubin.data());
    }
    if (r != NVRTC_SUCCESS) log = "(reading the CUBIN) " + log;
  }
  n.destroy(&prog);
  if (r != NVRTC_SUCCESS) return nvrtc_error(r, fmt::format("compiling for {}", arch).c_str(), log);
  if (cubin.empty()) return internal_error("NVRTC produced an empty CUBIN for " + arch);
  return cubin;
}

// FNV-1a, 64 bits.
uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// The cache file: this header, then `size` bytes of CUBIN.
struct CacheHeader {
  char magic[8];
  uint64_t key;
  uint64_t size;
  uint64_t checksum;
};
constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'U', 'B', '1'};

// The cached CUBIN at `path` for `key`; an empty vector (with a warning for a damaged file) when
// there is none.
std::vector<char> read_cached(const std::string& path, uint64_t key) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CacheHeader h{};
  std::string problem;
  if (bytes.size() < sizeof(h)) {
    problem = "shorter than its header";
  } else {
    std::memcpy(&h, bytes.data(), sizeof(h));
    if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 || h.key != key) {
      problem = "not a kiln CUBIN cache file for this key";
    } else if (h.size != bytes.size() - sizeof(h)) {
      problem = fmt::format("truncated ({} of {} bytes)", bytes.size() - sizeof(h), h.size);
    } else if (fnv1a(bytes.data() + sizeof(h), h.size) != h.checksum) {
      problem = "checksum mismatch";
    }
  }
  if (!problem.empty()) {
    log(LogLevel::kWarning, "NVRTC cache file {} is damaged ({}); recompiling", path, problem);
    return {};
  }
  return std::vector<char>(bytes.begin() + sizeof(h), bytes.end());
}

// Writes the CUBIN to `path` through a temporary file and a rename; false (warning logged) when
// it cannot.
bool write_cached(const std::string& dir, const std::string& path, uint64_t key,
                  const std::vector<char>& cubin) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string tmp = fmt::format("{}.tmp{}", path, static_cast<long>(getpid()));
  CacheHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.key = key;
  h.size = cubin.size();
  h.checksum = fnv1a(cubin.data(), cubin.size());
  bool ok = false;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (out) {
      out.write(reinterpret_cast<const char*>(&h), sizeof(h));
      out.write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
      ok = static_cast<bool>(out.flush());
    }
  }
  if (ok) {
    std::filesystem::rename(tmp, path, ec);
    ok = !ec;
  }
  if (!ok) {
    std::filesystem::remove(tmp, ec);
    log(LogLevel::kWarning,
        "cannot write the NVRTC cache file {} (is {} writable? set KILN_CACHE_DIR to a writable "
        "folder); the kernel is compiled but not cached",
        path, dir);
  }
  return ok;
}

}  // namespace

Result<std::string> nvrtc_version() {
  KILN_RETURN_IF_ERROR(nvrtc_loaded());
  int major = 0, minor = 0;
  const nvrtcResult r = nvrtc().version(&major, &minor);
  if (r != NVRTC_SUCCESS) return nvrtc_error(r, "nvrtcVersion");
  return fmt::format("{}.{}", major, minor);
}

std::string nvrtc_cache_dir() {
  return (cache_root() / "nvrtc").string();
}

Result<Cubin> compile_cubin(const std::string& source, const CubinOptions& options) {
  KILN_ASSIGN_OR_RETURN(const std::string version, nvrtc_version());
  const std::string keyed = source + '\0' + options.arch + '\0' + version;
  const uint64_t key = fnv1a(keyed.data(), keyed.size());
  const std::string dir = options.cache_dir.empty() ? nvrtc_cache_dir() : options.cache_dir;
  const std::string path =
      (std::filesystem::path(dir) / fmt::format("{:016x}-{}.cubin", key, options.arch)).string();
  Cubin out;
  if (options.use_cache) {
    out.image = read_cached(path, key);
    if (!out.image.empty()) {
      out.cache_path = path;
      return out;
    }
  }
  KILN_ASSIGN_OR_RETURN(out.image, nvrtc_compile(source, options.arch));
  out.compiled = true;
  if (options.use_cache && write_cached(dir, path, key, out.image)) out.cache_path = path;
  return out;
}

// ---- Loading and launching through the CUDA runtime ---------------------------------------------

namespace {

Status cuda_error(cudaError_t err, const std::string& what) {
  return unavailable_error(
      fmt::format("target cuda: fused elementwise kernel: {}: {}", what, cudaGetErrorString(err)));
}

constexpr int kThreads = 256;

}  // namespace

Result<std::string> current_device_arch() {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  int major = 0, minor = 0;
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  }
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  }
  if (err != cudaSuccess) return cuda_error(err, "reading the device's compute capability");
  return fmt::format("sm_{}{}", major, minor);
}

NvrtcModule::~NvrtcModule() {
  if (library_ != nullptr) (void)cudaLibraryUnload(static_cast<cudaLibrary_t>(library_));
}

Result<std::unique_ptr<NvrtcModule>> NvrtcModule::load(const std::string& source,
                                                       const std::vector<std::string>& kernels,
                                                       const std::string& cache_dir) {
  CubinOptions options;
  KILN_ASSIGN_OR_RETURN(options.arch, current_device_arch());
  options.cache_dir = cache_dir;
  KILN_ASSIGN_OR_RETURN(const Cubin cubin, compile_cubin(source, options));
  std::unique_ptr<NvrtcModule> m(new NvrtcModule());
  m->compiled_ = cubin.compiled;
  cudaLibrary_t lib = nullptr;
  cudaError_t err =
      cudaLibraryLoadData(&lib, cubin.image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (err != cudaSuccess) return cuda_error(err, "cudaLibraryLoadData of the NVRTC CUBIN");
  m->library_ = lib;
  for (const std::string& name : kernels) {
    cudaKernel_t kernel = nullptr;
    err = cudaLibraryGetKernel(&kernel, lib, name.c_str());
    if (err != cudaSuccess) return cuda_error(err, "cudaLibraryGetKernel " + name);
    m->kernels_.push_back(kernel);
  }
  return m;
}

Status NvrtcModule::launch(size_t k, int64_t blocks, int x, int y, void** args,
                           void* stream) const {
  KILN_CHECK(k < kernels_.size());
  const cudaError_t err = cudaLaunchKernel(kernels_[k], dim3(static_cast<unsigned>(blocks)),
                                           dim3(static_cast<unsigned>(x), static_cast<unsigned>(y)),
                                           args, 0, static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) return cuda_error(err, "cudaLaunchKernel");
  return Status();
}

FusedElementwiseKernel::~FusedElementwiseKernel() = default;

Result<std::unique_ptr<FusedElementwiseKernel>> FusedElementwiseKernel::create(
    const ElementwiseChain& chain, const std::string& cache_dir) {
  const std::string name = "kiln_fused_elementwise";
  KILN_ASSIGN_OR_RETURN(const std::string source, fused_elementwise_source(chain, name));
  std::unique_ptr<FusedElementwiseKernel> k(new FusedElementwiseKernel());
  k->vec8_ = source.find(name + "_v8(") != std::string::npos;
  std::vector<std::string> names = {name};
  if (k->vec8_) names.push_back(name + "_v8");
  KILN_ASSIGN_OR_RETURN(k->module_, NvrtcModule::load(source, names, cache_dir));
  k->inputs_ = chain.inputs;
  k->element_bytes_ = chain.elem == Elem::kF32 ? 4 : 2;
  return k;
}

Status FusedElementwiseKernel::launch(const std::vector<const void*>& inputs, void* out, int64_t n,
                                      void* stream) const {
  if (static_cast<int>(inputs.size()) != inputs_) {
    return invalid_argument_error(fmt::format(
        "fused elementwise kernel: {} inputs given, the chain takes {}", inputs.size(), inputs_));
  }
  if (n <= 0) return Status();
  // 8 elements a thread where n and every pointer allow the pack's alignment.
  const uintptr_t align = 8 * static_cast<uintptr_t>(element_bytes_);
  bool vec = vec8_ && n % 8 == 0 && reinterpret_cast<uintptr_t>(out) % align == 0;
  for (const void* p : inputs) vec = vec && reinterpret_cast<uintptr_t>(p) % align == 0;
  const int64_t units = vec ? n / 8 : n;
  const int64_t blocks = std::min<int64_t>((units + kThreads - 1) / kThreads, 65535 * 16);
  long long count = n;
  std::vector<const void*> pointers = inputs;
  std::vector<void*> args;
  args.reserve(inputs.size() + 2);
  for (const void*& p : pointers) args.push_back(static_cast<void*>(&p));
  args.push_back(&out);
  args.push_back(&count);
  return module_->launch(vec ? 1 : 0, blocks, kThreads, 1, args.data(), stream);
}

}  // namespace kiln::compiler::cuda
