// SPDX-License-Identifier: Apache-2.0
// Tests argument validation against operator schemas.
#include "pipeline/schema/schema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "pipeline/operators/operator.h"

namespace kiln::pipeline {
namespace {

using ::testing::HasSubstr;

const OperatorSchema& test_schema() {
  static const OperatorSchema schema{
      "test.op",
      "an operator for tests",
      {"in"},
      {"out"},
      {
          {"size", ArgType::kInt, std::nullopt, "required size"},
          {"scale", ArgType::kFloat, 1.5, "a float"},
          {"flag", ArgType::kBool, false, "a flag"},
          {"mode", ArgType::kString, std::string("a"), "a mode"},
          {"mean", ArgType::kFloatList, std::vector<double>{0.0}, "means"},
          {"dims", ArgType::kIntList, std::vector<int64_t>{}, "dims"},
          {"prob", ArgType::kFloat, 0.5, "per-sample", true},
      }};
  return schema;
}

TEST(SchemaTest, DefaultsFillMissingArguments) {
  auto args = validate_args(test_schema(), {{"size", int64_t{7}}});
  ASSERT_TRUE(args.ok()) << args.status().to_string();
  EXPECT_EQ(args->get_int("size"), 7);
  EXPECT_DOUBLE_EQ(args->get_float("scale"), 1.5);
  EXPECT_FALSE(args->get_bool("flag"));
  EXPECT_EQ(args->get_string("mode"), "a");
  EXPECT_EQ(args->get_floats("mean"), std::vector<double>{0.0});
  EXPECT_TRUE(args->get_ints("dims").empty());
}

TEST(SchemaTest, ConvertsCompatibleTypes) {
  auto args = validate_args(test_schema(), {{"size", 4.0},
                                            {"scale", int64_t{2}},
                                            {"flag", int64_t{1}},
                                            {"mean", std::vector<int64_t>{1, 2, 3}},
                                            {"dims", int64_t{5}}});
  ASSERT_TRUE(args.ok()) << args.status().to_string();
  EXPECT_EQ(args->get_int("size"), 4);
  EXPECT_DOUBLE_EQ(args->get_float("scale"), 2.0);
  EXPECT_TRUE(args->get_bool("flag"));
  EXPECT_EQ(args->get_floats("mean"), (std::vector<double>{1.0, 2.0, 3.0}));
  EXPECT_EQ(args->get_ints("dims"), std::vector<int64_t>{5});
}

TEST(SchemaTest, MissingRequiredArgumentIsNamed) {
  auto args = validate_args(test_schema(), {});
  ASSERT_FALSE(args.ok());
  EXPECT_EQ(args.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(args.status().message(),
              HasSubstr("operator test.op: missing required argument \"size\""));
}

TEST(SchemaTest, UnknownArgumentListsKnownOnes) {
  auto args = validate_args(test_schema(), {{"size", int64_t{1}}, {"sise", int64_t{1}}});
  ASSERT_FALSE(args.ok());
  EXPECT_THAT(args.status().message(), HasSubstr("unknown argument \"sise\""));
  EXPECT_THAT(args.status().message(), HasSubstr("size, scale, flag"));
}

TEST(SchemaTest, WrongTypeNamesExpectedAndFound) {
  auto args = validate_args(test_schema(), {{"size", 2.5}});
  ASSERT_FALSE(args.ok());
  EXPECT_THAT(args.status().message(), HasSubstr("argument \"size\" expects int, got float 2.5"));
  auto args2 = validate_args(test_schema(), {{"size", int64_t{1}}, {"mode", int64_t{3}}});
  ASSERT_FALSE(args2.ok());
  EXPECT_THAT(args2.status().message(), HasSubstr("\"mode\" expects string, got int 3"));
}

TEST(SchemaTest, PerSampleValueReplacesStaticValue) {
  auto args = validate_args(test_schema(), {{"size", int64_t{1}}});
  ASSERT_TRUE(args.ok());
  OpArgs copy = *args;
  copy.set_sample_value("prob", 0.25);
  EXPECT_DOUBLE_EQ(copy.get_float("prob"), 0.25);
  EXPECT_DOUBLE_EQ(args->get_float("prob"), 0.5);
}

TEST(SchemaTest, EveryRegisteredOperatorHasDocumentedArguments) {
  std::vector<std::string> names;
  for (const OperatorSchema* schema : operator_schemas()) {
    names.push_back(schema->name);
    EXPECT_FALSE(schema->doc.empty()) << schema->name;
    EXPECT_FALSE(schema->outputs.empty()) << schema->name;
    for (const ArgSpec& arg : schema->args) {
      EXPECT_FALSE(arg.doc.empty()) << schema->name << "." << arg.name;
      EXPECT_EQ(arg.doc.find('\n'), std::string::npos) << schema->name << "." << arg.name;
    }
    EXPECT_EQ(find_operator_schema(schema->name), schema);
  }
  EXPECT_THAT(names,
              ::testing::IsSupersetOf(
                  {"readers.file", "decoders.image", "decoders.image_random_crop", "resize", "crop",
                   "flip", "crop_mirror_normalize", "random.uniform", "random.coin_flip"}));
  EXPECT_EQ(find_operator_schema("nope"), nullptr);
}

TEST(SchemaTest, CreateOperatorReportsBadNamesAndArguments) {
  auto missing = create_operator("decoders.imag", {});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("\"decoders.imag\" does not exist"));
  auto bad_color = create_operator("decoders.image", {{"output_type", std::string("RGBA")}});
  ASSERT_FALSE(bad_color.ok());
  EXPECT_THAT(bad_color.status().message(), HasSubstr("\"RGBA\": expected RGB, BGR or GRAY"));
  auto bad_crop = create_operator("crop", {{"crop", std::vector<int64_t>{3}}});
  ASSERT_FALSE(bad_crop.ok());
  EXPECT_THAT(bad_crop.status().message(),
              HasSubstr("operator crop: crop must be [height, width]"));
  auto bad_resize = create_operator("resize", {});
  ASSERT_FALSE(bad_resize.ok());
  EXPECT_THAT(bad_resize.status().message(), HasSubstr("operator resize: set resize_x"));
  auto bad_prob = create_operator("random.coin_flip", {{"probability", 1.5}});
  ASSERT_FALSE(bad_prob.ok());
  EXPECT_THAT(bad_prob.status().message(), HasSubstr("probability 1.5 must be in [0, 1]"));
  EXPECT_TRUE(create_operator("crop_mirror_normalize", {{"mean", std::vector<double>{1, 2, 3}},
                                                        {"dtype", std::string("uint8")}})
                  .ok());
}

}  // namespace
}  // namespace kiln::pipeline
