// Public tests, Lab 2 stage D.
#include "labs/dataloader/indexed_dataset.h"

#include <unistd.h>

#include "gtest/gtest.h"
#include "labs/dataloader/gpt_dataset.h"
#include "tools/testing/test_support.h"

namespace distlab::dataloader {
namespace {

using V = std::vector<int64_t>;

TEST(IndexedDataset, RoundTrip) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string p = std::string(dir ? dir : "/tmp") + "/pub_" + std::to_string(::getpid());
  ASSERT_OK_AND_ASSIGN(auto w, IndexedDatasetWriter::Create(p, DType::kUInt16));
  ASSERT_OK(w->AddSequence({5, 6, 7}));
  ASSERT_OK(w->EndDocument());
  ASSERT_OK(w->AddSequence({8}));
  ASSERT_OK(w->Finalize());
  ASSERT_OK_AND_ASSIGN(auto ds, IndexedDataset::Open(p));
  EXPECT_EQ(ds->num_sequences(), 2);
  EXPECT_EQ(ds->document_indices(), (V{0, 1, 2}));
  ASSERT_OK_AND_ASSIGN(V s, ds->Get(0));
  EXPECT_EQ(s, (V{5, 6, 7}));
}

// Documents of 5, 3, 4 tokens, L = 4 (5 tokens per sample):
//   doc0: a a a a [a]   sample 0 = doc0[0..4], ends at (0, 4)
//                 [a] b b b c   sample 1 starts on the shared token doc0[4], ends at (2, 0)
TEST(Gpt, SampleIndexWorkedExample) {
  ASSERT_OK_AND_ASSIGN(V idx, BuildSampleIndex({5, 3, 4}, {0, 1, 2}, 4, 2));
  EXPECT_EQ(idx, (V{0, 0, 0, 4, 2, 0}));
}

// weights [1/2, 1/4, 1/4]; error_d = w_d * max(i, 1) - taken_d, largest wins, ties to the lowest d:
//   i=0: [.5, .25, .25] -> 0     i=1: [-.5, .25, .25] -> 1 (tie with 2)
//   i=2: [0, -.5, .5]  -> 2      i=3: [.5, -.25, -.25] -> 0
TEST(Blending, WorkedExample) {
  ASSERT_OK_AND_ASSIGN(BlendIndices b, BuildBlendingIndices({0.5, 0.25, 0.25}, 4));
  EXPECT_EQ(b.dataset_index, (V{0, 1, 2, 0}));
  EXPECT_EQ(b.dataset_sample_index, (V{0, 0, 0, 1}));
}

}  // namespace
}  // namespace distlab::dataloader
