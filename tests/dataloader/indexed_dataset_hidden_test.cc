// Hidden tests, Lab 2 stage D: the .bin/.idx format. The expected bytes are assembled here field by field
// from the layout in indexed_dataset.h, never by the code under test.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "labs/dataloader/indexed_dataset.h"
#include "tools/testing/test_support.h"

namespace distlab::dataloader {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using V = std::vector<int64_t>;

std::string TempPrefix(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name + "_" + std::to_string(::getpid());
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <typename T>
void Put(std::string* s, T v) {
  s->append(reinterpret_cast<const char*>(&v), sizeof v);
}

// The index of 3 uint16 sequences [lengths 3, 1, 2] in two documents {0, 1} {2}, assembled from the spec.
std::string SpecIndex() {
  std::string s("MMIDIDX\0\0", 9);
  Put<uint64_t>(&s, 1);
  Put<uint8_t>(&s, 8);  // uint16
  Put<uint64_t>(&s, 3);
  Put<uint64_t>(&s, 3);
  for (int32_t len : {3, 1, 2}) Put<int32_t>(&s, len);
  for (int64_t ptr : {0, 6, 8}) Put<int64_t>(&s, ptr);
  for (int64_t d : {0, 2, 3}) Put<int64_t>(&s, d);
  return s;
}
std::string SpecBin() {
  std::string s;
  for (uint16_t t : {10, 11, 65535, 7, 300, 301}) Put<uint16_t>(&s, t);
  return s;
}

TEST(IndexedDataset, WriterIsByteCompatibleWithTheSpec) {
  const std::string p = TempPrefix("writer");
  ASSERT_OK_AND_ASSIGN(auto w, IndexedDatasetWriter::Create(p, DType::kUInt16));
  ASSERT_OK(w->AddSequence({10, 11, 65535}));
  ASSERT_OK(w->AddSequence({7}));
  ASSERT_OK(w->EndDocument());
  ASSERT_OK(w->AddSequence({300, 301}));
  ASSERT_OK(w->Finalize());  // ends the open document
  EXPECT_EQ(ReadAll(p + ".idx"), SpecIndex());
  EXPECT_EQ(ReadAll(p + ".bin"), SpecBin());
}

TEST(IndexedDataset, ReadsAFileWrittenFromTheSpec) {
  const std::string p = TempPrefix("spec");
  WriteAll(p + ".idx", SpecIndex());
  WriteAll(p + ".bin", SpecBin());
  ASSERT_OK_AND_ASSIGN(auto ds, IndexedDataset::Open(p));
  EXPECT_EQ(ds->dtype(), DType::kUInt16);
  EXPECT_EQ(ds->num_sequences(), 3);
  EXPECT_EQ(ds->num_documents(), 2);
  EXPECT_EQ(ds->sequence_lengths(), (std::vector<int32_t>{3, 1, 2}));
  EXPECT_EQ(ds->document_indices(), (V{0, 2, 3}));
  ASSERT_OK_AND_ASSIGN(V s0, ds->Get(0));
  EXPECT_EQ(s0, (V{10, 11, 65535}));
  ASSERT_OK_AND_ASSIGN(V s2, ds->Get(2));
  EXPECT_EQ(s2, (V{300, 301}));
  ASSERT_OK_AND_ASSIGN(V part, ds->Get(0, 1, 2));
  EXPECT_EQ(part, (V{11, 65535}));
  EXPECT_EQ(ds->Get(3).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(ds->Get(1, 0, 2).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(IndexedDataset, RoundTripsEveryDtype) {
  const DType all[] = {DType::kUInt8, DType::kInt8,    DType::kInt16,   DType::kInt32,
                       DType::kInt64, DType::kFloat64, DType::kFloat32, DType::kUInt16};
  const int sizes[] = {1, 1, 2, 4, 8, 8, 4, 2};
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(DTypeSize(all[k]), sizes[k]);
    const std::string p = TempPrefix("rt" + std::to_string(k));
    ASSERT_OK_AND_ASSIGN(auto w, IndexedDatasetWriter::Create(p, all[k]));
    ASSERT_OK(w->AddSequence({1, 2, 3, 4, 5}));
    ASSERT_OK(w->AddSequence({}));
    ASSERT_OK(w->AddSequence({100}));
    ASSERT_OK(w->Finalize());
    ASSERT_OK_AND_ASSIGN(auto ds, IndexedDataset::Open(p, all[k]));
    EXPECT_EQ(ReadAll(p + ".bin").size(), 6u * sizes[k]) << DTypeName(all[k]);
    ASSERT_OK_AND_ASSIGN(V a, ds->Get(0));
    EXPECT_EQ(a, (V{1, 2, 3, 4, 5}));
    ASSERT_OK_AND_ASSIGN(V b, ds->Get(1));
    EXPECT_TRUE(b.empty());
    ASSERT_OK_AND_ASSIGN(V c, ds->Get(2));
    EXPECT_EQ(c, (V{100}));
  }
}

TEST(IndexedDataset, WriterRejectsTokensTheDtypeCannotHold) {
  const std::string p = TempPrefix("range");
  ASSERT_OK_AND_ASSIGN(auto w, IndexedDatasetWriter::Create(p, DType::kUInt8));
  auto st = w->AddSequence({1, 256});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("256"));
}

// Opens a corrupted copy of the spec files and returns the error text (empty when it opened).
std::string OpenCorrupt(const std::string& idx, const std::string& bin, const std::string& tag) {
  const std::string p = TempPrefix("bad_" + tag);
  WriteAll(p + ".idx", idx);
  WriteAll(p + ".bin", bin);
  auto ds = IndexedDataset::Open(p);
  if (ds.ok()) return "";
  return std::string(ds.status().message());
}

TEST(IndexedDataset, BadInputNamesFileAndField) {
  const std::string idx = SpecIndex(), bin = SpecBin();
  std::string m = OpenCorrupt(idx.substr(0, 20), bin, "trunc");
  EXPECT_THAT(m, HasSubstr("bad_trunc_")) << "names the file";
  EXPECT_THAT(m, HasSubstr(".idx"));
  EXPECT_THAT(m, HasSubstr("header"));

  std::string magic = idx;
  magic[0] = 'X';
  EXPECT_THAT(OpenCorrupt(magic, bin, "magic"), HasSubstr("magic"));

  std::string version = idx;
  version[9] = 2;
  EXPECT_THAT(OpenCorrupt(version, bin, "version"), HasSubstr("version"));

  std::string code = idx;
  code[17] = 9;
  EXPECT_THAT(OpenCorrupt(code, bin, "code"), HasSubstr("dtype"));

  std::string count = idx;
  count[18] = 100;  // 100 sequences do not fit the file
  EXPECT_THAT(OpenCorrupt(count, bin, "count"), HasSubstr("sequence count"));

  // Pointer of sequence 2 moved past the end of the .bin.
  std::string ptr = idx;
  int64_t far = 64;
  std::memcpy(&ptr[34 + 12 + 16], &far, 8);
  m = OpenCorrupt(ptr, bin, "ptr");
  EXPECT_THAT(m, HasSubstr("pointers"));
  EXPECT_THAT(m, HasSubstr(".bin"));

  EXPECT_THAT(OpenCorrupt(idx, bin.substr(0, 10), "shortbin"), HasSubstr("pointers"));

  std::string docs = idx;
  int64_t bad = 5;
  std::memcpy(&docs[34 + 36 + 8], &bad, 8);  // document index 1 = 5 > 3 sequences
  EXPECT_THAT(OpenCorrupt(docs, bin, "docs"), HasSubstr("document indices"));
}

// "The document indices start at 0" and "the file ends exactly after the document indices", each with the
// field named as the header lists it.
TEST(IndexedDataset, DocumentIndicesStartAtZeroAndEndTheFile) {
  const std::string idx = SpecIndex(), bin = SpecBin();
  std::string start = idx;
  int64_t one = 1;
  std::memcpy(&start[34 + 36], &one, 8);  // document indices {1, 2, 3}: sequence 0 belongs to no document
  EXPECT_THAT(OpenCorrupt(start, bin, "start"), HasSubstr("field 'document indices'[0] = 1"));
  std::string last = idx;
  int64_t two = 2;
  std::memcpy(&last[34 + 36 + 16], &two, 8);  // {0, 2, 2}: sequence 2 belongs to no document
  EXPECT_THAT(OpenCorrupt(last, bin, "last"), HasSubstr("field 'document indices'[2] = 2"));
  std::string trailing = idx + std::string(5, '\0');
  const std::string t = OpenCorrupt(trailing, bin, "trailing");
  EXPECT_THAT(t, HasSubstr("field 'document indices'"));
  EXPECT_THAT(t, HasSubstr("trailing"));
  // Exactly S = 3 more bytes: what a Megatron multimodal index keeps there (one int8 mode per sequence).
  const std::string modes = OpenCorrupt(idx + std::string("\0\1\0", 3), bin, "modes");
  EXPECT_THAT(modes, HasSubstr("field 'document indices'"));
  EXPECT_THAT(modes, HasSubstr("multimodal"));
  EXPECT_THAT(OpenCorrupt(idx + std::string(2, '\0'), bin, "two"), Not(HasSubstr("multimodal")));
}

TEST(IndexedDataset, DtypeMismatchNamesBothTypes) {
  const std::string p = TempPrefix("mismatch");
  WriteAll(p + ".idx", SpecIndex());
  WriteAll(p + ".bin", SpecBin());
  auto ds = IndexedDataset::Open(p, DType::kInt32);
  ASSERT_FALSE(ds.ok());
  const std::string m(ds.status().message());
  EXPECT_THAT(m, HasSubstr("dtype"));
  EXPECT_THAT(m, HasSubstr("uint16"));
  EXPECT_THAT(m, HasSubstr("int32"));
}

// "<file>.idx: field '<one of the header's field names>'..."
bool NamesAField(const std::string& m) {
  const size_t at = m.find(".idx: field '");
  if (at == std::string::npos) return false;
  const size_t from = at + 13, to = m.find('\'', from);
  if (to == std::string::npos) return false;
  const std::string f = m.substr(from, to - from);
  for (const char* name : {"header", "magic", "version", "dtype", "sequence count", "document count", "sizes",
                           "pointers", "document indices"}) {
    if (f == name) return true;
  }
  return false;
}

// Seeded mutation fuzzing: flip, overwrite, truncate and extend the spec index; every input must either open
// (and then every sequence must read) or fail with an error naming the file and the field -- never crash
// (ASan watches).
TEST(IndexedDataset, FuzzedIndexNeverCrashes) {
  const std::string base = SpecIndex(), bin = SpecBin();
  const std::string p = TempPrefix("fuzz");
  WriteAll(p + ".bin", bin);
  std::mt19937_64 rng(20260101);
  int survived = 0, opened = 0;
  const int kInputs = 3000;
  for (int it = 0; it < kInputs; ++it) {
    std::string s = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 5) {
        case 0:
          if (!s.empty()) s[rng() % s.size()] ^= static_cast<char>(1u << (rng() % 8));
          break;
        case 1:
          if (!s.empty()) s[rng() % s.size()] = static_cast<char>(rng());
          break;
        case 2:
          s.resize(rng() % (s.size() + 1));
          break;
        case 3:
          s.append(static_cast<size_t>(rng() % 16), static_cast<char>(rng()));
          break;
        case 4:
          if (s.size() > 8) {
            int64_t v = static_cast<int64_t>(rng());
            std::memcpy(&s[rng() % (s.size() - 7)], &v, 8);
          }
          break;
      }
    }
    WriteAll(p + ".idx", s);
    auto ds = IndexedDataset::Open(p);
    if (ds.ok()) {
      ++opened;
      for (int64_t i = 0; i < (*ds)->num_sequences(); ++i) ASSERT_OK((*ds)->Get(i).status());
    } else {
      const std::string m(ds.status().message());
      ASSERT_THAT(m, HasSubstr("fuzz_")) << "error does not name the file";
      ASSERT_TRUE(NamesAField(m)) << "error does not name the field as the header lists it: " << m;
    }
    ++survived;
  }
  std::printf("fuzz: survived %d of %d mutated .idx inputs (%d opened as valid)\n", survived, kInputs,
              opened);
  ::testing::Test::RecordProperty("fuzz_survived", survived);
  EXPECT_EQ(survived, kInputs);
}

}  // namespace
}  // namespace distlab::dataloader
