// Hidden tests, Lab 2 stage D: GPT sample construction and blending. Hand-computed worked examples, plus
// a dense reference: with shuffle off, sample j is tokens [j*L, j*L + L] of the concatenated stream.
#include <unistd.h>

#include <algorithm>
#include <numeric>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "labs/dataloader/dataset.h"
#include "labs/dataloader/gpt_dataset.h"
#include "labs/dataloader/indexed_dataset.h"
#include "tools/testing/test_support.h"

namespace distlab::dataloader {
namespace {

using V = std::vector<int64_t>;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp");
}

TEST(Gpt, EpochsAndTheSeparateFinalEpoch) {
  // T = 100 tokens, L = 10: one epoch holds floor(99 / 10) = 9 samples.
  EXPECT_EQ(NumEpochs(100, 10, 5), 1);
  EXPECT_EQ(NumEpochs(100, 10, 9), 1);   // 9 * 10 + 1 = 91 <= 100
  EXPECT_EQ(NumEpochs(100, 10, 10), 2);  // 101 > 100
  EXPECT_EQ(NumEpochs(100, 10, 30), 4);  // 301 > 300
  EXPECT_FALSE(SeparateFinalEpoch(1, 100, 10, 5));
  // E = 2: 9 samples before the final epoch; N = 10 takes 1 from it, < floor(0.8 * 9) = 7 -> separate.
  EXPECT_TRUE(SeparateFinalEpoch(2, 100, 10, 10));
  EXPECT_TRUE(SeparateFinalEpoch(2, 100, 10, 15));   // 6 < 7
  EXPECT_FALSE(SeparateFinalEpoch(2, 100, 10, 16));  // 7 is not < 7
}

TEST(Gpt, DocumentIndexEpochsAndShuffles) {
  EXPECT_EQ(BuildDocumentIndex(3, 2, 5, false, false), (V{0, 1, 2, 0, 1, 2}));
  V whole = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
  SeededShuffle(&whole, 11);
  EXPECT_EQ(BuildDocumentIndex(4, 3, 11, false, true), whole);
  V head = {0, 1, 2, 3, 0, 1, 2, 3}, tail = {0, 1, 2, 3};
  SeededShuffle(&head, 11);
  SeededShuffle(&tail, 12);
  head.insert(head.end(), tail.begin(), tail.end());
  EXPECT_EQ(BuildDocumentIndex(4, 3, 11, true, true), head) << "the final epoch is shuffled on its own";
}

TEST(Gpt, SampleIndexSharesTheBoundaryToken) {
  // Documents of 5, 3, 4 tokens; L = 4, so a sample is 5 tokens.
  //   sample 0: doc0[0..4]                      -> ends at (0, 4)
  //   sample 1: doc0[4], doc1[0..2], doc2[0]    -> starts on doc0[4] again, ends at (2, 0)
  ASSERT_OK_AND_ASSIGN(V idx, BuildSampleIndex({5, 3, 4}, {0, 1, 2}, 4, 2));
  EXPECT_EQ(idx, (V{0, 0, 0, 4, 2, 0}));
  ASSERT_OK_AND_ASSIGN(V idx3, BuildSampleIndex({5, 3, 4}, {0, 1, 2}, 3, 3));
  // L = 3: (0,0) -> (0,3) -> doc0[3,4], doc1[0,1] -> (1,1) -> doc1[1,2], doc2[0,1] -> (2,1)
  EXPECT_EQ(idx3, (V{0, 0, 0, 3, 1, 1, 2, 1}));
  EXPECT_EQ(BuildSampleIndex({5, 3, 4}, {0, 1, 2}, 4, 3).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(Gpt, SamplesAreWindowsOfTheTokenStream) {
  const std::string prefix = TempDir() + "/gptstream_" + std::to_string(::getpid());
  ASSERT_OK_AND_ASSIGN(auto w, IndexedDatasetWriter::Create(prefix, DType::kInt32));
  V stream;
  const std::vector<int32_t> sizes = {7, 1, 12, 4, 9};
  int64_t next = 100;
  for (int32_t s : sizes) {
    V doc(static_cast<size_t>(s));
    std::iota(doc.begin(), doc.end(), next);
    next += s;
    stream.insert(stream.end(), doc.begin(), doc.end());
    ASSERT_OK(w->AddSequence(doc));
    ASSERT_OK(w->EndDocument());
  }
  ASSERT_OK(w->Finalize());
  ASSERT_OK_AND_ASSIGN(auto ds, IndexedDataset::Open(prefix));
  GptConfig c;
  c.seq_length = 5;
  c.num_samples = 6;  // 31 of 33 tokens: one epoch
  c.shuffle = false;
  ASSERT_OK_AND_ASSIGN(GptIndices g, BuildGptIndices(ds->sequence_lengths(), c));
  EXPECT_EQ(g.num_epochs, 1);
  EXPECT_EQ(g.sample_index.size(), 2u * (32 / 5 + 1));
  for (int64_t j = 0; j < c.num_samples; ++j) {
    ASSERT_OK_AND_ASSIGN(V s, GptSample(*ds, g, c.seq_length, j));
    EXPECT_EQ(s, V(stream.begin() + j * 5, stream.begin() + j * 5 + 6)) << "sample " << j;
  }
}

TEST(Gpt, ShuffleIndexIsASeededPermutation) {
  const std::vector<int32_t> sizes = {30, 20, 50};
  GptConfig c;
  c.seq_length = 8;
  c.num_samples = 20;  // 161 tokens: E = 2; 12 before the final epoch, 8 from it (< 9): separate
  c.seed = 3;
  ASSERT_OK_AND_ASSIGN(GptIndices g, BuildGptIndices(sizes, c));
  EXPECT_EQ(g.num_epochs, 2);
  EXPECT_TRUE(g.separate_final_epoch);
  const int64_t total = (2 * 100 - 1) / 8, before = (100 - 1) / 8;
  V head(static_cast<size_t>(before)), tail(static_cast<size_t>(total - before));
  std::iota(head.begin(), head.end(), 0);
  std::iota(tail.begin(), tail.end(), before);
  SeededShuffle(&head, 5);
  SeededShuffle(&tail, 6);
  head.insert(head.end(), tail.begin(), tail.end());
  EXPECT_EQ(g.shuffle_index, head);
  EXPECT_EQ(g.sample_index.size(), 2u * (total + 1));
}

TEST(Gpt, IndicesCachedOnDiskKeyedByConfig) {
  const std::string dir = TempDir() + "/gptcache_" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  const std::vector<int32_t> sizes = {13, 7, 22, 5};
  GptConfig c;
  c.seq_length = 6;
  c.num_samples = 12;
  c.seed = 9;
  c.cache_dir = dir;
  c.name = "corpus/train";
  ASSERT_OK_AND_ASSIGN(GptIndices a, BuildGptIndices(sizes, c));
  EXPECT_FALSE(a.loaded_from_cache);
  ASSERT_OK_AND_ASSIGN(GptIndices b, BuildGptIndices(sizes, c));
  EXPECT_TRUE(b.loaded_from_cache);
  EXPECT_EQ(a.cache_key, b.cache_key);
  EXPECT_EQ(a.document_index, b.document_index);
  EXPECT_EQ(a.sample_index, b.sample_index);
  EXPECT_EQ(a.shuffle_index, b.shuffle_index);
  c.seed = 10;
  ASSERT_OK_AND_ASSIGN(GptIndices d, BuildGptIndices(sizes, c));
  EXPECT_FALSE(d.loaded_from_cache) << "another seed is another configuration";
  EXPECT_NE(d.cache_key, a.cache_key);
  std::vector<int32_t> other = sizes;
  other[0] = 14;
  c.seed = 9;
  ASSERT_OK_AND_ASSIGN(GptIndices e, BuildGptIndices(other, c));
  EXPECT_FALSE(e.loaded_from_cache) << "other documents are another configuration";
}

TEST(Blending, GreedyWorkedExample) {
  ASSERT_OK_AND_ASSIGN(BlendIndices b, BuildBlendingIndices({0.5, 0.25, 0.25}, 4));
  EXPECT_EQ(b.dataset_index, (V{0, 1, 2, 0}));
  EXPECT_EQ(b.dataset_sample_index, (V{0, 0, 0, 1}));
}

TEST(Blending, TiesGoToTheLowestIndex) {
  ASSERT_OK_AND_ASSIGN(BlendIndices b, BuildBlendingIndices({1, 1, 1}, 6));
  EXPECT_EQ(b.dataset_index, (V{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(b.dataset_sample_index, (V{0, 0, 0, 1, 1, 1}));
}

// Megatron's helpers.cpp: error = weight * max(i, 1) - taken. With weight * i every error is 0 at i = 0 (a
// tie: dataset 0 whatever the weights); with weight * (i + 1) the ties fall one sample later.
TEST(Blending, ErrorIsWeightTimesMaxOfIAndOne) {
  ASSERT_OK_AND_ASSIGN(BlendIndices b, BuildBlendingIndices({1, 3}, 8));
  EXPECT_EQ(b.dataset_index, (V{1, 0, 1, 1, 0, 1, 1, 1}));
  ASSERT_OK_AND_ASSIGN(BlendIndices c, BuildBlendingIndices({0.2, 0.3, 0.5}, 8));
  EXPECT_EQ(c.dataset_index, (V{2, 1, 0, 2, 1, 2, 0, 2}));
  EXPECT_EQ(c.dataset_sample_index, (V{0, 0, 0, 1, 1, 2, 1, 3}));
}

TEST(Blending, CountsTrackTheWeights) {
  ASSERT_OK_AND_ASSIGN(BlendIndices b, BuildBlendingIndices({7, 2, 1}, 1000));  // normalised to 0.7/0.2/0.1
  int64_t n[3] = {0, 0, 0};
  for (size_t i = 0; i < b.dataset_index.size(); ++i) {
    const int64_t d = b.dataset_index[i];
    EXPECT_EQ(b.dataset_sample_index[i], n[d]) << "sample indices count up per dataset";
    ++n[d];
    const double expect = (d == 0 ? 0.7 : d == 1 ? 0.2 : 0.1) * static_cast<double>(i + 1);
    EXPECT_LE(std::abs(static_cast<double>(n[d]) - expect), 2.0) << "at sample " << i;
  }
  EXPECT_EQ(n[0], 700);
  EXPECT_EQ(n[1], 200);
  EXPECT_EQ(n[2], 100);
}

TEST(Blending, RejectsBadWeights) {
  EXPECT_EQ(BuildBlendingIndices({}, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BuildBlendingIndices({0.5, -0.5}, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BuildBlendingIndices({0, 0}, 4).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace distlab::dataloader
