// The CUDA tensors against the CPU runtime: cuBLAS GEMM (f32; bf16 inputs with f32 accumulation) against
// OpenBLAS, the elementwise kernels against ops.h, bf16 rounding bit for bit, and the memory tracker.
// Every case needs one GPU and skips naming the GPUs found where there is none.
#include "reference/tensor/cuda.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "reference/tensor/memory.h"
#include "reference/tensor/ops.h"
#include "reference/tensor/random.h"
#include "reference/tensor/tensor.h"
#include "tools/testing/gpu.h"

namespace distlab::tensor {
namespace {

Tensor Random(Shape shape, uint64_t seed) {
  Tensor t(std::move(shape));
  FillUniform(t, seed, -1.0f, 1.0f);
  return t;
}

// max |got - want| / (1 + |want|) over elements.
float MaxRelDiff(const Tensor& got, const Tensor& want) {
  float worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    worst = std::max(worst, std::fabs(got.Get(i) - want.Get(i)) / (1.0f + std::fabs(want.Get(i))));
  }
  return worst;
}

struct GemmCase {
  int m, n, k;
  bool ta, tb;
};

const GemmCase kCases[] = {{1, 1, 1, false, false},   {7, 5, 3, false, false},
                           {64, 48, 32, true, false}, {33, 65, 17, false, true},
                           {128, 96, 80, true, true}, {256, 512, 384, false, false}};

TEST(CudaGemm, F32MatchesOpenBlas) {
  DISTLAB_REQUIRE_GPUS(1);
  for (const GemmCase& g : kCases) {
    SCOPED_TRACE("m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) +
                 " ta=" + std::to_string(g.ta) + " tb=" + std::to_string(g.tb));
    Tensor a = Random(g.ta ? Shape{g.k, g.m} : Shape{g.m, g.k}, 1);
    Tensor b = Random(g.tb ? Shape{g.n, g.k} : Shape{g.k, g.n}, 2);
    Tensor c = Random({g.m, g.n}, 3);
    Tensor want = c;
    Gemm(g.ta, g.tb, 0.5f, a, b, 2.0f, want);
    cuda::DeviceTensor da = cuda::ToDevice(a, 0), db = cuda::ToDevice(b, 0), dc = cuda::ToDevice(c, 0);
    cuda::Gemm(g.ta, g.tb, 0.5f, da, db, 2.0f, dc);
    Tensor got = cuda::ToHost(dc);
    EXPECT_LT(MaxRelDiff(got, want), 1e-5f);
  }
}

TEST(CudaGemm, Bf16InputsAccumulateInF32) {
  DISTLAB_REQUIRE_GPUS(1);
  for (const GemmCase& g : kCases) {
    SCOPED_TRACE("m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k));
    Tensor a = Random(g.ta ? Shape{g.k, g.m} : Shape{g.m, g.k}, 4);
    Tensor b = Random(g.tb ? Shape{g.n, g.k} : Shape{g.k, g.n}, 5);
    // The reference: the bf16-rounded inputs multiplied in f32 on the CPU.
    Tensor a16 = a.To(DType::kBF16), b16 = b.To(DType::kBF16);
    Tensor want({g.m, g.n});
    Gemm(g.ta, g.tb, 1.0f, a16.To(DType::kF32), b16.To(DType::kF32), 0.0f, want);
    cuda::DeviceTensor da = cuda::ToDevice(a16, 0), db = cuda::ToDevice(b16, 0);
    cuda::DeviceTensor dc({g.m, g.n}, DType::kF32, 0);
    cuda::Gemm(g.ta, g.tb, 1.0f, da, db, 0.0f, dc);
    // Products of bf16 values are exact in f32; only the order of the f32 sums differs.
    EXPECT_LT(MaxRelDiff(cuda::ToHost(dc), want), 1e-4f);
  }
}

TEST(CudaOps, ElementwiseKernelsMatchTheCpuOps) {
  DISTLAB_REQUIRE_GPUS(1);
  const Tensor x = Random({37, 129}, 6), y0 = Random({37, 129}, 7), bias = Random({129}, 8);
  cuda::DeviceTensor dx = cuda::ToDevice(x, 0), dy = cuda::ToDevice(y0, 0), dbias = cuda::ToDevice(bias, 0);

  Tensor want = y0;
  Axpy(-0.75f, x, want);
  Scale(want, 3.0f);
  AddRowBias(bias, want);
  cuda::Axpy(-0.75f, dx, dy);
  cuda::Scale(dy, 3.0f);
  cuda::AddRowBias(dbias, dy);
  EXPECT_LT(MaxRelDiff(cuda::ToHost(dy), want), 1e-6f) << "Axpy, Scale, AddRowBias";

  Tensor gelu({37, 129}), dgelu({37, 129});
  GeluForward(x, gelu);
  GeluBackward(x, y0, dgelu);
  cuda::DeviceTensor dg({37, 129}, DType::kF32, 0), ddg({37, 129}, DType::kF32, 0),
      dy0 = cuda::ToDevice(y0, 0);
  cuda::GeluForward(dx, dg);
  cuda::GeluBackward(dx, dy0, ddg);
  EXPECT_LT(MaxRelDiff(cuda::ToHost(dg), gelu), 1e-5f) << "GeluForward";
  EXPECT_LT(MaxRelDiff(cuda::ToHost(ddg), dgelu), 1e-5f) << "GeluBackward";

  cuda::Fill(dg, 2.5f);
  Tensor filled = cuda::ToHost(dg);
  for (int64_t i = 0; i < filled.numel(); ++i) ASSERT_EQ(filled.Get(i), 2.5f) << "Fill, element " << i;
}

TEST(CudaOps, Bf16RoundingIsBitExactWithTheCpu) {
  DISTLAB_REQUIRE_GPUS(1);
  std::vector<float> values = {0.0f,     -0.0f,  1.0f,    1.00390625f, 1.01171875f, -3.14159265f,
                               65504.0f, 1e-40f, 3.4e38f, INFINITY,    -INFINITY,   NAN};
  for (int i = 0; i < 1000; ++i) values.push_back(static_cast<float>(NormalAt(9, i)) * 100.0f);
  const Tensor x = Tensor::FromVector({static_cast<int64_t>(values.size())}, values);
  cuda::DeviceTensor dx = cuda::ToDevice(x, 0);
  cuda::DeviceTensor d16(x.shape(), DType::kBF16, 0);
  cuda::Copy(dx, d16);
  const Tensor got = cuda::ToHost(d16);
  for (int64_t i = 0; i < x.numel(); ++i) {
    ASSERT_EQ(got.bf16()[i], FloatToBF16(values[i])) << "value " << values[i];
  }
  cuda::DeviceTensor back(x.shape(), DType::kF32, 0);
  cuda::Copy(d16, back);
  const Tensor round_trip = cuda::ToHost(back);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float want = BF16ToFloat(FloatToBF16(values[i]));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(round_trip.Get(i)));
    } else {
      EXPECT_EQ(round_trip.Get(i), want);
    }
  }
}

TEST(CudaMemory, DeviceBytesAreCountedByTheRanksTracker) {
  DISTLAB_REQUIRE_GPUS(1);
  MemoryTracker tracker("rank0");
  ScopedMemoryTracker scope(&tracker);
  {
    cuda::DeviceTensor p({1024, 256}, DType::kBF16, 0, MemCategory::kParameters);
    cuda::DeviceTensor g({1024, 256}, DType::kF32, 0, MemCategory::kGradients);
    EXPECT_EQ(tracker.current(MemCategory::kParameters), 1024u * 256 * 2);
    EXPECT_EQ(tracker.current(MemCategory::kGradients), 1024u * 256 * 4);
    // Fresh device tensors are zero-filled, like CPU ones.
    const Tensor host = cuda::ToHost(g);
    EXPECT_EQ(SquaredNorm(host), 0.0);
  }
  EXPECT_EQ(tracker.current(MemCategory::kParameters), 0u);
  EXPECT_EQ(tracker.peak_total(), 1024u * 256 * 6 + 1024u * 256 * 4);  // + the host copy
}

}  // namespace
}  // namespace distlab::tensor
