// Public tests, Lab 2 stage D.
#include "labs/dataloader/indexed_dataset.h"

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
