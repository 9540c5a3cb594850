// SPDX-License-Identifier: Apache-2.0
// traceparent values as W3C Trace Context level 1 defines them: the valid ones parsed, every kind
// of invalid one ignored.
#include "server/core/trace_context.h"

#include <gtest/gtest.h>

#include <set>

namespace kiln::server {
namespace {

constexpr std::string_view kTrace = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr std::string_view kParent = "00f067aa0ba902b7";

std::string traceparent(std::string_view version, std::string_view trace, std::string_view parent,
                        std::string_view flags) {
  return std::string(version) + "-" + std::string(trace) + "-" + std::string(parent) + "-" +
         std::string(flags);
}

TEST(TraceContext, ParsesTheSpecsExample) {
  std::optional<TraceParent> p = parse_traceparent(traceparent("00", kTrace, kParent, "01"));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(to_hex(p->trace_id), kTrace);
  EXPECT_EQ(to_hex(p->parent_id), kParent);
  EXPECT_EQ(p->trace_id[0], 0x4b);
  EXPECT_EQ(p->parent_id[7], 0xb7);
  EXPECT_TRUE(p->sampled);
}

TEST(TraceContext, SampledIsBitZeroOfTheFlags) {
  EXPECT_FALSE(parse_traceparent(traceparent("00", kTrace, kParent, "00"))->sampled);
  EXPECT_TRUE(parse_traceparent(traceparent("00", kTrace, kParent, "03"))->sampled);
  EXPECT_FALSE(parse_traceparent(traceparent("00", kTrace, kParent, "02"))->sampled);
}

TEST(TraceContext, InvalidValuesAreIgnored) {
  const std::string zero_trace(32, '0'), zero_parent(16, '0');
  const std::string good = traceparent("00", kTrace, kParent, "01");
  std::string upper_trace(kTrace);
  upper_trace[0] = 'B';  // "4Bf9..."
  std::string upper_parent(kParent);
  upper_parent[15] = 'B';
  for (const std::string& bad : std::vector<std::string>{
           "", good.substr(0, 54),                         // one short
           good + "0",                                     // version 00 is 55 long
           good + "-extra",                                // ... even with a '-'
           traceparent("ff", kTrace, kParent, "01"),       // version ff
           traceparent("00", zero_trace, kParent, "01"),   // all-zero trace id
           traceparent("00", kTrace, zero_parent, "01"),   // all-zero parent id
           traceparent("00", upper_trace, kParent, "01"),  // upper-case hex
           traceparent("00", kTrace, upper_parent, "01"),  //
           traceparent("00", kTrace, kParent, "0A"),       //
           traceparent("0A", kTrace, kParent, "01"),       //
           traceparent("0g", kTrace, kParent, "01"),       // not hex
           traceparent("00", std::string(kTrace).replace(5, 1, "x"), kParent, "01"),
           "00_" + good.substr(3),  // wrong separator
           traceparent("00", kTrace.substr(1), std::string(kParent) + "0", "01"),  // shifted
           traceparent("01", kTrace, kParent, "01") + "x",  // a later version: more after '-' only
       }) {
    EXPECT_FALSE(parse_traceparent(bad).has_value()) << bad;
  }
}

TEST(TraceContext, ALaterVersionKeepsItsFirstFourFields) {
  std::optional<TraceParent> p =
      parse_traceparent(traceparent("01", kTrace, kParent, "01") + "-what-comes-next");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(to_hex(p->trace_id), kTrace);
  EXPECT_TRUE(parse_traceparent(traceparent("cc", kTrace, kParent, "00")).has_value());
}

TEST(TraceContext, FormatRoundTrips) {
  const TraceId trace = random_trace_id();
  const SpanId span = random_span_id();
  const std::string sampled = format_traceparent(trace, span, true);
  EXPECT_EQ(sampled.size(), 55u);
  EXPECT_EQ(sampled.substr(0, 3), "00-");
  EXPECT_EQ(sampled.substr(52), "-01");
  std::optional<TraceParent> p = parse_traceparent(sampled);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->trace_id, trace);
  EXPECT_EQ(p->parent_id, span);
  EXPECT_TRUE(p->sampled);
  EXPECT_FALSE(parse_traceparent(format_traceparent(trace, span, false))->sampled);
}

TEST(TraceContext, RandomIdsAreNonZeroAndDistinct) {
  std::set<std::string> traces, spans;
  for (int i = 0; i < 1000; ++i) {
    traces.insert(to_hex(random_trace_id()));
    spans.insert(to_hex(random_span_id()));
  }
  EXPECT_EQ(traces.size(), 1000u);
  EXPECT_EQ(spans.size(), 1000u);
  EXPECT_EQ(traces.count(std::string(32, '0')), 0u);
}

TEST(TraceContext, TracestateIsPassedOnWhenPrintableAndShort) {
  EXPECT_EQ(checked_tracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"),
            "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
  EXPECT_EQ(checked_tracestate(std::string(512, 'a')).size(), 512u);
  EXPECT_EQ(checked_tracestate(std::string(513, 'a')), "");
  EXPECT_EQ(checked_tracestate("a=b\nc=d"), "");
  EXPECT_EQ(checked_tracestate("a=\xc3\xa9"), "");
}

}  // namespace
}  // namespace kiln::server
