// SPDX-License-Identifier: Apache-2.0
// The pipeline executor for kiln.pipeline: operator schemas, a built pipeline, and TensorList.
#include "pipeline/executor/pipeline.h"

#include <fmt/format.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/operators/readers_file.h"
#include "python/src/bindings.h"

namespace kiln::python {
namespace {

using namespace pybind11::literals;
using pipeline::ArgMap;
using pipeline::ArgSpec;
using pipeline::ArgType;
using pipeline::ArgValue;
using pipeline::OperatorSchema;

py::object arg_value_to_python(const ArgValue& value) {
  return std::visit([](const auto& v) -> py::object { return py::cast(v); }, value);
}

// A Python value as a schema argument value; `what` names the operator argument in errors.
ArgValue arg_value_from_python(const py::handle& value, const std::string& what) {
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>();
  if (py::isinstance<py::int_>(value)) return value.cast<int64_t>();
  if (py::isinstance<py::float_>(value)) return value.cast<double>();
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  // numpy scalars
  if (py::hasattr(value, "dtype") && py::hasattr(value, "item") &&
      py::len(value.attr("shape")) == 0) {
    return arg_value_from_python(value.attr("item")(), what);
  }
  if (py::isinstance<py::sequence>(value)) {
    std::vector<int64_t> ints;
    std::vector<double> floats;
    bool all_int = true;
    for (py::handle item : value) {
      py::object v = py::hasattr(item, "item") ? item.attr("item")()
                                               : py::reinterpret_borrow<py::object>(item);
      if (py::isinstance<py::int_>(v) && !py::isinstance<py::bool_>(v)) {
        ints.push_back(v.cast<int64_t>());
        floats.push_back(static_cast<double>(ints.back()));
      } else if (py::isinstance<py::float_>(v) || py::isinstance<py::bool_>(v)) {
        all_int = false;
        floats.push_back(v.cast<double>());
      } else {
        raise_status(invalid_argument_error(
            fmt::format("{}: expected a list of numbers, found an element of type {}", what,
                        py::str(py::type::of(v).attr("__name__")).cast<std::string>())));
      }
    }
    if (all_int) return ints;
    return floats;
  }
  raise_status(invalid_argument_error(
      fmt::format("{}: expected a number, a string or a list of numbers, found {}", what,
                  py::str(py::type::of(value).attr("__name__")).cast<std::string>())));
}

ArgMap arg_map_from_python(const py::dict& args, const std::string& op) {
  ArgMap out;
  for (auto item : args) {
    std::string name = py::str(item.first);
    out.emplace(name, arg_value_from_python(item.second,
                                            fmt::format("operator {}: argument {}", op, name)));
  }
  return out;
}

py::dict schema_to_python(const OperatorSchema& s) {
  py::list args;
  for (const ArgSpec& a : s.args) {
    args.append(
        py::dict("name"_a = a.name, "type"_a = std::string(pipeline::arg_type_name(a.type)),
                 "default"_a = a.default_value ? arg_value_to_python(*a.default_value) : py::none(),
                 "required"_a = !a.default_value.has_value(), "doc"_a = a.doc,
                 "per_sample"_a = a.per_sample));
  }
  return py::dict("name"_a = s.name, "doc"_a = s.doc, "inputs"_a = s.inputs,
                  "outputs"_a = s.outputs, "args"_a = args);
}

// The executor behind kiln.pipeline.Pipeline: created by build(), one consumer thread.
class PipelineCore {
 public:
  PipelineCore(int64_t batch_size, int num_threads, int64_t prefetch_queue_depth, uint64_t seed,
               const std::string& bad_data, std::vector<std::string> outputs, const py::list& ops,
               bool gpu_outputs_on_device) {
    pipeline::PipelineOptions options;
    options.gpu_outputs_on_device = gpu_outputs_on_device;
    options.batch_size = batch_size;
    options.num_threads = num_threads;
    options.prefetch_queue_depth = prefetch_queue_depth;
    options.seed = seed;
    if (bad_data == "skip") {
      options.bad_data = pipeline::BadDataPolicy::kSkip;
    } else if (bad_data == "error") {
      options.bad_data = pipeline::BadDataPolicy::kError;
    } else {
      raise_status(invalid_argument_error(
          fmt::format("pipeline: bad_data \"{}\": expected skip or error", bad_data)));
    }
    options.outputs = std::move(outputs);
    std::vector<pipeline::OpSpec> specs;
    for (py::handle h : ops) {
      auto d = h.cast<py::dict>();
      pipeline::OpSpec spec;
      spec.op = d["op"].cast<std::string>();
      spec.args = arg_map_from_python(d["args"].cast<py::dict>(), spec.op);
      spec.inputs = d["inputs"].cast<std::vector<std::string>>();
      spec.outputs = d["outputs"].cast<std::vector<std::string>>();
      spec.arg_inputs = d["arg_inputs"].cast<std::map<std::string, std::string>>();
      spec.gpu = d.contains("gpu") && d["gpu"].cast<bool>();
      specs.push_back(std::move(spec));
    }
    Result<std::unique_ptr<pipeline::Pipeline>> p = [&] {
      py::gil_scoped_release release;
      return pipeline::Pipeline::create(options, std::move(specs));
    }();
    pipeline_ = unwrap(std::move(p));
  }

  // (outputs, paths, num_padded, epoch), or None at the end of the epoch.
  py::object run() {
    Result<std::optional<pipeline::Batch>> batch = [&] {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(consumer_);
      return pipeline_->run();
    }();
    std::optional<pipeline::Batch> b = unwrap(std::move(batch));
    if (!b) return py::none();
    py::list outputs;
    for (pipeline::TensorList& list : b->outputs) {
      outputs.append(py::cast(std::make_shared<pipeline::TensorList>(std::move(list))));
    }
    return py::make_tuple(outputs, b->paths, b->num_padded, b->epoch);
  }

  void reset() {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(consumer_);
    pipeline_->reset();
  }
  int64_t epoch() {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(consumer_);
    return pipeline_->epoch();
  }

  py::list bad_samples() const {
    py::list out;
    for (const pipeline::BadSample& s : pipeline_->bad_samples()) {
      out.append(py::dict("epoch"_a = s.epoch, "path"_a = s.path, "reason"_a = s.reason));
    }
    return out;
  }
  py::list stage_timings() const {
    py::list out;
    for (const pipeline::StageTiming& t : pipeline_->stage_timings()) {
      out.append(py::dict("stage"_a = t.stage, "calls"_a = t.calls, "seconds"_a = t.seconds));
    }
    return out;
  }

 private:
  std::unique_ptr<pipeline::Pipeline> pipeline_;
  // The executor's run(), reset() and epoch() belong to one consumer; Python threads take turns.
  std::mutex consumer_;
};

// The number of samples readers.file with `args` yields per epoch on its shard.
int64_t reader_shard_size(const py::dict& args, uint64_t seed) {
  const OperatorSchema* schema = pipeline::find_operator_schema("readers.file");
  KILN_CHECK(schema != nullptr, "readers.file is not registered");
  pipeline::OpArgs validated =
      unwrap(pipeline::validate_args(*schema, arg_map_from_python(args, "readers.file")));
  pipeline::FileReaderOptions options = unwrap(pipeline::file_reader_options(validated, seed));
  Result<pipeline::FileReader> reader = [&] {
    py::gil_scoped_release release;
    return pipeline::FileReader::open(options);
  }();
  return unwrap(std::move(reader)).shard_size();
}

// What host-only accessors say of a batch kept in GPU memory.
void check_on_host(const pipeline::TensorList& list, std::string_view what) {
  if (list.on_gpu()) {
    raise_status(failed_precondition_error(fmt::format(
        "TensorList: {}: the batch is in GPU memory (output_memory_type DEVICE_MEMORY); take it "
        "as a CUDA tensor with torch.from_dlpack(tensor_list), or copy it to the host with "
        "as_cpu()",
        what)));
  }
}

// The dense GPU batch as a CUDA DLPack capsule: [N, sample shape...], the samples `offsets`
// apart (each aligned), released after `stream`'s work when the consumer is done.
py::capsule gpu_to_dlpack(const pipeline::TensorList& list, const py::object& stream) {
  const pipeline::kernels::GpuImages& images = list.gpu;
  const std::optional<Shape> uniform = images.uniform_shape();
  if (!uniform) {
    raise_status(failed_precondition_error(
        "TensorList: ragged samples cannot be one DLPack tensor; resize them to one size on the "
        "GPU, or copy them to the host with as_cpu() and take them with at(i)"));
  }
  std::vector<int64_t> shape{static_cast<int64_t>(images.size())};
  shape.insert(shape.end(), uniform->begin(), uniform->end());
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size() - 1; i-- > 1;) strides[i] = strides[i + 1] * shape[i + 1];
  const auto element = static_cast<int64_t>(dtype_size(images.dtype));
  strides[0] =
      images.size() > 1 ? (images.offsets[1] - images.offsets[0]) / element : uniform->numel();
  // DLPack's stream argument: None or 1 the legacy default stream, 2 the per-thread one, -1 no
  // order asked (then the legacy default orders the release), else a cudaStream_t.
  const int64_t given = stream.is_none() ? 0 : stream.cast<int64_t>();
  const auto consumer = static_cast<uintptr_t>(std::max<int64_t>(given, 0));
  auto owner = std::make_shared<pipeline::kernels::GpuImages>(images);
  return make_dlpack_capsule(images.data.get(), kDLPackCuda, images.device, images.dtype,
                             std::move(shape), std::move(strides), owner, [owner, consumer] {
                               // The consumer read it on `consumer`: the buffer's free waits.
                               pipeline::kernels::release_after(*owner, consumer).ignore_error();
                             });
}

const Tensor& sample_at(const pipeline::TensorList& list, int64_t i) {
  check_on_host(list, "at(i)");
  const auto n = static_cast<int64_t>(list.samples.size());
  if (i < 0) i += n;
  if (i < 0 || i >= n) {
    throw py::index_error(
        fmt::format("TensorList: sample {} is out of range; the batch has {}", i, n));
  }
  return list.samples[static_cast<size_t>(i)];
}

}  // namespace

void bind_pipeline(py::module_& m) {
  m.def(
      "operator_schemas",
      [] {
        py::list out;
        for (const OperatorSchema* s : pipeline::operator_schemas()) {
          out.append(schema_to_python(*s));
        }
        return out;
      },
      "Every pipeline operator's schema, as dicts, in operator_list.inc order.");
  m.def("reader_shard_size", &reader_shard_size, "args"_a, "seed"_a = 0,
        "The samples per epoch of readers.file with these arguments, on its shard.");

  py::class_<pipeline::TensorList, std::shared_ptr<pipeline::TensorList>>(
      m, "TensorList", "One output of a batch: a sample per batch entry.")
      .def("__len__",
           [](const pipeline::TensorList& l) {
             return l.on_gpu() ? l.gpu.size() : l.samples.size();
           })
      .def(
          "is_dense_tensor",
          [](const pipeline::TensorList& l) {
            return l.on_gpu() ? l.gpu.uniform_shape().has_value() : l.dense.defined();
          },
          "True when every sample has the same shape (as_array() or DLPack works).")
      .def_property_readonly(
          "device", [](const pipeline::TensorList& l) { return l.on_gpu() ? "gpu" : "cpu"; },
          "\"gpu\" for a batch kept in GPU memory (output_memory_type DEVICE_MEMORY), else "
          "\"cpu\".")
      .def(
          "as_array",
          [](const pipeline::TensorList& l) {
            check_on_host(l, "as_array()");
            if (!l.dense.defined()) {
              raise_status(failed_precondition_error(
                  "TensorList: the samples have different shapes, so they do not form one array; "
                  "take them one by one with at(i), or resize them to one size"));
            }
            return tensor_to_numpy(l.dense);
          },
          "The batch as one [N, ...] numpy array viewing kiln's memory (no copy).")
      .def(
          "as_tensor",
          [](const pipeline::TensorList& l) {
            check_on_host(l, "as_tensor()");
            if (!l.dense.defined()) {
              raise_status(failed_precondition_error(
                  "TensorList: the samples have different shapes, so they do not form one tensor; "
                  "take them one by one with at(i)"));
            }
            return tensor_to_numpy(l.dense);
          },
          "DALI's name for as_array().")
      .def(
          "as_cpu",
          [](const std::shared_ptr<pipeline::TensorList>& l) {
            if (!l->on_gpu()) return l;
            Result<pipeline::TensorList> host = [&] {
              py::gil_scoped_release release;
              return l->to_host();
            }();
            return std::make_shared<pipeline::TensorList>(unwrap(std::move(host)));
          },
          "DALI's copy to the host: a batch in GPU memory copied into host memory; a batch "
          "already there, the same TensorList.")
      .def(
          "at",
          [](const pipeline::TensorList& l, int64_t i) { return tensor_to_numpy(sample_at(l, i)); },
          "i"_a, "Sample i as a numpy array (no copy).")
      .def("__getitem__", [](const pipeline::TensorList& l,
                             int64_t i) { return tensor_to_numpy(sample_at(l, i)); })
      .def(
          "shape",
          [](const pipeline::TensorList& l) {
            py::list out;
            if (l.on_gpu()) {
              for (const Shape& s : l.gpu.shapes) out.append(py::tuple(py::cast(s.dims())));
            }
            for (const Tensor& t : l.samples) out.append(py::tuple(py::cast(t.shape().dims())));
            return out;
          },
          "The shape of every sample.")
      .def("dtype",
           [](const pipeline::TensorList& l) {
             if (l.on_gpu()) return py::object(unwrap(numpy_dtype(l.gpu.dtype)));
             return l.samples.empty() ? py::object(py::none())
                                      : py::object(unwrap(numpy_dtype(l.samples[0].dtype())));
           })
      .def(
          "__dlpack__",
          [](const pipeline::TensorList& l, const py::object& stream) {
            if (l.on_gpu()) return gpu_to_dlpack(l, stream);
            if (!l.dense.defined()) {
              raise_status(failed_precondition_error(
                  "TensorList: ragged samples cannot be one DLPack tensor; use at(i)"));
            }
            return tensor_to_dlpack(l.dense);
          },
          "stream"_a = py::none())
      .def("__dlpack_device__", [](const pipeline::TensorList& l) {
        const int type = l.on_gpu() ? kDLPackCuda : 1;  // DLPack's kDLCUDA or kDLCPU
        return py::tuple(py::make_tuple(type, l.on_gpu() ? l.gpu.device : 0));
      });

  py::class_<PipelineCore>(m, "PipelineCore")
      .def(py::init<int64_t, int, int64_t, uint64_t, const std::string&, std::vector<std::string>,
                    const py::list&, bool>(),
           "batch_size"_a, "num_threads"_a, "prefetch_queue_depth"_a, "seed"_a, "bad_data"_a,
           "outputs"_a, "ops"_a, "gpu_outputs_on_device"_a = false)
      .def("run", &PipelineCore::run)
      .def("reset", &PipelineCore::reset)
      .def("epoch", &PipelineCore::epoch)
      .def("bad_samples", &PipelineCore::bad_samples)
      .def("stage_timings", &PipelineCore::stage_timings);
}

}  // namespace kiln::python
