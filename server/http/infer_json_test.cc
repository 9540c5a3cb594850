// SPDX-License-Identifier: Apache-2.0
// The KServe v2 body formats: JSON and binary tensors round-trip, and every malformed body is a
// clear error.
#include "server/http/infer_json.h"

#include <gtest/gtest.h>

namespace kiln::server::http {
namespace {

InferenceRequest sample_request() {
  InferenceRequest r;
  r.id = "42";
  r.parameters.set("priority", int64_t{2});
  r.inputs.push_back(
      {"f", Tensor::from_vector<float>({1.5f, -2.f, 3.25f, 0.f}).reshaped(Shape{2, 2}), {}});
  r.inputs.push_back({"i8", Tensor::from_vector<int8_t>({-128, 127}), {}});
  r.inputs.push_back({"u64", Tensor::from_vector<uint64_t>({0, UINT64_MAX}), {}});
  Tensor b(DType::kBool, Shape{3});
  b.data<bool>()[1] = true;
  r.inputs.push_back({"b", b, {}});
  Tensor s(DType::kString, Shape{2});
  s.data<std::string>()[0] = "héllo";
  s.data<std::string>()[1] = "";
  r.inputs.push_back({"s", s, {}});
  r.outputs.push_back({"f", {}});
  return r;
}

void expect_same(const InferenceRequest& a, const InferenceRequest& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.parameters.get_int("priority")->value(), 2);
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    EXPECT_EQ(a.inputs[i].name, b.inputs[i].name);
    EXPECT_TRUE(a.inputs[i].data.equals(b.inputs[i].data)) << a.inputs[i].name;
  }
  ASSERT_EQ(b.outputs.size(), 1u);
  EXPECT_EQ(b.outputs[0].name, "f");
}

TEST(InferJson, RequestsRoundTripAsJsonAndAsBinary) {
  InferenceRequest r = sample_request();
  for (bool binary : {false, true}) {
    EncodedBody body = encode_infer_request(r, binary, binary);
    EXPECT_EQ(body.json_size.has_value(), binary);
    OutputEncoding enc;
    Result<InferenceRequest> back = decode_infer_request(body.body, body.json_size, {}, &enc);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    expect_same(r, *back);
    EXPECT_EQ(enc.is_binary("f"), binary);
  }
}

TEST(InferJson, ResponsesRoundTripWithMixedEncodings) {
  InferenceResponse resp;
  resp.model = "m";
  resp.version = "3";
  resp.id = "x";
  resp.outputs.push_back({"a", Tensor::from_vector<int32_t>({1, 2, 3}), {}});
  resp.outputs.push_back({"b", Tensor::from_vector<double>({0.5}), {}});
  OutputEncoding enc;
  enc.binary["b"] = true;
  EncodedBody body = encode_infer_response(resp, enc);
  ASSERT_TRUE(body.json_size.has_value());
  EXPECT_EQ(body.body.size(), *body.json_size + 8);
  EXPECT_NE(body.body.find("\"data\":[1,2,3]"), std::string::npos) << body.body;
  Result<InferenceResponse> back = decode_infer_response(body.body, body.json_size);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->model, "m");
  EXPECT_EQ(back->version, "3");
  EXPECT_EQ(back->id, "x");
  EXPECT_TRUE(back->outputs[0].data.equals(resp.outputs[0].data));
  EXPECT_TRUE(back->outputs[1].data.equals(resp.outputs[1].data));
}

TEST(InferJson, NestedDataIsFlattenedRowMajor) {
  Result<InferenceRequest> r = decode_infer_request(
      R"({"inputs":[{"name":"x","shape":[2,3],"datatype":"INT32","data":[[1,2,3],[4,5,6]]}]})",
      std::nullopt, {}, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->inputs[0].data.equals(
      Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}).reshaped(Shape{2, 3})));
}

void expect_bad(const std::string& body, std::optional<size_t> json_size, const std::string& part,
                StatusCode code = StatusCode::kInvalidArgument) {
  DecodeLimits limits;
  limits.max_elements = 1000;
  Result<InferenceRequest> r = decode_infer_request(body, json_size, limits, nullptr);
  ASSERT_FALSE(r.ok()) << body;
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().message().find(part), std::string_view::npos)
      << "missing \"" << part << "\" in: " << r.status().message();
}

TEST(InferJson, MalformedRequestsAreClearErrors) {
  expect_bad("{\"inputs\": [", std::nullopt, "not valid JSON");
  expect_bad("[1,2]", std::nullopt, "JSON object");
  expect_bad("{}", std::nullopt, "\"inputs\" array");
  expect_bad(R"({"inputs":[{"shape":[1],"datatype":"FP32","data":[1]}]})", std::nullopt,
             "needs a string \"name\"");
  expect_bad(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FLOAT","data":[1]}]})", std::nullopt,
             "datatype \"FLOAT\"");
  expect_bad(R"({"inputs":[{"name":"x","shape":[-1],"datatype":"FP32","data":[1]}]})", std::nullopt,
             "non-negative");
  expect_bad(R"({"inputs":[{"name":"x","shape":[3],"datatype":"FP32","data":[1,2]}]})",
             std::nullopt, "data holds 2 elements, its shape [3] needs 3");
  expect_bad(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1,2]}]})",
             std::nullopt, "data holds 2 elements, its shape [1] needs 1");
  expect_bad(R"({"inputs":[{"name":"x","shape":[1],"datatype":"UINT8","data":[300]}]})",
             std::nullopt, "out of range");
  expect_bad(R"({"inputs":[{"name":"x","shape":[1],"datatype":"INT32","data":["a"]}]})",
             std::nullopt, "expected an integer");
  expect_bad(R"({"inputs":[{"name":"x","shape":[1],"datatype":"BOOL","data":[2]}]})", std::nullopt,
             "true or false");
  expect_bad(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32"}]})", std::nullopt,
             "no \"data\"");
  expect_bad(R"({"inputs":[{"name":"x","shape":[100,100],"datatype":"FP32","data":[]}]})",
             std::nullopt, "more than the 1000 elements", StatusCode::kResourceExhausted);
  expect_bad(R"({"id":5,"inputs":[]})", std::nullopt, "\"id\" must be a string");
  // A small body asking for a large tensor is refused before anything is allocated.
  expect_bad(R"({"inputs":[{"name":"x","shape":[999],"datatype":"FP32","data":[1]}]})",
             std::nullopt, "data holds 1 elements, its shape [999] needs 999");
  std::string strings =
      R"({"inputs":[{"name":"x","shape":[999],"datatype":"BYTES","parameters":{"binary_data_size":8}}]})";
  expect_bad(strings + std::string(8, '\0'), strings.size(), "cannot hold 999 BYTES elements");
  std::string deep(100, '[');
  expect_bad(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":)" + deep +
                 std::string(100, ']') + "}]}",
             std::nullopt, "nested deeper");
  // Binary extension: sizes that do not add up.
  std::string json =
      R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}}]})";
  expect_bad(json + std::string(4, '\0'), json.size(), "runs past the 4 binary bytes");
  expect_bad(json + std::string(12, '\0'), json.size(), "add up to 8");
  expect_bad(json, json.size() + 5, "Inference-Header-Content-Length is");
  std::string wrong =
      R"({"inputs":[{"name":"x","shape":[3],"datatype":"FP32","parameters":{"binary_data_size":8}}]})";
  expect_bad(wrong + std::string(8, '\0'), wrong.size(), "needs 12");
  std::string bytes =
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":6}}]})";
  expect_bad(bytes + std::string("\x09\0\0\0ab", 6), bytes.size(), "says 9 bytes");
}

}  // namespace
}  // namespace kiln::server::http
