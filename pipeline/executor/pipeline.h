// SPDX-License-Identifier: Apache-2.0
// Pipeline: runs a reader and per-sample operators on worker threads into prefetched batches.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "pipeline/executor/prefetch_queue.h"
#include "pipeline/kernels/buffer.h"
#include "pipeline/kernels/gpu_images.h"
#include "pipeline/operators/operator.h"
#include "pipeline/readers/coco.h"
#include "pipeline/readers/file_reader.h"

namespace kiln::pipeline {

// What happens to a sample whose file cannot be read or decoded (or that an operator rejects).
enum class BadDataPolicy {
  kSkip,   // logged (path + reason), recorded in bad_samples(), replaced by the next sample
  kError,  // run() returns the error
};

// One operator instance of a pipeline and how it is wired.
struct OpSpec {
  std::string op;  // schema name: "decoders.image"
  ArgMap args;
  std::vector<std::string> inputs;   // tensors produced by earlier operators, one per schema input
  std::vector<std::string> outputs;  // names for the schema outputs; empty: the schema's names
  // Per-sample arguments fed from a tensor (a scalar per sample), e.g. {"mirror", "coin"}.
  std::map<std::string, std::string> arg_inputs;
  // device "gpu": the operator runs on the GPU over whole batches (Operator::supports_gpu());
  // what it makes stays there for later GPU operators.
  bool gpu = false;
};

struct PipelineOptions {
  int64_t batch_size = 1;
  int num_threads = 1;  // decode/augment workers (0: default_thread_count())
  int64_t prefetch_queue_depth = 2;
  uint64_t seed = 0;
  BadDataPolicy bad_data = BadDataPolicy::kSkip;
  std::vector<std::string> outputs;  // the tensors each batch returns, in this order
  // Outputs made on the GPU stay there (TensorList::gpu) instead of being copied to host tensors.
  bool gpu_outputs_on_device = false;
};

// One output of a batch. When every sample has the same shape and dtype, `dense` holds them
// contiguously as [N, sample shape...] and `samples` are views into it; otherwise (ragged) dense
// is undefined and each sample owns its data.
//
// An output made on the GPU is copied into `samples`/`dense` the same way, unless the pipeline
// keeps GPU outputs on the device: then `gpu` holds the batch in GPU memory and the rest is empty.
struct TensorList {
  std::vector<Tensor> samples;
  Tensor dense;
  kernels::GpuImages gpu;

  bool on_gpu() const { return gpu.data != nullptr; }
  // This list with its GPU batch copied into host tensors (dense when the shapes agree); a list
  // already on the host as it is.
  Result<TensorList> to_host() const;
};

struct Batch {
  int64_t epoch = 0;
  std::vector<TensorList> outputs;  // in PipelineOptions::outputs order
  std::vector<std::string> paths;   // the source file of each sample
  int64_t num_padded = 0;           // samples that repeat others to fill the batch
  ReaderPosition position;          // the reader's position just after this batch
};

struct BadSample {
  int64_t epoch = 0;
  std::string path;
  std::string reason;
};

struct StageTiming {
  std::string stage;  // "read", "decoders.image#1", ..., "batch"
  int64_t calls = 0;
  double seconds = 0.0;  // summed over threads
};

// Results depend only on (seed, epoch, sample position): identical across runs and thread counts.
// run(), reset() and epoch() belong to one consumer thread; bad_samples() and stage_timings() may
// be called from any thread.
//
// The reader is readers.file, readers.tfrecord or readers.coco (the pipeline prefetches batches
// from its files) or
// readers.external_source (the caller feed()s encoded images; run() then processes up to
// batch_size of them on the workers and returns them as one batch, in feeding order).
class Pipeline {
 public:
  // Validates the wiring (the first operator must be a reader and the only one; inputs must name
  // earlier outputs; per-sample argument names must exist) and starts prefetching epoch 0.
  static Result<std::unique_ptr<Pipeline>> create(const PipelineOptions& options,
                                                  std::vector<OpSpec> ops);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // The next batch of the current epoch; nullopt once the epoch is exhausted (then reset()).
  // With BadDataPolicy::kError a bad sample's error is returned, and again on every later call
  // until reset().
  Result<std::optional<Batch>> run();
  // Starts the next epoch, dropping what is left of the current one.
  void reset();
  int64_t epoch() const { return epoch_; }

  // external_source only: queues encoded images (1-D uint8 tensors) with their labels (empty: 0;
  // else one per image) and names for messages (empty: "external #<n>"). Errors when the pipeline
  // reads files, or on mismatched sizes.
  Status feed(std::vector<Tensor> encoded, std::vector<int32_t> labels = {},
              std::vector<std::string> names = {});
  // Images fed and not yet returned by run().
  int64_t pending() const { return static_cast<int64_t>(fed_.size()); }

  // A checkpoint: the reader position after the last batch run() returned (the start of the
  // epoch before any). Prefetched batches past it are not part of it.
  ReaderPosition checkpoint() const { return consumed_; }
  // Drops prefetched work and resumes from `position` (a checkpoint() of a pipeline built from the
  // same options and operators): the following batches equal those the checkpointed pipeline
  // would have returned next.
  Status restore(const ReaderPosition& position);

  std::vector<BadSample> bad_samples() const;
  std::vector<StageTiming> stage_timings() const;

 private:
  struct Node {
    std::unique_ptr<Operator> op;
    std::vector<int> inputs;   // slots
    std::vector<int> outputs;  // slots
    std::vector<std::pair<std::string, int>> arg_slots;
    bool gpu = false;
  };
  // What the workers make of one sample: the requested outputs (undefined where made on the
  // GPU), then the host tensors GPU operators take (gpu_input_slots_ order), and each GPU
  // operator's plan for this sample (gpu_nodes_ order).
  struct Sample {
    std::vector<Tensor> tensors;
    std::vector<kernels::GpuStep> steps;
  };
  struct Counter {
    std::atomic<int64_t> calls{0};
    std::atomic<int64_t> nanos{0};
  };
  struct EndOfEpoch {};
  using Item = std::variant<Batch, Status, EndOfEpoch>;
  // A batch whose CPU work is done, handed from the producer to the GPU stage thread.
  struct Sample;
  struct Pending {
    int64_t epoch = 0;
    std::vector<Sample> samples;
    std::vector<std::string> paths;
    int64_t num_padded = 0;
    ReaderPosition position;
  };
  // In producer order (`seq`), which the stage threads keep when they hand batches on.
  struct GpuItem {
    int64_t seq = 0;
    std::variant<Pending, Status, EndOfEpoch> what;
  };

  // One sample to process: its encoded bytes (undefined: read them from `path`), label, name and
  // position in the epoch (seeds derive from it).
  struct SampleInput {
    Tensor encoded;
    int32_t label = 0;
    std::string path;
    int64_t position = 0;
    std::string file;     // the file to read when it differs from `path` (a TFRecord file) ...
    int64_t offset = -1;  // ... and the record at this offset ...
    int64_t size = 0;     // ... of this many bytes
    int64_t entry = -1;   // the reader's entry (indexes coco_images_)
  };
  // Reads a sample's encoded bytes and the reader's other outputs (label, or COCO boxes, labels
  // and image id) from its file or TFRecord record into their slots.
  Status read_sample(const SampleInput& sample, std::vector<Tensor>* slots) const;

  Pipeline(const PipelineOptions& options, std::optional<FileReader> reader);
  SampleInput file_sample(const SampleRef& ref) const;
  Result<std::optional<Batch>> run_external();
  void start();
  void stop();
  void produce(int64_t epoch);
  // With GPU operators, kGpuStages threads (a stream each) run batches' GPU work while the
  // workers prepare the next ones; batches leave in order.
  void run_gpu_stage(kernels::GpuStream& stream);
  // Runs every CPU operator on one sample and plans the GPU ones; or why it failed.
  Result<Sample> process(const SampleInput& sample, int64_t epoch);
  std::vector<Result<Sample>> process_all(const std::vector<SampleInput>& samples, int64_t epoch);
  // The batch of these samples: CPU outputs stacked, GPU operators run. Errors only from the GPU.
  Result<Batch> assemble(kernels::GpuStream* stream, int64_t epoch, std::vector<Sample> samples,
                         std::vector<std::string> paths, int64_t num_padded);
  // Runs the GPU operators over the batch; the GPU outputs by output index.
  Result<std::map<size_t, kernels::GpuImages>> run_gpu(kernels::GpuStream& stream,
                                                       const std::vector<Sample>& samples);

  PipelineOptions options_;
  std::optional<FileReader> reader_;  // none for external_source
  std::string tfrecord_encoded_key_;
  std::string tfrecord_label_key_;
  std::deque<SampleInput> fed_;
  int64_t fed_count_ = 0;
  std::vector<Node> nodes_;  // nodes_[0] is the reader
  LastBatchPolicy last_batch_policy_ = LastBatchPolicy::kPartial;
  std::vector<CocoImage> coco_images_;  // readers.coco: the annotations, per reader entry
  int num_slots_ = 0;
  std::vector<int> output_slots_;
  std::vector<bool> slot_on_gpu_;                         // made by a GPU operator
  std::vector<int> gpu_input_slots_;                      // host slots GPU operators read
  std::vector<size_t> gpu_nodes_;                         // indices into nodes_
  std::vector<std::unique_ptr<kernels::GpuStream>> gpu_;  // empty without GPU operators
  std::vector<std::string> stage_names_;
  std::unique_ptr<Counter[]> counters_;  // per stage_names_

  ThreadPool pool_;
  // Dense batch storage, reused once the consumer drops a batch: (depth + 2 batches in flight) x
  // up to a few outputs each.
  std::shared_ptr<kernels::BufferPool> buffers_;
  detail::PrefetchQueue<Item> queue_;
  detail::PrefetchQueue<GpuItem> gpu_queue_{1};
  std::thread producer_;
  std::vector<std::thread> gpu_stages_;
  int64_t gpu_seq_ = 0;  // the producer's next GpuItem
  std::mutex turn_mutex_;
  std::condition_variable turn_;
  int64_t next_out_ = 0;  // the GpuItem whose turn it is to leave
  std::atomic<bool> stopping_{false};
  int64_t epoch_ = 0;
  ReaderPosition consumed_;
  bool epoch_done_ = false;
  std::optional<Status> failed_;

  mutable std::mutex bad_mutex_;
  std::vector<BadSample> bad_samples_;
};

}  // namespace kiln::pipeline
