// SPDX-License-Identifier: Apache-2.0
// Layouts and views on the cuda target: reshapes of channels-last buffers and head splits against
// ref (fixed seeds; skipped where no GPU is present), and the strided views' arithmetic.
#include <numeric>

#include "compiler/targets/cuda/cuda_testing.h"
#include "compiler/targets/cuda/views.h"

namespace kiln::compiler {
namespace {

// Reshapes between NHWC convolutions, found by the differential tester (patterns transpose and
// detector): ShuffleNet's channel shuffle (Reshape to 5-D, Transpose, Reshape back) read by a
// convolution asked buffer_nhwc of a buffer holding the 5-D shape and aborted; a one-pixel head
// ([N, A*K, 1, 1], stored NHWC) reshaped to [N, A, K, 1, 1] was "reordered" as if 4-D.
TEST(CudaTarget, ReshapesOfChannelsLastBuffersMatchRef) {
  SKIP_WITHOUT_GPU();
  auto ints = [](std::vector<int64_t> v) {
    return Tensor::from_vector<int64_t>(v, Shape{static_cast<int64_t>(v.size())});
  };
  const Tensor w1 = random_tensor(Shape{16, 6, 3, 3}, 420);
  const Tensor w2 = random_tensor(Shape{16, 16, 1, 1}, 421);
  const Tensor w3 = random_tensor(Shape{21, 6, 3, 3}, 422);
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 6, 6, 6}, 423),
                                      random_tensor(Shape{2, 6, 1, 1}, 424)};
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    ops::Conv same;
    same.pads = std::vector<int64_t>{1, 1, 1, 1};
    Value* x = b.add(Op(ops::Relu{}), {b.add(Op(same), {in[0], b.constant(w1)})});
    x = b.add(Op(ops::Reshape{}), {x, b.constant(ints({2, 2, 8, 6, 6}))});
    ops::Transpose shuffle;
    shuffle.perm = std::vector<int64_t>{0, 2, 1, 3, 4};
    x = b.add(Op(shuffle), {x});
    x = b.add(Op(ops::Reshape{}), {x, b.constant(ints({2, 16, 6, 6}))});
    b.output(b.add(Op(ops::Conv{}), {x, b.constant(w2)}));
    Value* head = b.add(Op(same), {in[1], b.constant(w3)});
    head = b.add(Op(ops::Reshape{}), {head, b.constant(ints({2, 3, 7, 1, 1}))});
    ops::Transpose last;
    last.perm = std::vector<int64_t>{0, 1, 3, 4, 2};
    b.output(b.add(Op(ops::Sigmoid{}), {b.add(Op(last), {head})}));
  };
  std::shared_ptr<Executable> ref = compile_for(make_graph(inputs, build), "ref");
  ASSERT_NE(ref, nullptr);
  const std::vector<Tensor> want = run(*ref, inputs);
  for (const char* layout : {"nchw", "nhwc"}) {
    SCOPED_TRACE(layout);
    std::shared_ptr<Executable> exe =
        compile_cuda_with(make_graph(inputs, build), "KILN_CUDA_LAYOUT", layout);
    ASSERT_NE(exe, nullptr);
    expect_close(want, run(*exe, inputs));
  }
}

// Attention's head split: a Split (BERT), Slice (ViT, torch 1.x) or Gather (ViT, torch 2.x) of the
// QKV projection, reshaped to heads and transposed, is one strided copy each, no Transpose step.
TEST(CudaTarget, HeadSplitsFoldIntoOneCopy) {
  SKIP_WITHOUT_GPU();
  const std::vector<Tensor> inputs = {random_tensor(Shape{2, 5, 48}, 170),
                                      random_tensor(Shape{5, 2, 3, 16}, 171)};
  auto i64 = [](std::vector<int64_t> v) {
    return Tensor::from_vector<int64_t>(v, Shape{static_cast<int64_t>(v.size())});
  };
  auto build = [&](GraphBuilder& b, const std::vector<Value*>& in) {
    ops::Transpose bhsd;
    bhsd.perm = std::vector<int64_t>{0, 2, 1, 3};
    ops::Transpose bhds;
    bhds.perm = std::vector<int64_t>{0, 2, 3, 1};
    ops::Split split;
    split.axis = 2;
    ops::Reshape reshape;
    const std::vector<Value*> qkv = b.add(Op(split), {in[0], b.constant(i64({16, 16, 16}))}, 3);
    for (int i = 0; i < 3; ++i) {
      Value* heads =
          b.add(Op(reshape), {qkv[static_cast<size_t>(i)], b.constant(i64({2, 5, 4, 4}))});
      b.output(b.add(Op(i == 1 ? bhds : bhsd), {heads}));
    }
    Value* sliced = b.add(Op(ops::Slice{}), {in[0], b.constant(i64({8})), b.constant(i64({24})),
                                             b.constant(i64({2}))});
    ops::Transpose reversed;  // no perm: reversed dims
    b.output(b.add(Op(reversed), {b.add(Op(reshape), {sliced, b.constant(i64({10, 2, 8}))})}));
    ops::Gather gather;
    gather.axis = 2;
    ops::Transpose heads_first;
    heads_first.perm = std::vector<int64_t>{1, 2, 0, 3};
    Value* k = b.add(Op(gather), {in[1], b.constant(Tensor::scalar<int64_t>(1))});
    b.output(b.add(Op(heads_first), {b.add(Op(reshape), {k, b.constant(i64({5, 2, 4, 4}))})}));
  };
  auto [device, total] = expect_cuda_matches_ref(inputs, build, 0.0f);
  EXPECT_EQ(device, total) << "every step on the device";
  std::shared_ptr<Executable> exe = compile_for(make_graph(inputs, build), "cuda");
  ASSERT_NE(exe, nullptr);
  const cuda::Program* program = cuda_program(*exe);
  ASSERT_NE(program, nullptr);
  EXPECT_EQ(program->count_steps("Transpose"), 0);
  EXPECT_EQ(static_cast<int>(program->steps().size()), 3) << "Split, Slice, Gather";
}

// The element offsets a view reads, in row-major order of its dims.
std::vector<int64_t> offsets_of(const cuda::StridedView& v) {
  int64_t n = 1;
  for (int64_t d : v.dims) n *= d;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, at = v.offset;
    for (size_t d = v.dims.size(); d-- > 0;) {
      at += (rest % v.dims[d]) * v.strides[d];
      rest /= v.dims[d];
    }
    out.push_back(at);
  }
  return out;
}

// Runs without a GPU. Attention's head split (a Split/Slice view of the QKV projection, reshaped
// to heads, transposed) folds into one strided view; reshapes that need a copy are refused.
TEST(CudaViews, ReshapeAndPermuteReadTheSameElements) {
  // BERT's q: [B, S, 2304] sliced to [B, S, 768] at 768, heads [B, S, 12, 64], then (0, 2, 1, 3).
  const int64_t batch = 2, seq = 5;
  cuda::StridedView q{{batch, seq, 768}, {seq * 2304, 2304, 1}, 768};
  std::optional<cuda::StridedView> heads = cuda::reshape_view(q, {batch, seq, 12, 64});
  ASSERT_TRUE(heads.has_value());
  EXPECT_EQ(offsets_of(*heads), offsets_of(q)) << "a reshape reads the same elements in order";
  const cuda::StridedView t = cuda::permute_view(*heads, {0, 2, 1, 3});
  EXPECT_EQ(t.dims, (std::vector<int64_t>{batch, 12, seq, 64}));
  EXPECT_EQ(t.strides, (std::vector<int64_t>{seq * 2304, 64, 2304, 1}));
  // Element (b, h, s, d) of the transposed heads is q[b, s, h * 64 + d].
  EXPECT_EQ(offsets_of(t)[((1 * 12 + 3) * seq + 4) * 64 + 7],
            768 + 1 * seq * 2304 + 4 * 2304 + 3 * 64 + 7);
  // Random views and shapes: a reshape that succeeds reads the same elements in the same order;
  // merging dims of a non-contiguous view is refused.
  std::mt19937 rng(7);
  int folded = 0, refused = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int64_t> dims;
    const int rank = 1 + static_cast<int>(rng() % 4);
    for (int d = 0; d < rank; ++d) dims.push_back(1 + static_cast<int64_t>(rng() % 4));
    // A permuted plain layout, or one sliced along a dim.
    std::vector<int64_t> plain(dims.size());
    int64_t stride = 1;
    for (size_t d = dims.size(); d-- > 0;) {
      plain[d] = stride;
      stride *= dims[d] + (trial % 3 == 0 ? 1 : 0);  // every third: padded rows (a slice)
    }
    std::vector<int64_t> perm(dims.size());
    std::iota(perm.begin(), perm.end(), 0);
    if (trial % 2 == 0) std::shuffle(perm.begin(), perm.end(), rng);
    const cuda::StridedView v = cuda::permute_view(cuda::StridedView{dims, plain, 3}, perm);
    // A random factorization of the element count into a new shape.
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<int64_t> shape;
    for (int64_t left = n; left > 1;) {
      int64_t f = 1 + static_cast<int64_t>(rng() % static_cast<uint32_t>(left));
      while (left % f != 0) --f;
      shape.push_back(f);
      left /= f;
      if (f == 1) shape.push_back(1);
    }
    if (shape.empty()) shape.push_back(1);
    std::optional<cuda::StridedView> r = cuda::reshape_view(v, shape);
    if (r) {
      EXPECT_EQ(offsets_of(*r), offsets_of(v)) << "trial " << trial;
      ++folded;
    } else {
      ++refused;
    }
  }
  EXPECT_GT(folded, 50);
  EXPECT_GT(refused, 10);
  EXPECT_FALSE(cuda::reshape_view(cuda::StridedView{{2, 3}, {1, 2}, 0}, {6}).has_value())
      << "a transposed [2, 3] cannot be flattened without a copy";
}

}  // namespace
}  // namespace kiln::compiler
