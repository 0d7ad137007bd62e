// A test binary for seed_test: its one case prints the grading seed it read (test_support.h GradingSeed()).
#include <cstdio>

#include "gtest/gtest.h"
#include "tools/testing/test_support.h"

TEST(SeedProbe, Print) {
  std::printf("grading seed: %llu\n", static_cast<unsigned long long>(distlab::testing::GradingSeed()));
}
