// Public tests, Lab 2 stage D.
#include "labs/dataloader/indexed_dataset.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "labs/dataloader/gpt_dataset.h"
#include "tools/testing/test_support.h"

namespace distlab::dataloader {
namespace {

using ::testing::HasSubstr;
using V = std::vector<int64_t>;

// Drawn from the grading seed (DISTLAB_GRADING_SEED; see tools/testing/test_support.h): the dtype and the
// tokens of two documents of one sequence each (uint16 is the dtype of the worked example below).
TEST(IndexedDataset, RoundTrip) {
  distlab::testing::CaseRandom rng;
  const DType dtype =
      rng.Pick(std::vector<DType>{DType::kUInt8, DType::kInt16, DType::kInt32, DType::kUInt16});
  std::vector<V> seqs(2);
  for (V& seq : seqs) {
    for (int64_t k = rng.Int(1, 5); k > 0; --k) seq.push_back(rng.Int(0, 255));
  }
  SCOPED_TRACE(std::string(DTypeName(dtype)) + ", sequences of " + std::to_string(seqs[0].size()) + " and " +
               std::to_string(seqs[1].size()) + " tokens; " + distlab::testing::SeedNote());
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string p = std::string(dir ? dir : "/tmp") + "/pub_" + std::to_string(::getpid());
  ASSERT_OK_AND_ASSIGN(auto w, IndexedDatasetWriter::Create(p, dtype));
  ASSERT_OK(w->AddSequence(seqs[0]));
  ASSERT_OK(w->EndDocument());
  ASSERT_OK(w->AddSequence(seqs[1]));
  ASSERT_OK(w->Finalize());
  ASSERT_OK_AND_ASSIGN(auto ds, IndexedDataset::Open(p));
  EXPECT_EQ(ds->num_sequences(), 2);
  EXPECT_EQ(ds->document_indices(), (V{0, 1, 2}));
  for (int64_t i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(V s, ds->Get(i));
    EXPECT_EQ(s, seqs[static_cast<size_t>(i)]) << "sequence " << i;
  }
}

// The index of that file (S = 2 sequences, D = 3), and where a corruption goes:
//   0 magic | 9 version | 17 dtype | 18 S | 26 D | 34 sizes int32[2] | 42 pointers int64[2] |
//   58 document indices int64[3] | 82 end of file
// Each error names the file and the field, with the entry's index for an array:
//   pub_bad_<pid>.idx: field 'sizes'[1] = -1 is negative
std::string Corrupt(const std::string& idx, size_t at, int64_t value, size_t width, bool append_byte) {
  std::string s = idx;
  std::memcpy(&s[at], &value, width);
  if (append_byte) s.push_back('\0');
  return s;
}

TEST(IndexedDataset, BadIndexNamesTheField) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string p = std::string(dir ? dir : "/tmp") + "/pub_bad_" + std::to_string(::getpid());
  ASSERT_OK_AND_ASSIGN(auto w, IndexedDatasetWriter::Create(p, DType::kUInt16));
  ASSERT_OK(w->AddSequence({5, 6, 7}));
  ASSERT_OK(w->EndDocument());
  ASSERT_OK(w->AddSequence({8}));
  ASSERT_OK(w->Finalize());
  std::ifstream in(p + ".idx", std::ios::binary);
  const std::string idx((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(idx.size(), 82u);
  auto open_with = [&](const std::string& bytes) {
    std::ofstream(p + ".idx", std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
    auto ds = IndexedDataset::Open(p);
    return ds.ok() ? std::string("opened") : std::string(ds.status().message());
  };
  const std::string file = "pub_bad_" + std::to_string(::getpid()) + ".idx: ";
  EXPECT_EQ(open_with(Corrupt(idx, 38, -1, 4, false)), file + "field 'sizes'[1] = -1 is negative");
  EXPECT_THAT(open_with(Corrupt(idx, 42, 1, 8, false)), HasSubstr(file + "field 'pointers'[0] "));
  EXPECT_THAT(open_with(Corrupt(idx, 58, 1, 8, false)), HasSubstr(file + "field 'document indices'[0] "));
  EXPECT_THAT(open_with(Corrupt(idx, 58, 0, 8, true)), HasSubstr(file + "field 'document indices' "));
  EXPECT_EQ(open_with(idx), "opened");
}

// Documents of 5, 3, 4 tokens, L = 4 (5 tokens per sample):
//   doc0: a a a a [a]   sample 0 = doc0[0..4], ends at (0, 4)
//                 [a] b b b c   sample 1 starts on the shared token doc0[4], ends at (2, 0)
TEST(Gpt, SampleIndexWorkedExample) {
  ASSERT_OK_AND_ASSIGN(V idx, BuildSampleIndex({5, 3, 4}, {0, 1, 2}, 4, 2));
  EXPECT_EQ(idx, (V{0, 0, 0, 4, 2, 0}));
}

// T = 100 tokens per epoch, L = 10: an epoch holds floor((T - 1) / L) = 9 samples.
//   N = 10: E = 2 (2 * 100 >= 10 * 10 + 1); the last epoch supplies 10 - floor((100 - 1) / 10) = 1 sample,
//           fewer than floor(0.8 * 9) = 7: it is shuffled on its own.
//   N = 16: E = 2; the last epoch supplies 16 - 9 = 7 samples, not fewer than 7: shuffled with the others.
//   N = 9:  E = 1 (100 >= 91): one epoch, nothing to separate.
TEST(Gpt, EpochsWorkedExample) {
  EXPECT_EQ(NumEpochs(100, 10, 10), 2);
  EXPECT_TRUE(SeparateFinalEpoch(2, 100, 10, 10));
  EXPECT_EQ(NumEpochs(100, 10, 16), 2);
  EXPECT_FALSE(SeparateFinalEpoch(2, 100, 10, 16));
  EXPECT_EQ(NumEpochs(100, 10, 9), 1);
  EXPECT_FALSE(SeparateFinalEpoch(1, 100, 10, 9));
}

// Documents d0 = 0 1 2 3 4, d1 = 5 6 7, d2 = 8 9 10 11 (T = 12), L = 4, N = 4, no shuffle:
//   E = 2 (2 * 12 >= 4 * 4 + 1); the last epoch supplies 4 - floor(11 / 4) = 2 samples, not fewer than
//   floor(0.8 * 2) = 1: no separate final epoch. Document index: 0 1 2 0 1 2.
//   S = floor((2 * 12 - 1) / 4) = 5 samples, 6 rows (position in the document index, offset):
//     stream  0 1 2 3 4 | 5 6 7 | 8 9 10 11 | 0 1 2 3 4 | 5 6 7 | 8 9 10 11
//     rows    (0,0)  (0,4)        (2,0)       (3,0)  (3,4)        (5,0)
//   sample 1 = rows 1 -> 2 = 4 5 6 7 8      sample 2 = rows 2 -> 3 = 8 9 10 11 0 (into the second epoch)
// Built twice with a cache directory, the second build reads the first one's file (same key); another L is
// another key.
TEST(Gpt, IndicesAndSamplesWorkedExample) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string base = std::string(dir ? dir : "/tmp") + "/pub_gpt_" + std::to_string(::getpid());
  ASSERT_OK_AND_ASSIGN(auto w, IndexedDatasetWriter::Create(base, DType::kUInt16));
  for (const V& doc : {V{0, 1, 2, 3, 4}, V{5, 6, 7}, V{8, 9, 10, 11}}) {
    ASSERT_OK(w->AddSequence(doc));
    ASSERT_OK(w->EndDocument());
  }
  ASSERT_OK(w->Finalize());
  ASSERT_OK_AND_ASSIGN(auto ds, IndexedDataset::Open(base));
  GptConfig c;
  c.seq_length = 4;
  c.num_samples = 4;
  c.shuffle = false;
  c.name = "pub";
  c.cache_dir = base + "_cache";
  ASSERT_EQ(::mkdir(c.cache_dir.c_str(), 0700), 0);
  ASSERT_OK_AND_ASSIGN(GptIndices g, BuildGptIndices(ds->sequence_lengths(), c));
  EXPECT_EQ(g.num_epochs, 2);
  EXPECT_FALSE(g.separate_final_epoch);
  EXPECT_EQ(g.document_index, (V{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(g.sample_index, (V{0, 0, 0, 4, 2, 0, 3, 0, 3, 4, 5, 0}));
  EXPECT_EQ(g.shuffle_index, (V{0, 1, 2, 3, 4}));
  EXPECT_FALSE(g.loaded_from_cache);
  const V want[4] = {{0, 1, 2, 3, 4}, {4, 5, 6, 7, 8}, {8, 9, 10, 11, 0}, {0, 1, 2, 3, 4}};
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK_AND_ASSIGN(V tokens, GptSample(*ds, g, 4, i));
    EXPECT_EQ(tokens, want[i]) << "sample " << i;
  }
  ASSERT_OK_AND_ASSIGN(GptIndices again, BuildGptIndices(ds->sequence_lengths(), c));
  EXPECT_TRUE(again.loaded_from_cache);
  EXPECT_EQ(again.cache_key, g.cache_key);
  EXPECT_EQ(again.sample_index, g.sample_index);
  c.seq_length = 3;
  ASSERT_OK_AND_ASSIGN(GptIndices other, BuildGptIndices(ds->sequence_lengths(), c));
  EXPECT_NE(other.cache_key, g.cache_key);
  EXPECT_FALSE(other.loaded_from_cache);
}

// weights [1/2, 1/4, 1/4]; error_d = w_d * max(i, 1) - taken_d, largest wins, ties to the lowest d:
//   i=0: [.5, .25, .25] -> 0     i=1: [-.5, .25, .25] -> 1 (tie with 2)
//   i=2: [0, -.5, .5]  -> 2      i=3: [.5, -.25, -.25] -> 0
// The error uses max(i, 1), not i or i + 1 (Megatron's helpers.cpp). weights [1/3, 2/3]:
//   i=0: [1/3, 2/3] -> 1      (with w*i every error is 0: a tie, dataset 0)
//   i=1: [1/3, -1/3] -> 0     (with w*(i+1): [2/3, 1/3] -> 0 too)
//   i=2: [-1/3, 1/3] -> 1     i=3: [0, 0] (tie) -> 0     i=4: [-2/3, 2/3] -> 1
TEST(Blending, ErrorUsesMaxOfIAndOne) {
  ASSERT_OK_AND_ASSIGN(BlendIndices b, BuildBlendingIndices({1, 2}, 8));
  EXPECT_EQ(b.dataset_index, (V{1, 0, 1, 0, 1, 1, 0, 1}));
}

TEST(Blending, WorkedExample) {
  ASSERT_OK_AND_ASSIGN(BlendIndices b, BuildBlendingIndices({0.5, 0.25, 0.25}, 4));
  EXPECT_EQ(b.dataset_index, (V{0, 1, 2, 0}));
  EXPECT_EQ(b.dataset_sample_index, (V{0, 0, 0, 1}));
}

}  // namespace
}  // namespace distlab::dataloader
