// SPDX-License-Identifier: Apache-2.0
// Prometheus text exposition of the per-model statistics: counts, failures by reason, queue and
// compute time histograms, batch sizes and pending requests; and Triton's names for the counts.
#include <fmt/format.h>

#include "server/http/router.h"

namespace kiln::server::http {

namespace {

// Prometheus label values escape backslash, double quote and newline.
std::string escape_label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string labels(const ModelStatistics& s) {
  return fmt::format("model=\"{}\",version=\"{}\"", escape_label(s.name), escape_label(s.version));
}

void family(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void histogram(std::string& out, std::string_view name, const ModelStatistics& s,
               const Histogram& h) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cumulative += h.counts[i];
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels(s), h.bounds[i], cumulative);
  }
  cumulative += h.counts.back();
  out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", name, labels(s), cumulative);
  out += fmt::format("{}_sum{{{}}} {}\n{}_count{{{}}} {}\n", name, labels(s), h.sum, name,
                     labels(s), h.count);
}

// Triton's series (nv_inference_*) for the same counts, so dashboards and alerts written for Triton
// work unchanged. Only those kiln measures with Triton's meaning: Triton sums its compute
// input/infer/output times per request, kiln times whole batches (its compute histogram).
void triton_metrics(std::string& out, const std::vector<ModelStatistics>& stats) {
  auto series = [&](std::string_view name, std::string_view type, std::string_view help,
                    auto value) {
    family(out, name, type, help);
    for (const auto& s : stats) out += fmt::format("{}{{{}}} {}\n", name, labels(s), value(s));
  };
  using S = const ModelStatistics&;
  series("nv_inference_request_success", "counter",
         "Number of successful inference requests, all batch sizes",
         [](S s) { return s.success.count; });
  series("nv_inference_request_failure", "counter",
         "Number of failed inference requests, all batch sizes", [](S s) { return s.fail.count; });
  series("nv_inference_count", "counter", "Number of inferences performed (a batch of n counts n)",
         [](S s) { return s.inference_count; });
  series("nv_inference_exec_count", "counter", "Number of model executions performed",
         [](S s) { return s.execution_count; });
  series("nv_inference_request_duration_us", "counter",
         "Cumulative inference request duration in microseconds (successful requests)",
         [](S s) { return s.success.ns / 1000; });
  series("nv_inference_queue_duration_us", "counter",
         "Cumulative inference queuing duration in microseconds (successful requests)",
         [](S s) { return s.queue.ns / 1000; });
  series("nv_inference_pending_request_count", "gauge",
         "Instantaneous number of pending requests awaiting execution per-model",
         [](S s) { return s.pending; });
}

// What the tracer sampled and what became of the spans (only when traces are exported).
void trace_metrics(std::string& out, const TraceCounters& c) {
  family(out, "kiln_trace_sampled", "counter", "Inference requests traced (sampled).");
  out += fmt::format("kiln_trace_sampled {}\n", c.sampled);
  family(out, "kiln_trace_spans_exported", "counter", "Spans the OTLP collector accepted.");
  out += fmt::format("kiln_trace_spans_exported {}\n", c.sink.exported);
  family(out, "kiln_trace_spans_dropped", "counter",
         "Spans dropped: the export queue was full, or the export failed after its retries.");
  out += fmt::format("kiln_trace_spans_dropped{{reason=\"queue_full\"}} {}\n", c.sink.dropped_full);
  out += fmt::format("kiln_trace_spans_dropped{{reason=\"export_failed\"}} {}\n",
                     c.sink.dropped_failed);
  family(out, "kiln_trace_export_failures", "counter",
         "OTLP export requests that failed (every retry counts).");
  out += fmt::format("kiln_trace_export_failures {}\n", c.sink.failed_requests);
}

}  // namespace

std::string gpu_metrics(const std::vector<GpuSample>& gpus) {
  std::string out;
  auto series = [&](std::string_view name, std::string_view help, auto value) {
    bool any = false;
    for (const GpuSample& g : gpus) any = any || value(g).has_value();
    if (!any) return;
    family(out, name, "gauge", help);
    for (const GpuSample& g : gpus) {
      if (auto v = value(g)) {
        out += fmt::format("{}{{gpu_uuid=\"{}\"}} {}\n", name, escape_label(g.uuid), *v);
      }
    }
  };
  using G = const GpuSample&;
  series("nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)",
         [](G g) { return g.utilization; });
  series("nv_gpu_memory_total_bytes", "GPU total memory, in bytes",
         [](G g) { return g.memory_total_bytes; });
  series("nv_gpu_memory_used_bytes", "GPU used memory, in bytes",
         [](G g) { return g.memory_used_bytes; });
  series("nv_gpu_power_usage", "GPU power usage in watts", [](G g) { return g.power_watts; });
  return out;
}

std::string prometheus_metrics(const Server& server, const GpuReader* gpus) {
  std::vector<ModelStatistics> stats = server.statistics().value_or(std::vector<ModelStatistics>{});
  std::string out;
  family(out, "kiln_inference_request_success", "counter", "Successful inference requests.");
  for (const auto& s : stats) {
    out += fmt::format("kiln_inference_request_success{{{}}} {}\n", labels(s), s.success.count);
  }
  family(out, "kiln_inference_request_failure", "counter", "Failed inference requests, by reason.");
  for (const auto& s : stats) {
    for (int i = 0; i < kNumFailureReasons; ++i) {
      out += fmt::format("kiln_inference_request_failure{{{},reason=\"{}\"}} {}\n", labels(s),
                         failure_reason_name(static_cast<FailureReason>(i)), s.failures[i]);
    }
  }
  family(out, "kiln_inference_count", "counter",
         "Inferences run (a request with a batch of n counts n).");
  for (const auto& s : stats) {
    out += fmt::format("kiln_inference_count{{{}}} {}\n", labels(s), s.inference_count);
  }
  family(out, "kiln_inference_exec_count", "counter", "Backend executions (batches).");
  for (const auto& s : stats) {
    out += fmt::format("kiln_inference_exec_count{{{}}} {}\n", labels(s), s.execution_count);
  }
  family(out, "kiln_inference_pending_request_count", "gauge", "Requests waiting in the queue.");
  for (const auto& s : stats) {
    out += fmt::format("kiln_inference_pending_request_count{{{}}} {}\n", labels(s), s.pending);
  }
  family(out, "kiln_inference_queue_duration_us", "histogram",
         "Time requests waited in the queue, in microseconds.");
  for (const auto& s : stats) histogram(out, "kiln_inference_queue_duration_us", s, s.queue_us);
  family(out, "kiln_inference_compute_duration_us", "histogram",
         "Time each batch ran in the backend, in microseconds.");
  for (const auto& s : stats) {
    histogram(out, "kiln_inference_compute_duration_us", s, s.compute_us);
  }
  family(out, "kiln_inference_batch_size", "histogram", "Batch sizes executed.");
  for (const auto& s : stats) histogram(out, "kiln_inference_batch_size", s, s.batch_size);
  triton_metrics(out, stats);
  if (server.tracer().has_sink()) trace_metrics(out, server.tracer().counters());
  if (gpus != nullptr) out += gpu_metrics(gpus->read());
  return out;
}

}  // namespace kiln::server::http
