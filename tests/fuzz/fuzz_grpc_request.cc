// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the gRPC inference request conversion on arbitrary bytes (parsed as a
// ModelInferRequest, as the server does from the wire) must return a Status, never crash.
#include <cstddef>
#include <cstdint>

#include "grpc_predict_v2.pb.h"
#include "server/grpc/grpc_convert.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inference::ModelInferRequest message;
  if (!message.ParseFromArray(data, static_cast<int>(size))) return 0;
  kiln::server::grpc::OutputChoice choice;
  auto request = kiln::server::grpc::decode_request(message, {int64_t{1} << 20, 64}, &choice);
  (void)request;
  return 0;
}
