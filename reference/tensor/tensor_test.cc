// Tests of Tensor storage, bf16 rounding and the memory tracker.
#include "reference/tensor/tensor.h"

#include <cmath>
#include <limits>
#include <thread>

#include "gtest/gtest.h"
#include "reference/tensor/memory.h"
#include "reference/tensor/random.h"

namespace distlab::tensor {
namespace {

TEST(BF16, RoundsToNearestEven) {
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(BF16ToFloat(FloatToBF16(1.0f + 0x1.0p-8f)), 1.0f);
  // 1 + 3*2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): rounds up to the even one.
  EXPECT_EQ(BF16ToFloat(FloatToBF16(1.0f + 3 * 0x1.0p-8f)), 1.0f + 0x1.0p-6f);
  // Just above halfway rounds up.
  EXPECT_EQ(BF16ToFloat(FloatToBF16(1.0f + 0x1.0p-8f + 0x1.0p-20f)), 1.0f + 0x1.0p-7f);
  EXPECT_EQ(BF16ToFloat(FloatToBF16(-2.5f)), -2.5f);  // exactly representable
  EXPECT_EQ(FloatToBF16(1.0f), 0x3f80);
}

TEST(BF16, KeepsSpecialValues) {
  EXPECT_TRUE(std::isnan(BF16ToFloat(FloatToBF16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(BF16ToFloat(FloatToBF16(std::numeric_limits<float>::infinity())),
            std::numeric_limits<float>::infinity());
  // The largest finite float rounds up to infinity in bf16 (its mantissa is all ones).
  EXPECT_EQ(BF16ToFloat(FloatToBF16(std::numeric_limits<float>::max())),
            std::numeric_limits<float>::infinity());
}

TEST(Tensor, ShapeAndStorage) {
  Tensor t({2, 3});
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.bytes(), 24u);
  EXPECT_EQ(t.dim(-1), 3);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(t.Get(i), 0.f);
  t.Set(4, 2.5f);
  EXPECT_EQ(t.f32()[4], 2.5f);
  Tensor b = t.To(DType::kBF16);
  EXPECT_EQ(b.bytes(), 12u);
  EXPECT_EQ(b.Get(4), 2.5f);
  t.Reshape({3, 2});
  EXPECT_EQ(t.Get(4), 2.5f);
}

TEST(TensorDeathTest, MisuseNamesTheProblem) {
  Tensor t({2, 3});
  EXPECT_DEATH(t.Reshape({4, 2}), "cannot reshape \\[2, 3\\] into \\[4, 2\\]");
  EXPECT_DEATH(t.bf16(), "is f32, not bf16");
  t.Release();
  EXPECT_DEATH(t.f32(), "has no storage");
  EXPECT_DEATH(Tensor({2}, DType::kF32, MemCategory::kActivations, nullptr, Device::kCuda), "not built");
}

TEST(MemoryTracker, CountsByCategoryWithPeak) {
  MemoryTracker tracker("rank0");
  ScopedMemoryTracker scope(&tracker);
  {
    Tensor w({10, 10}, DType::kF32, MemCategory::kParameters);  // 400 B
    Tensor g({10, 10}, DType::kBF16, MemCategory::kGradients);  // 200 B
    EXPECT_EQ(tracker.current(MemCategory::kParameters), 400u);
    EXPECT_EQ(tracker.current(MemCategory::kGradients), 200u);
    {
      Tensor act({25}, DType::kF32, MemCategory::kActivations);  // 100 B
      Tensor copy = act;                                         // another 100 B
      EXPECT_EQ(tracker.current(MemCategory::kActivations), 200u);
      EXPECT_EQ(tracker.current_total(), 800u);
    }
    EXPECT_EQ(tracker.current(MemCategory::kActivations), 0u);
    EXPECT_EQ(tracker.peak(MemCategory::kActivations), 200u);
    EXPECT_EQ(tracker.peak_total(), 800u);
    w.Release();  // FSDP-style free: the bytes go, the shape stays
    EXPECT_EQ(tracker.current(MemCategory::kParameters), 0u);
    w.Allocate();
    EXPECT_EQ(tracker.current(MemCategory::kParameters), 400u);
    g.SetCategory(MemCategory::kCommBuffers);
    EXPECT_EQ(tracker.current(MemCategory::kGradients), 0u);
    EXPECT_EQ(tracker.current(MemCategory::kCommBuffers), 200u);
    tracker.ResetPeak();
    EXPECT_EQ(tracker.peak_total(), 600u);
  }
  EXPECT_EQ(tracker.current_total(), 0u);
  EXPECT_NE(tracker.Report().find("parameters"), std::string::npos);
}

TEST(MemoryTracker, IsPerThreadAndMovesWithTheTensor) {
  MemoryTracker a("a"), b("b");
  Tensor moved;
  std::thread t1([&] {
    ScopedMemoryTracker scope(&a);
    moved = Tensor({8}, DType::kF32, MemCategory::kOptimizerState);
  });
  std::thread t2([&] {
    ScopedMemoryTracker scope(&b);
    Tensor x({4}, DType::kF32, MemCategory::kOptimizerState);
  });
  t1.join();
  t2.join();
  EXPECT_EQ(a.current(MemCategory::kOptimizerState), 32u);
  EXPECT_EQ(b.current(MemCategory::kOptimizerState), 0u);
  EXPECT_EQ(b.peak(MemCategory::kOptimizerState), 16u);
  moved.Release();  // freed on this thread, credited to rank a's tracker
  EXPECT_EQ(a.current(MemCategory::kOptimizerState), 0u);
}

TEST(Random, IsCounterBasedAndSeeded) {
  Tensor x({100}), y({100}), tail({50});
  FillNormal(x, 7, 1.f);
  FillNormal(y, 7, 1.f);
  FillNormal(tail, 7, 1.f, /*offset=*/50);
  EXPECT_EQ(x.ToVector(), y.ToVector());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(tail.Get(i), x.Get(50 + i));  // a slice draws the same values
  Tensor z({100});
  FillNormal(z, 8, 1.f);
  EXPECT_NE(x.ToVector(), z.ToVector());
  // Moments of 20000 normals: mean ~ 0, variance ~ 1 (5 standard errors).
  Tensor big({20000});
  FillNormal(big, 1, 1.f);
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < big.numel(); ++i) s += big.Get(i), s2 += big.Get(i) * big.Get(i);
  EXPECT_NEAR(s / 20000, 0.0, 5 * std::sqrt(1.0 / 20000));
  EXPECT_NEAR(s2 / 20000, 1.0, 5 * std::sqrt(2.0 / 20000));
  EXPECT_NE(SeedFor(1, "fc1.weight"), SeedFor(1, "fc2.weight"));
}

}  // namespace
}  // namespace distlab::tensor
