// SPDX-License-Identifier: Apache-2.0
// Conversions between the KServe v2 gRPC messages and server/core's types, both ways (the server
// and GrpcClient share them), and between kiln's Status and grpc::Status.
#pragma once

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

#include <cstdint>

#include "core/status.h"
#include "grpc_predict_v2.pb.h"
#include "server/core/types.h"

namespace kiln::server::grpc {

struct GrpcLimits {
  // The most elements one tensor may hold (more is resource exhausted).
  int64_t max_elements = int64_t{1} << 28;
  // The most tensors one request may carry.
  int64_t max_tensors = 1024;
};

// kiln's codes are gRPC's codes; the message is kept.
::grpc::Status to_grpc_status(const Status& status);
Status from_grpc_status(const ::grpc::Status& status);

// A protocol parameter and back (uint64 values above INT64_MAX are an invalid argument).
Result<ParameterValue> from_infer_parameter(const inference::InferParameter& p,
                                            std::string_view where);
void to_infer_parameter(const ParameterValue& value, inference::InferParameter* p);

// The request as the core takes it: every input from raw_input_contents (all inputs or none) or
// from its typed contents, checked against its datatype and shape; every error names the tensor.
// `raw_outputs` is set from the "binary_data_output" request parameter and each output's
// "binary_data" parameter (default: raw, as Triton answers), which are removed from the request.
// Large raw input contents are moved out of `message` into the tensors, not copied.
struct OutputChoice {
  bool raw_by_default = true;
  std::map<std::string, bool, std::less<>> raw;  // per requested output
  bool is_raw(std::string_view name) const;
};
Result<InferenceRequest> decode_request(inference::ModelInferRequest& message,
                                        const GrpcLimits& limits, OutputChoice* choice);
// Writes every output raw (raw_output_contents) or typed per `choice`; FP16 and BF16 are always
// raw since the protocol has no typed field for them.
void encode_response(const InferenceResponse& response, const OutputChoice& choice,
                     inference::ModelInferResponse* message);

// The client side: inputs raw (raw_input_contents) or typed, outputs asked raw or typed.
void encode_request(const InferenceRequest& request, bool raw_inputs, bool raw_outputs,
                    inference::ModelInferRequest* message);
// The same request as the bytes of a ModelInferRequest, for a call that sends bytes: raw input
// contents are not copied; the buffer's slices share the tensors' storage until gRPC has sent it.
::grpc::ByteBuffer encode_request_bytes(const InferenceRequest& request, bool raw_inputs,
                                        bool raw_outputs);
Result<InferenceResponse> decode_response(inference::ModelInferResponse& message,
                                          const GrpcLimits& limits = {});

}  // namespace kiln::server::grpc
