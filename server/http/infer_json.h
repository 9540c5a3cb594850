// SPDX-License-Identifier: Apache-2.0
// The KServe v2 REST body formats: inference requests and responses as JSON, with the binary
// tensor data extension (`Inference-Header-Content-Length`), both ways (server and client use it).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "server/core/server.h"
#include "server/core/types.h"
#include "server/http/metadata_json.h"

namespace kiln::server::http {

struct DecodeLimits {
  // The most elements one tensor may hold.
  int64_t max_elements = int64_t{1} << 28;
  // The most tensors one request may carry.
  int64_t max_tensors = 1024;
};

// How the response's outputs are written: raw bytes after the JSON (binary) or JSON arrays.
struct OutputEncoding {
  bool binary_by_default = false;                   // request parameter "binary_data_output"
  bool default_given = false;                       // the request set "binary_data_output"
  std::map<std::string, bool, std::less<>> binary;  // output parameter "binary_data"
  bool is_binary(std::string_view name) const;
  // The client asked for this output as JSON ("binary_data": false, or "binary_data_output":
  // false and nothing for the output).
  bool json_requested(std::string_view name) const;
};

// A body ready to send: `json_size` is the Inference-Header-Content-Length value when binary
// data follows the JSON (nullopt for a plain JSON body).
struct EncodedBody {
  std::string body;
  std::optional<size_t> json_size;
};

// Parses an infer request body. `json_size` is the Inference-Header-Content-Length header (nullopt
// when absent: the whole body is JSON). Every error is an invalid argument (or resource exhausted
// for a tensor past the element limit) that names the tensor and says what was expected.
Result<InferenceRequest> decode_infer_request(std::string_view body,
                                              std::optional<size_t> json_size,
                                              const DecodeLimits& limits, OutputEncoding* encoding);
// A BYTES output holding an element that is not valid UTF-8 cannot be a JSON string: it is sent
// with the binary tensor data extension, as its parameter "binary_data_size" says, unless the
// client asked for it as JSON, which fails (invalid argument) naming the output and the element.
Result<EncodedBody> encode_infer_response(const InferenceResponse& response,
                                          const OutputEncoding& encoding);

// The client side: a request with every input binary (or JSON; a BYTES input that is not valid
// UTF-8 is sent binary all the same), and a response of either kind.
EncodedBody encode_infer_request(const InferenceRequest& request, bool binary_inputs,
                                 bool binary_outputs);
Result<InferenceResponse> decode_infer_response(std::string_view body,
                                                std::optional<size_t> json_size,
                                                const DecodeLimits& limits = {});

// The index of the first element of a BYTES tensor that is not valid UTF-8 (RFC 3629: no
// overlong forms, surrogates or code points past U+10FFFF), or -1 when every one is.
int64_t first_invalid_utf8(const Tensor& strings);

}  // namespace kiln::server::http
