// SPDX-License-Identifier: Apache-2.0
// Differential patterns with control flow: If branches and Loop bodies holding Convs, MatMuls and
// Softmax, as detectors' post-processing and greedy decoders have them. The cpu target plans each
// If branch as a program of its own (control.cc) and runs graphs with Loops on its interpreter,
// with oneDNN kernels for the nodes inside the subgraphs too.
#include <cmath>

#include "tests/differential/builders.h"
#include "tests/differential/case.h"

namespace kiln::differential {

namespace {

// Conv (1x1 or 3x3 with padding) of `x`, whose shape is `in`, written into `g` (a subgraph, where
// `x` may be its parent's value).
std::string branch_conv(OnnxGraph& g, const std::string& x, const Dims& in, int64_t out,
                        int64_t k) {
  const float bound = std::sqrt(3.0f / static_cast<float>(in[1] * k * k));
  return g.node("Conv", {x, g.weight({out, in[1], k, k}, bound), g.weight({out}, 0.3f)},
                {ais("kernel_shape", {k, k}), ais("pads", {k / 2, k / 2, k / 2, k / 2})});
}

// y = If(cond, then: Softmax of pooled Relu(Conv(x)), else: Sigmoid of pooled Conv(x)), x a value
// of the parent graph; the second run takes the other branch.
void gen_if(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t n = r.chance(0.8) ? 1 : 2;
  const int64_t h = r.range(1, 10);
  ConvSpec s;
  s.out = r.pick<int64_t>({16, 17, 32});
  s.pads = {1, 1, 1, 1};
  const std::string x = g.node("Relu", {conv(g, g.input({n, odd_channels(r), h, h}), s)});
  const Dims xd = g.shape(x);
  const int64_t out = r.pick<int64_t>({8, 16, 24});
  const bool first = r.chance(0.5);
  const std::string cond = g.input(Tensor::scalar(first), Tensor::scalar(!first));

  OnnxGraph then_branch(r, g.opset(), "then_");
  std::string a = then_branch.node("Relu", {branch_conv(then_branch, x, xd, out, 3)});
  a = then_branch.node("Flatten", {then_branch.node("GlobalAveragePool", {a})});
  then_branch.output(then_branch.node("Softmax", {a}, {ai("axis", -1)}));

  OnnxGraph else_branch(r, g.opset(), "else_");
  std::string b = branch_conv(else_branch, x, xd, out, 1);
  b = else_branch.node("Flatten", {else_branch.node("GlobalMaxPool", {b})});
  else_branch.output(else_branch.node("Sigmoid", {b}));

  std::string y = g.node(
      "If", {cond},
      {ag("then_branch", then_branch.subgraph()), ag("else_branch", else_branch.subgraph())});
  if (r.chance(0.5)) y = g.node("Mul", {y, g.scalar(2.0f)});
  g.output(y);
}

// y = If(cond, then: Relu(MatMul(x, W)), else: Cast<f32>(NonZero(x > 0))): the else branch's shape
// depends on the data, so the cpu target plans the If with the then branch's types and runs the
// call on its interpreter when the else branch is taken; the second run takes the other branch.
void gen_if_fallback(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t d = r.range(2, 9);
  const std::string x = g.input({2, d});
  const bool first = r.chance(0.5);
  const std::string cond = g.input(Tensor::scalar(first), Tensor::scalar(!first));
  OnnxGraph then_branch(r, g.opset(), "then_");
  then_branch.output(then_branch.node(
      "Relu", {then_branch.node("MatMul", {x, then_branch.weight({d, d}, 1.0f)})}));
  OnnxGraph else_branch(r, g.opset(), "else_");
  const std::string positive = else_branch.node("Greater", {x, else_branch.scalar(0.0f)});
  else_branch.output(else_branch.node("Cast", {else_branch.node("NonZero", {positive})},
                                      {ai("to", onnx::TensorProto::FLOAT)}));
  g.output(g.node(
      "If", {cond},
      {ag("then_branch", then_branch.subgraph()), ag("else_branch", else_branch.subgraph())}));
}

// h = Loop(trip, h0): h <- Tanh(MatMul(h, W) + b) (a greedy decoder's step), then Softmax.
void gen_loop(OnnxGraph& g) {
  Rng& r = g.rng();
  const int64_t batch = r.range(1, 3);
  const int64_t d = r.pick<int64_t>({4, 16, 33});
  const std::string x = g.input({batch, d});
  const std::string h0 = g.node("MatMul", {x, g.weight({d, d}, 1.0f / static_cast<float>(d))});

  OnnxGraph body(r, g.opset(), "body_");
  body.formal_input(onnx::TensorProto::INT64, {});
  const std::string cond_in = body.formal_input(onnx::TensorProto::BOOL, {});
  const std::string h = body.formal_input(onnx::TensorProto::FLOAT, {batch, d});
  std::string next =
      body.node("MatMul", {h, body.weight({d, d}, std::sqrt(3.0f / static_cast<float>(d)))});
  next = body.node("Tanh", {body.node("Add", {next, body.weight({d}, 0.3f)})});
  body.output(body.node("Identity", {cond_in}), onnx::TensorProto::BOOL);
  body.output(next);

  const std::string trip = g.tensor(Tensor::scalar<int64_t>(r.range(1, 4)));
  const std::string keep_going = g.tensor(Tensor::scalar(true));
  const std::string last = g.node("Loop", {trip, keep_going, h0}, {ag("body", body.subgraph())});
  g.output(g.node("Softmax", {last}, {ai("axis", -1)}));
}

constexpr Pattern kPatterns[] = {
    {"if",
     "If branches with Conv, pools, Softmax/Sigmoid reading the parent's values (the "
     "interpreter with oneDNN kernels inside subgraphs); the second run takes the other branch",
     gen_if},
    {"if_fallback",
     "If whose else branch's shape depends on the data (NonZero): planned with the then branch's "
     "types, the else branch run on the interpreter; the second run takes the other branch",
     gen_if_fallback},
    {"loop", "Loop whose body runs MatMul, Add, Tanh a few times, then Softmax", gen_loop},
};

}  // namespace

std::span<const Pattern> control_patterns() {
  return kPatterns;
}

}  // namespace kiln::differential
