// SPDX-License-Identifier: Apache-2.0
// The conversions' copies: a request's bytes built from the tensors' own storage parse as the
// message encode_request builds, and large raw contents move into the decoded tensors uncopied.
#include "server/grpc/grpc_convert.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace kiln::server::grpc {
namespace {

// A request with a large float input (sent from its own storage), a small int input, a BYTES
// input and an empty one, parameters on the request and an input, and two requested outputs.
InferenceRequest mixed_request() {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> image(2 * 3 * 32 * 32);
  for (float& v : image) v = uniform(rng);
  InferenceRequest r;
  r.model = "m";
  r.version = "2";
  r.id = "req-1";
  r.parameters.set("priority", int64_t{3});
  InferTensor a{
      "image", Tensor::from_vector(std::span<const float>(image), Shape{2, 3, 32, 32}), {}};
  a.parameters.set("note", std::string("first"));
  r.inputs.push_back(std::move(a));
  r.inputs.push_back({"ids", Tensor::from_vector(std::vector<int32_t>{4, -5, 6}), {}});
  Tensor text(DType::kString, Shape{3});
  text.data<std::string>()[0] = "ab";
  text.data<std::string>()[2] = std::string(5000, 'x');
  r.inputs.push_back({"text", text, {}});
  r.inputs.push_back({"none", Tensor(DType::kU8, Shape{0, 4}), {}});
  r.outputs.push_back({"logits", {}});
  r.outputs.push_back({"probs", {}});
  return r;
}

inference::ModelInferRequest parse(const ::grpc::ByteBuffer& bytes) {
  std::vector<::grpc::Slice> slices;
  EXPECT_TRUE(bytes.Dump(&slices).ok());
  std::string flat;
  for (const ::grpc::Slice& s : slices)
    flat.append(reinterpret_cast<const char*>(s.begin()), s.size());
  inference::ModelInferRequest message;
  EXPECT_TRUE(message.ParseFromString(flat));
  return message;
}

TEST(GrpcConvert, RequestBytesParseAsTheEncodedMessage) {
  for (bool raw_inputs : {true, false}) {
    for (bool raw_outputs : {true, false}) {
      InferenceRequest r = mixed_request();
      if (!raw_inputs) r.inputs.erase(r.inputs.begin() + 2);  // BYTES would make them raw
      inference::ModelInferRequest expected;
      encode_request(r, raw_inputs, raw_outputs, &expected);
      EXPECT_EQ(expected.raw_input_contents_size(), raw_inputs ? 4 : 0);
      const ::grpc::ByteBuffer bytes = encode_request_bytes(r, raw_inputs, raw_outputs);
      EXPECT_EQ(bytes.Length(), expected.ByteSizeLong());
      // DebugString lists fields in field-number order, whatever order they came in.
      EXPECT_EQ(parse(bytes).DebugString(), expected.DebugString())
          << "raw_inputs " << raw_inputs << " raw_outputs " << raw_outputs;
    }
  }
}

TEST(GrpcConvert, RequestBytesShareTheLargeTensorsStorageAndKeepItAlive) {
  ::grpc::ByteBuffer bytes;
  const void* storage = nullptr;
  std::string expected;
  {
    InferenceRequest r = mixed_request();
    storage = r.inputs[0].data.raw_data();
    inference::ModelInferRequest message;
    encode_request(r, true, true, &message);
    expected = message.DebugString();
    bytes = encode_request_bytes(r, true, true);
    std::vector<::grpc::Slice> slices;
    ASSERT_TRUE(bytes.Dump(&slices).ok());
    int shared = 0;
    for (const ::grpc::Slice& s : slices) shared += s.begin() == storage;
    EXPECT_EQ(shared, 1) << "the image's bytes are one slice over the tensor's storage";
  }
  // The request and its tensors are gone; the buffer still holds the image.
  EXPECT_EQ(parse(bytes).DebugString(), expected);
}

TEST(GrpcConvert, DecodeMovesLargeRawContentsIntoTheTensors) {
  InferenceRequest r = mixed_request();
  inference::ModelInferRequest message;
  encode_request(r, true, true, &message);
  const void* image_bytes = message.raw_input_contents(0).data();
  OutputChoice choice;
  Result<InferenceRequest> decoded = decode_request(message, {}, &choice);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  ASSERT_EQ(decoded->inputs.size(), 4u);
  const Tensor& image = decoded->inputs[0].data;
  EXPECT_EQ(image.raw_data(), image_bytes) << "the image's contents were copied, not moved";
  EXPECT_TRUE(message.raw_input_contents(0).empty());
  EXPECT_TRUE(image.equals(r.inputs[0].data));
  // Small contents are copied into aligned storage and left in the message.
  const Tensor& ids = decoded->inputs[1].data;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ids.raw_data()) % kTensorAlignment, 0u);
  EXPECT_TRUE(ids.equals(r.inputs[1].data));
  EXPECT_EQ(message.raw_input_contents(1).size(), 12u);
  EXPECT_TRUE(decoded->inputs[2].data.equals(r.inputs[2].data));
  EXPECT_EQ(decoded->inputs[3].data.shape(), (Shape{0, 4}));
  // A moved tensor outlives the message it came in.
  message.Clear();
  EXPECT_TRUE(image.equals(r.inputs[0].data));

  // The same for a response's raw outputs on the client side.
  inference::ModelInferResponse response;
  InferenceResponse answer;
  answer.outputs.push_back({"logits", r.inputs[0].data, {}});
  encode_response(answer, OutputChoice{}, &response);
  const void* logits_bytes = response.raw_output_contents(0).data();
  Result<InferenceResponse> back = decode_response(response);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->outputs[0].data.raw_data(), logits_bytes);
  EXPECT_TRUE(back->outputs[0].data.equals(r.inputs[0].data));
}

TEST(GrpcConvert, RawContentsOfTheWrongSizeAreRefusedWhateverTheirSize) {
  for (size_t extra : {size_t{4}, size_t{8192}}) {
    InferenceRequest r = mixed_request();
    inference::ModelInferRequest message;
    encode_request(r, true, true, &message);
    message.mutable_raw_input_contents(0)->append(extra, '\0');
    OutputChoice choice;
    Result<InferenceRequest> decoded = decode_request(message, {}, &choice);
    ASSERT_FALSE(decoded.ok());
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(decoded.status().message().find("input \"image\": raw contents hold"),
              std::string::npos)
        << decoded.status().message();
  }
}

}  // namespace
}  // namespace kiln::server::grpc
