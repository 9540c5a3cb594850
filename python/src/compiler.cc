// SPDX-License-Identifier: Apache-2.0
// The compiler API with MIGraphX's names: shape, argument, target, program, parse_onnx, compile.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/artifact/artifact.h"
#include "compiler/artifact/checksum.h"
#include "compiler/cache/compile_cache.h"
#include "compiler/ir/printer.h"
#include "compiler/onnx/importer.h"
#include "compiler/quantize/quantize.h"
#include "compiler/targets/target.h"
#include "core/mapped_file.h"
#include "core/progress.h"
#include "python/src/bindings.h"
#include "python/src/shape.h"

namespace kiln::python {
namespace {

using namespace pybind11::literals;
using compiler::Argument;
using compiler::TensorType;

PyShape shape_of(const compiler::Value& value) {
  if (!value.type().is_tensor()) {
    raise_status(unimplemented_error(
        fmt::format("value \"{}\" is a {}; the python API describes tensors only", value.name(),
                    value.type().to_string())));
  }
  return PyShape::of(value.tensor_type());
}

// Where a program came from, for the artifacts it is saved as.
struct ProgramSource {
  std::string name;                                          // the model file's name, or "<buffer>"
  std::string path;                                          // the model file; empty for a buffer
  std::shared_ptr<const std::string> bytes;                  // a buffer's bytes
  std::vector<std::pair<std::string, std::string>> options;  // {"input_shape", "x=1,3,224,224"}
};

// A compiled or imported model: MIGraphX's `program`.
class Program {
 public:
  Program(std::unique_ptr<compiler::Model> model, ProgramSource source)
      : graph_(std::move(model->graph)), opset_(model->opset), source_(std::move(source)) {}
  // A program the graph builder fills in (kiln.program(); get_main_module()).
  Program() : graph_(std::make_shared<compiler::Graph>()), source_{"<builder>", "", nullptr, {}} {}
  // A program loaded compiled (from an artifact).
  explicit Program(std::shared_ptr<compiler::Executable> exe) : exe_(std::move(exe)) {}
  // A program the compile cache compiled or loaded from `source` with `options`.
  Program(std::shared_ptr<compiler::Executable> exe, ProgramSource source,
          const compiler::CompileOptions& options)
      : exe_(std::move(exe)), options_(options), source_(std::move(source)) {}

  const compiler::Graph& graph() const { return exe_ ? exe_->graph() : *graph_; }
  // The graph before compilation, which the builder edits; null once compiled.
  std::shared_ptr<compiler::Graph> editable_graph() const { return exe_ ? nullptr : graph_; }
  bool is_compiled() const { return exe_ != nullptr; }

  void compile(const compiler::Target& target, const compiler::CompileOptions& options) {
    if (exe_) {
      raise_status(failed_precondition_error(fmt::format(
          "program: already compiled for target {}; parse the model again to compile it for "
          "another target",
          exe_->target())));
    }
    Result<std::shared_ptr<compiler::Executable>> exe = [&] {
      py::gil_scoped_release release;
      return compiler::compile(graph_, target, options);
    }();
    exe_ = unwrap(std::move(exe));
    options_ = options;
  }

  // The compiled executable; an error naming `what` when the program is not compiled.
  const compiler::Executable& executable(std::string_view what) const {
    if (!exe_) {
      raise_status(failed_precondition_error(fmt::format(
          "{}: the program is not compiled; call compile(kiln.get_target(\"cpu\")) first", what)));
    }
    return *exe_;
  }
  const compiler::CompileOptions& options() const { return options_; }
  const ProgramSource& source() const { return source_; }

  // The graph to quantize in place; an error naming `what` once the program is compiled.
  compiler::Graph& graph_to_quantize(std::string_view what) {
    if (exe_) {
      raise_status(failed_precondition_error(
          fmt::format("{}: the program is already compiled; quantize after parse_onnx() and before "
                      "compile()",
                      what)));
    }
    return *graph_;
  }

  py::list run(const py::dict& params) const {
    if (!exe_) {
      raise_status(failed_precondition_error(
          "program: not compiled; call compile(kiln.get_target(\"ref\")) before run()"));
    }
    std::vector<Argument> inputs;
    for (const auto& [in, value] : match_params("run", params)) {
      if (py::isinstance<Tensor>(value)) {
        inputs.emplace_back(value.cast<Tensor>());
      } else {
        inputs.emplace_back(tensor_from_numpy(value, fmt::format("run: input \"{}\"", in->name())));
      }
    }
    Result<std::vector<Argument>> outputs = [&] {
      py::gil_scoped_release release;
      return exe_->run(std::move(inputs));
    }();
    py::list out;
    for (Argument& a : unwrap(std::move(outputs))) {
      if (!a.is_tensor()) {
        raise_status(unimplemented_error(fmt::format(
            "run: an output is a {}; the python API returns tensors only", a.to_string())));
      }
      out.append(py::cast(std::move(a.tensor())));
    }
    return out;
  }

  // Runs on arguments already in the device's memory: `params` maps each input name to a DLPack
  // tensor (a torch CUDA tensor), `outputs` holds one per program output, written in place. The
  // caller has finished the producers' work on those tensors (see dlpack_view); this returns once
  // the outputs are written.
  void run_device(const py::dict& params, const py::list& outputs) const {
    const compiler::Executable& exe = executable("run_device");
    const compiler::Graph& g = exe.graph();
    if (outputs.size() != g.outputs().size()) {
      raise_status(invalid_argument_error(
          fmt::format("run_device: the program gives {} outputs ({}); got {} output tensors",
                      g.outputs().size(), fmt::join(output_names(), ", "), outputs.size())));
    }
    // Every argument's type first, then where its memory is.
    std::vector<DLPackView> views;  // keep the capsules alive through the run
    std::vector<const compiler::Value*> values;
    for (const auto& [value, arg] : match_params("run_device", params)) {
      views.push_back(dlpack_view(arg, fmt::format("run_device: input \"{}\"", value->name())));
      values.push_back(value);
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      const compiler::Value* value = g.outputs()[i];
      views.push_back(
          dlpack_view(outputs[i], fmt::format("run_device: output {} (\"{}\")", i, value->name())));
      values.push_back(value);
      if (views.back().read_only) {
        raise_status(invalid_argument_error(
            fmt::format("run_device: output {} (\"{}\") is read-only; pass writable memory", i,
                        value->name())));
      }
    }
    for (size_t i = 0; i < views.size(); ++i) check_device_type(views[i], *values[i]);
    for (size_t i = 0; i < views.size(); ++i) check_device_memory(views[i], *values[i], views[0]);
    std::vector<const void*> in;
    std::vector<void*> out;
    for (size_t i = 0; i < views.size(); ++i) {
      if (i < g.inputs().size()) {
        in.push_back(views[i].data);
      } else {
        out.push_back(views[i].data);
      }
    }
    const Status ran = [&] {
      py::gil_scoped_release release;
      return exe.run_device(in, out);
    }();
    check_ok(ran);
  }

  std::vector<std::string> parameter_names() const {
    std::vector<std::string> names;
    for (const compiler::Value* v : graph().inputs()) names.push_back(v->name());
    return names;
  }
  std::map<std::string, PyShape> parameter_shapes() const {
    std::map<std::string, PyShape> out;
    for (const compiler::Value* v : graph().inputs()) out.emplace(v->name(), shape_of(*v));
    return out;
  }
  std::vector<PyShape> output_shapes() const {
    std::vector<PyShape> out;
    for (const compiler::Value* v : graph().outputs()) out.push_back(shape_of(*v));
    return out;
  }
  std::vector<std::string> output_names() const {
    std::vector<std::string> names;
    for (const compiler::Value* v : graph().outputs()) names.push_back(v->name());
    return names;
  }
  std::string to_string() const { return compiler::print_graph(graph()); }
  std::string target() const { return exe_ ? std::string(exe_->target()) : std::string(); }
  int64_t opset() const { return opset_; }

 private:
  // Each graph input with its value in `params`; errors (naming `what`) for missing and unknown
  // names.
  std::vector<std::pair<const compiler::Value*, py::handle>> match_params(
      std::string_view what, const py::dict& params) const {
    std::vector<std::pair<const compiler::Value*, py::handle>> matched;
    for (const compiler::Value* in : graph().inputs()) {
      py::str key(in->name());
      if (!params.contains(key)) {
        raise_status(invalid_argument_error(
            fmt::format("{}: input \"{}\" is missing; the program's parameters are: {}", what,
                        in->name(), fmt::join(parameter_names(), ", "))));
      }
      matched.emplace_back(in, params[key]);
    }
    if (matched.size() != params.size()) {
      const std::vector<std::string> names = parameter_names();
      for (auto item : params) {
        auto name = py::str(item.first).cast<std::string>();
        if (std::find(names.begin(), names.end(), name) == names.end()) {
          raise_status(invalid_argument_error(
              fmt::format("{}: the program has no input \"{}\"; its parameters are: {}", what, name,
                          fmt::join(names, ", "))));
        }
      }
    }
    return matched;
  }

  // A device argument for graph value `value` has its dtype and static shape...
  static void check_device_type(const DLPackView& view, const compiler::Value& value) {
    const std::string what = fmt::format("run_device: \"{}\"", value.name());
    const compiler::TensorType& type = value.tensor_type();
    // DLPack producers before the kDLBool code export bool as uint8.
    const bool same_dtype =
        view.dtype == type.dtype || (type.dtype == DType::kBool && view.dtype == DType::kU8);
    if (!same_dtype) {
      raise_status(invalid_argument_error(
          fmt::format("{} is {} but the program takes {}; convert it (torch: x.to(dtype))", what,
                      dtype_name(view.dtype), dtype_name(type.dtype))));
    }
    if (!type.is_static() || type.shape().dims() != view.shape) {
      raise_status(invalid_argument_error(
          fmt::format("{} has shape [{}] but the program was compiled for {}; compile it for "
                      "this shape",
                      what, fmt::join(view.shape, ","), type.to_string())));
    }
  }

  // ... and is CUDA memory on `first`'s GPU.
  static void check_device_memory(const DLPackView& view, const compiler::Value& value,
                                  const DLPackView& first) {
    const std::string what = fmt::format("run_device: \"{}\"", value.name());
    if (view.device_type != kDLPackCuda) {
      raise_status(invalid_argument_error(fmt::format(
          "{} is a {} tensor; run_device takes CUDA device memory (torch: x.cuda()); pass host "
          "arrays to run()",
          what, view.device)));
    }
    if (view.device_id != first.device_id) {
      raise_status(invalid_argument_error(
          fmt::format("{} is on {} but the first argument is on {}; put every argument on one GPU",
                      what, view.device, first.device)));
    }
  }

  std::shared_ptr<compiler::Graph> graph_;
  std::shared_ptr<compiler::Executable> exe_;
  int64_t opset_ = 0;
  compiler::CompileOptions options_;
  ProgramSource source_;
};

compiler::ArtifactSource artifact_source(const Program& p, const std::string& filename) {
  const ProgramSource& src = p.source();
  compiler::ArtifactSource out;
  out.name = src.name;
  if (!src.path.empty()) {
    std::shared_ptr<const MappedFile> file = unwrap(MappedFile::open(src.path));
    out.size = file->size();
    out.hash = compiler::xxhash64(std::span(file->data(), file->size()));
  } else if (src.bytes) {
    out.size = src.bytes->size();
    out.hash = compiler::xxhash64(
        std::span(reinterpret_cast<const uint8_t*>(src.bytes->data()), src.bytes->size()));
  }
  out.options = src.options;
  out.recompile_command =
      fmt::format("kiln compile {} --target {}", src.path.empty() ? src.name : src.path,
                  p.executable("save").target());
  for (const auto& [key, value] : src.options) {
    if (key == "input_shape") out.recompile_command += " --input-shape " + value;
  }
  if (!filename.empty()) out.recompile_command += " -o " + filename;
  return out;
}

void save_program(const Program& p, const std::string& filename) {
  const compiler::Executable& exe = p.executable("save");
  compiler::ArtifactSource source = artifact_source(p, filename);
  Status saved = [&] {
    py::gil_scoped_release release;
    return compiler::save_artifact(filename, exe, p.options(), source);
  }();
  check_ok(saved);
}

Program load_program(const std::string& filename) {
  Result<compiler::LoadedArtifact> loaded = [&] {
    py::gil_scoped_release release;
    return compiler::load_artifact(filename);
  }();
  return Program(unwrap(std::move(loaded)).executable);
}

py::bytes save_program_buffer(const Program& p) {
  const compiler::Executable& exe = p.executable("save_buffer");
  compiler::ArtifactHeader header =
      compiler::make_artifact_header(exe, p.options(), artifact_source(p, ""));
  Result<std::vector<uint8_t>> bytes = [&]() -> Result<std::vector<uint8_t>> {
    py::gil_scoped_release release;
    KILN_ASSIGN_OR_RETURN(compiler::Executable::ArtifactContents contents, exe.artifact_contents());
    return compiler::serialize_artifact(header, *contents.graph, contents.sections);
  }();
  std::vector<uint8_t> out = unwrap(std::move(bytes));
  return py::bytes(reinterpret_cast<const char*>(out.data()), out.size());
}

Program load_program_buffer(const py::bytes& buffer) {
  auto bytes = std::make_shared<const std::string>(buffer);
  std::span<const uint8_t> span(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size());
  Result<compiler::LoadedArtifact> loaded = [&]() -> Result<compiler::LoadedArtifact> {
    py::gil_scoped_release release;
    KILN_ASSIGN_OR_RETURN(compiler::Artifact artifact,
                          compiler::parse_artifact(span, bytes, "<buffer>"));
    return compiler::load_artifact(artifact);
  }();
  return Program(unwrap(std::move(loaded)).executable);
}

std::vector<std::pair<std::string, std::string>> shape_options(
    const std::map<std::string, std::vector<int64_t>>& dims) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, d] : dims) {
    out.emplace_back("input_shape", fmt::format("{}={}", name, fmt::join(d, "x")));
  }
  return out;
}

compiler::ImportOptions import_options(const std::map<std::string, std::vector<int64_t>>& dims,
                                       int64_t default_dim_value) {
  compiler::ImportOptions o;
  o.input_shapes = dims;
  o.default_dim_value = default_dim_value > 0 ? default_dim_value : -1;
  return o;
}

}  // namespace

void bind_compiler(py::module_& m) {
  py::class_<PyShape>(m, "shape", "A tensor type: element type and lens (-1: a dynamic dim).")
      .def(py::init([](const std::string& type, std::vector<int64_t> lens) {
             PyShape s;
             s.dtype = dtype_from_name(type);
             s.lens = std::move(lens);
             s.symbols.resize(s.lens.size());
             return s;
           }),
           "type"_a = "float_type", "lens"_a = std::vector<int64_t>{})
      .def("type", [](const PyShape& s) { return kTypeNames[static_cast<int>(s.dtype)]; })
      .def("type_string", [](const PyShape& s) { return kTypeNames[static_cast<int>(s.dtype)]; })
      .def(
          "dtype", [](const PyShape& s) { return unwrap(numpy_dtype(s.dtype)); },
          "The numpy dtype of the elements.")
      .def("lens", [](const PyShape& s) { return s.lens; })
      .def("strides", &PyShape::strides)
      .def("ndim", [](const PyShape& s) { return s.lens.size(); })
      .def("elements", &PyShape::elements)
      .def("bytes",
           [](const PyShape& s) {
             int64_t n = s.elements();
             return n < 0 ? -1 : n * static_cast<int64_t>(dtype_size(s.dtype));
           })
      .def("type_size", [](const PyShape& s) { return dtype_size(s.dtype); })
      .def("dynamic", &PyShape::dynamic)
      .def("scalar", [](const PyShape& s) { return s.lens.empty(); })
      .def("standard", [](const PyShape&) { return true; })
      .def("packed", [](const PyShape&) { return true; })
      .def("transposed", [](const PyShape&) { return false; })
      .def("broadcasted", [](const PyShape&) { return false; })
      .def("__eq__", [](const PyShape& a,
                        const PyShape& b) { return a.dtype == b.dtype && a.lens == b.lens; })
      .def("__str__", &PyShape::to_string)
      .def("__repr__", [](const PyShape& s) { return "shape(" + s.to_string() + ")"; });

  // No buffer protocol: numpy takes a buffer before `__array__`, and a buffer cannot refuse a type
  // numpy lacks (bf16, the narrow types, strings) without terminating the process; `__array__`
  // gives the same zero-copy view and converts those.
  py::class_<Tensor>(m, "argument",
                     "A tensor; converts to and from numpy without copying (np.asarray(arg)).")
      .def(py::init([](const py::object& array) { return tensor_from_numpy(array, "argument"); }),
           "array"_a)
      .def("get_shape",
           [](const Tensor& t) { return PyShape::of(TensorType(t.dtype(), t.shape())); })
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw_data()); })
      .def("numpy", &tensor_to_numpy, "A numpy array viewing the same memory.")
      .def(
          "__array__",
          [](const Tensor& t, const py::object& dtype) {
            py::object a = tensor_to_numpy(t);
            return dtype.is_none() ? a : a.attr("astype")(dtype);
          },
          "dtype"_a = py::none())
      .def("tolist", [](const Tensor& t) { return tensor_to_numpy(t).attr("tolist")(); })
      .def(
          "__dlpack__", [](const Tensor& t, const py::object&) { return tensor_to_dlpack(t); },
          "stream"_a = py::none())
      .def("__dlpack_device__", [](const Tensor&) { return py::make_tuple(1, 0); })
      .def("__eq__", [](const Tensor& a, const Tensor& b) { return a.equals(b); })
      .def("__repr__", [](const Tensor& t) { return "argument(" + Argument(t).to_string() + ")"; });

  py::class_<compiler::Target, std::shared_ptr<compiler::Target>>(m, "target")
      .def("name", [](const compiler::Target& t) { return std::string(t.name()); })
      .def("__repr__",
           [](const compiler::Target& t) { return fmt::format("target(\"{}\")", t.name()); });

  m.def(
      "get_target",
      [](const std::string& name) {
        return std::shared_ptr<compiler::Target>(unwrap(compiler::make_target(name)));
      },
      "name"_a, "The target called `name` (\"ref\", \"cpu\", \"cuda\" when built).");
  m.def("target_names", &compiler::target_names, "The targets this build has.");
  m.def(
      "get_onnx_operators",
      [] {
        std::vector<std::string> names;
        for (const compiler::SupportedOnnxOp& op : compiler::supported_onnx_ops()) {
          names.push_back(op.domain.empty() ? op.op_type : op.domain + "." + op.op_type);
        }
        std::sort(names.begin(), names.end());
        names.erase(std::unique(names.begin(), names.end()), names.end());
        return names;
      },
      "The ONNX operators the importer accepts (\"domain.Op\" outside the default domain).");

  py::class_<Program>(m, "program")
      .def(py::init<>(), "An empty program to build with get_main_module().")
      .def(
          "get_main_module",
          [](const py::object& self) {
            std::shared_ptr<compiler::Graph> graph = self.cast<const Program&>().editable_graph();
            if (!graph) {
              raise_status(failed_precondition_error(
                  "get_main_module: the program is compiled; build a new kiln.program() to add "
                  "instructions"));
            }
            return main_module(self, std::move(graph));
          },
          "The program's graph, to add parameters, literals and instructions to.")
      .def(
          "compile",
          [](Program& p, const compiler::Target& t, bool offload_copy, bool fast_math,
             bool exhaustive_tune, bool optimize, uint64_t seed, int threads) {
            compiler::CompileOptions options;
            options.optimize = optimize;
            options.seed = seed;
            options.threads = threads;
            p.compile(t, options);
          },
          "t"_a, "offload_copy"_a = true, "fast_math"_a = true, "exhaustive_tune"_a = false,
          "optimize"_a = true, "seed"_a = 0, "threads"_a = 0)
      .def("run", &Program::run, "params"_a)
      .def("run_device", &Program::run_device, "params"_a, "outputs"_a,
           "run() on device memory: params maps input names to DLPack tensors (torch CUDA "
           "tensors), outputs holds one tensor per output, written in place; the caller "
           "synchronizes the producers' streams first.")
      .def("is_compiled", &Program::is_compiled)
      .def("get_parameter_names", &Program::parameter_names)
      .def("get_parameter_shapes", &Program::parameter_shapes)
      .def("get_output_shapes", &Program::output_shapes)
      .def("get_output_names", &Program::output_names)
      .def("target_name", &Program::target)
      .def("opset", &Program::opset)
      .def("print", [](const Program& p) { py::print(p.to_string(), "end"_a = ""); })
      .def("__str__", &Program::to_string);

  m.def(
      "_quantize_float",
      [](Program& p, const std::string& dtype, const std::vector<std::string>& ops) {
        compiler::Graph& g = p.graph_to_quantize("quantize_" + dtype);
        Status status = [&] {
          py::gil_scoped_release release;
          return dtype == "bf16" ? compiler::quantize_bf16(g, ops)
                                 : compiler::quantize_fp16(g, ops);
        }();
        check_ok(status);
      },
      "p"_a, "dtype"_a, "ops"_a);
  m.def(
      "_quantize_int8",
      [](Program& p, const compiler::Target& t, const py::list& calibration,
         const std::vector<std::string>& ops, const std::string& method, double percentile,
         bool progress, const std::vector<std::string>& exclude) {
        compiler::Graph& g = p.graph_to_quantize("quantize_int8");
        std::vector<compiler::CalibrationBatch> batches;
        for (size_t i = 0; i < calibration.size(); ++i) {
          py::handle item = calibration[i];
          if (!py::isinstance<py::dict>(item)) {
            raise_status(invalid_argument_error(fmt::format(
                "quantize_int8: calibration[{}] is not a dict of input name -> array", i)));
          }
          compiler::CalibrationBatch batch;
          for (auto kv : item.cast<py::dict>()) {
            const auto name = py::str(kv.first).cast<std::string>();
            batch.emplace(name, py::isinstance<Tensor>(kv.second)
                                    ? kv.second.cast<Tensor>()
                                    : tensor_from_numpy(kv.second,
                                                        fmt::format("quantize_int8: calibration[{}]"
                                                                    "[\"{}\"]",
                                                                    i, name)));
          }
          batches.push_back(std::move(batch));
        }
        compiler::Int8Options options;
        options.ops = ops;
        options.exclude = exclude;
        options.method = unwrap(compiler::parse_calibration_method(method));
        options.percentile = percentile;
        ProgressBar bar(fmt::format("calibrating ({})", method));
        if (progress) options.progress = bar.callback();
        Result<compiler::Int8Report> report = [&] {
          py::gil_scoped_release release;
          return compiler::quantize_int8(g, t, batches, options);
        }();
        unwrap(std::move(report));
      },
      "p"_a, "t"_a, "calibration"_a, "ops"_a, "method"_a, "percentile"_a, "progress"_a,
      "exclude"_a);

  m.def("save", &save_program, "p"_a, "filename"_a,
        "Writes a compiled program as a .kiln artifact.");
  m.def("load", &load_program, "filename"_a,
        "Reads a .kiln artifact as a compiled program (checked against this machine).");
  m.def("save_buffer", &save_program_buffer, "p"_a, "A compiled program as artifact bytes.");
  m.def("load_buffer", &load_program_buffer, "buffer"_a, "A compiled program from artifact bytes.");
  m.def(
      "parse_onnx",
      [](const std::string& filename, int64_t default_dim_value,
         const std::map<std::string, std::vector<int64_t>>& map_input_dims) {
        compiler::ImportOptions o = import_options(map_input_dims, default_dim_value);
        Result<std::unique_ptr<compiler::Model>> model = [&] {
          py::gil_scoped_release release;
          return compiler::import_onnx_file(filename, o);
        }();
        ProgramSource source{std::filesystem::path(filename).filename().string(), filename, nullptr,
                             shape_options(map_input_dims)};
        return Program(unwrap(std::move(model)), std::move(source));
      },
      "filename"_a, "default_dim_value"_a = 0,
      "map_input_dims"_a = std::map<std::string, std::vector<int64_t>>{});
  m.def(
      "parse_onnx_buffer",
      [](const py::bytes& buffer, int64_t default_dim_value,
         const std::map<std::string, std::vector<int64_t>>& map_input_dims,
         const std::string& external_data_path) {
        compiler::ImportOptions o = import_options(map_input_dims, default_dim_value);
        o.external_data_dir = external_data_path;
        auto bytes = std::make_shared<const std::string>(buffer);
        Result<std::unique_ptr<compiler::Model>> model = [&] {
          py::gil_scoped_release release;
          return compiler::import_onnx_bytes(
              std::span(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()), o);
        }();
        ProgramSource source{"<buffer>", "", bytes, shape_options(map_input_dims)};
        return Program(unwrap(std::move(model)), std::move(source));
      },
      "buffer"_a, "default_dim_value"_a = 0,
      "map_input_dims"_a = std::map<std::string, std::vector<int64_t>>{},
      "external_data_path"_a = "");
  m.def(
      "_compile_onnx",
      [](const std::string& filename, const std::string& target,
         const std::map<std::string, std::vector<int64_t>>& map_input_dims,
         int64_t default_dim_value, bool cache, const std::string& cache_dir, uint64_t seed,
         int threads) {
        compiler::CompileRequest request;
        request.target = target;
        request.import = import_options(map_input_dims, default_dim_value);
        request.options.seed = seed;
        request.options.threads = threads;
        Result<compiler::CompiledModel> compiled = [&]() -> Result<compiler::CompiledModel> {
          py::gil_scoped_release release;
          KILN_ASSIGN_OR_RETURN(compiler::ModelSource model,
                                compiler::ModelSource::from_file(filename));
          compiler::CompileCache compile_cache(cache_dir, cache);
          return compile_cache.get(model, request);
        }();
        ProgramSource source{std::filesystem::path(filename).filename().string(), filename, nullptr,
                             shape_options(map_input_dims)};
        return Program(unwrap(std::move(compiled)).executable, std::move(source), request.options);
      },
      "filename"_a, "target"_a, "map_input_dims"_a, "default_dim_value"_a, "cache"_a, "cache_dir"_a,
      "seed"_a, "threads"_a);
}

}  // namespace kiln::python
