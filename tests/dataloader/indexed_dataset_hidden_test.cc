// Hidden tests, Lab 2 stage D: the .bin/.idx format. The expected bytes are assembled here field by field
// from the layout in indexed_dataset.h, never by the code under test.
//
// Every case draws its corpus from the grading seed (test_util.h): the dtype, 1 to 6 sequences of up to 6
// tokens anywhere in the dtype's range, how they group into documents, and where and how an index is
// corrupted. A failure names the drawn corpus and, for bytes, the first byte that differs and the field it
// lies in.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "labs/dataloader/indexed_dataset.h"
#include "tests/dataloader/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::dataloader {
namespace {

using ::distlab::testing::CaseRandom;
using testing::Drawn;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::Show;
using testing::Str;
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

const DType kAllDtypes[] = {DType::kUInt8, DType::kInt8,    DType::kInt16,   DType::kInt32,
                            DType::kInt64, DType::kFloat64, DType::kFloat32, DType::kUInt16};
const char* const kDtypeNames[] = {"",      "uint8",   "int8",    "int16", "int32",
                                   "int64", "float64", "float32", "uint16"};
const int kDtypeSizes[] = {0, 1, 1, 2, 4, 8, 8, 4, 2};

int Size(DType d) { return kDtypeSizes[static_cast<int>(d)]; }
const char* Name(DType d) { return kDtypeNames[static_cast<int>(d)]; }

// The tokens a dtype holds (floats: the integers they hold exactly, as the writer accepts them).
std::pair<int64_t, int64_t> Range(DType d) {
  switch (d) {
    case DType::kUInt8:
      return {0, 255};
    case DType::kInt8:
      return {-128, 127};
    case DType::kInt16:
      return {-32768, 32767};
    case DType::kUInt16:
      return {0, 65535};
    case DType::kInt32:
      return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case DType::kInt64:
      return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
    case DType::kFloat32:
      return {-(int64_t{1} << 24), int64_t{1} << 24};
    case DType::kFloat64:
      return {-(int64_t{1} << 53), int64_t{1} << 53};
  }
  return {0, 0};
}

// A corpus: sequences of tokens in one dtype, grouped into documents ([docs[d], docs[d+1]), none empty).
struct Corpus {
  DType dtype;
  std::vector<V> seqs;
  V docs;  // 0, ..., S
  int64_t S() const { return static_cast<int64_t>(seqs.size()); }
  int64_t D() const { return static_cast<int64_t>(docs.size()); }
  std::string Describe() const {
    std::vector<size_t> lengths;
    for (const V& s : seqs) lengths.push_back(s.size());
    return Str(Name(dtype), " sequences of lengths ", Show(lengths), ", document indices ", Show(docs));
  }
};

// 1..max_seqs sequences of min_len..6 tokens; the ends of the dtype's range come up often.
Corpus DrawCorpus(CaseRandom& rng, DType dtype, int64_t min_seqs = 1, int64_t max_seqs = 6,
                  int64_t min_len = 0) {
  Corpus c{dtype, {}, {0}};
  const auto [lo, hi] = Range(dtype);
  const int64_t S = rng.Int(min_seqs, max_seqs);
  for (int64_t i = 0; i < S; ++i) {
    V seq;
    for (int64_t k = rng.Int(min_len, 6); k > 0; --k) {
      const int64_t pick = rng.Int(0, 5);
      seq.push_back(pick == 0   ? lo
                    : pick == 1 ? hi
                    : pick == 2 ? std::min(rng.Int(0, 300), hi)
                                : rng.Int(lo, hi));
    }
    c.seqs.push_back(seq);
    if (i + 1 == S || rng.Chance(0.4)) c.docs.push_back(i + 1);  // a document ends after sequence i
  }
  return c;
}

// The .idx of a corpus, assembled from the layout in indexed_dataset.h.
std::string SpecIndex(const Corpus& c) {
  std::string s("MMIDIDX\0\0", 9);
  Put<uint64_t>(&s, 1);
  Put<uint8_t>(&s, static_cast<uint8_t>(c.dtype));
  Put<uint64_t>(&s, static_cast<uint64_t>(c.S()));
  Put<uint64_t>(&s, static_cast<uint64_t>(c.D()));
  for (const V& seq : c.seqs) Put<int32_t>(&s, static_cast<int32_t>(seq.size()));
  int64_t ptr = 0;
  for (const V& seq : c.seqs) {
    Put<int64_t>(&s, ptr);
    ptr += static_cast<int64_t>(seq.size()) * Size(c.dtype);
  }
  for (int64_t d : c.docs) Put<int64_t>(&s, d);
  return s;
}

std::string SpecBin(const Corpus& c) {
  std::string s;
  for (const V& seq : c.seqs) {
    for (int64_t t : seq) {
      switch (c.dtype) {
        case DType::kUInt8:
          Put<uint8_t>(&s, static_cast<uint8_t>(t));
          break;
        case DType::kInt8:
          Put<int8_t>(&s, static_cast<int8_t>(t));
          break;
        case DType::kInt16:
          Put<int16_t>(&s, static_cast<int16_t>(t));
          break;
        case DType::kUInt16:
          Put<uint16_t>(&s, static_cast<uint16_t>(t));
          break;
        case DType::kInt32:
          Put<int32_t>(&s, static_cast<int32_t>(t));
          break;
        case DType::kInt64:
          Put<int64_t>(&s, t);
          break;
        case DType::kFloat32:
          Put<float>(&s, static_cast<float>(t));
          break;
        case DType::kFloat64:
          Put<double>(&s, static_cast<double>(t));
          break;
      }
    }
  }
  return s;
}

// Where byte `at` of an index with S sequences and D document indices lies: "magic", "sizes[2]", ...
std::string FieldAt(size_t at, int64_t S, int64_t D) {
  const size_t s = static_cast<size_t>(S), d = static_cast<size_t>(D);
  if (at < 9) return "magic";
  if (at < 17) return "version";
  if (at < 18) return "dtype";
  if (at < 26) return "sequence count";
  if (at < 34) return "document count";
  if (at < 34 + 4 * s) return Str("sizes[", (at - 34) / 4, "]");
  if (at < 34 + 12 * s) return Str("pointers[", (at - 34 - 4 * s) / 8, "]");
  if (at < 34 + 12 * s + 8 * d) return Str("document indices[", (at - 34 - 12 * s) / 8, "]");
  return "past the document indices";
}

// "" when the bytes are equal; else the first byte that differs (and in which field of the index).
std::string CompareBytes(const std::string& got, const std::string& want, const Corpus* index_of) {
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (got[i] != want[i]) {
      return Str("byte ", i, index_of ? " (" + FieldAt(i, index_of->S(), index_of->D()) + ")" : "", " is ",
                 static_cast<int>(static_cast<uint8_t>(got[i])), ", the layout gives ",
                 static_cast<int>(static_cast<uint8_t>(want[i])));
    }
  }
  if (got.size() != want.size()) return Str(got.size(), " bytes, the layout gives ", want.size());
  return "";
}

// Writes the corpus with the writer: EndDocument after each document (the last one left to Finalize when
// `finalize_ends`).
void WriteCorpus(const std::string& p, const Corpus& c, bool finalize_ends) {
  ASSERT_OK_AND_ASSIGN(auto w, IndexedDatasetWriter::Create(p, c.dtype));
  size_t next_doc = 1;
  for (int64_t i = 0; i < c.S(); ++i) {
    ASSERT_OK(w->AddSequence(c.seqs[static_cast<size_t>(i)]));
    if (c.docs[next_doc] == i + 1) {
      if (!(finalize_ends && next_doc + 1 == c.docs.size())) {
        ASSERT_OK(w->EndDocument());
      }
      ++next_doc;
    }
  }
  ASSERT_OK(w->Finalize());  // ends the open document, if any
}

TEST(IndexedDataset, WriterIsByteCompatibleWithTheSpec) {
  CaseRandom rng;
  for (int trial = 0; trial < 3; ++trial) {
    const Corpus c =
        DrawCorpus(rng, rng.Pick(std::vector<DType>(std::begin(kAllDtypes), std::end(kAllDtypes))));
    const bool finalize_ends = rng.Chance(0.5);
    SCOPED_TRACE(Drawn(c.Describe() + (finalize_ends ? "; Finalize ends the last document" : "")));
    const std::string p = TempPrefix("writer" + std::to_string(trial));
    WriteCorpus(p, c, finalize_ends);
    EXPECT_NO_PROBLEM(CompareBytes(ReadAll(p + ".idx"), SpecIndex(c), &c)) << " (in the .idx)";
    EXPECT_NO_PROBLEM(CompareBytes(ReadAll(p + ".bin"), SpecBin(c), nullptr)) << " (in the .bin)";
  }
}

TEST(IndexedDataset, ReadsAFileWrittenFromTheSpec) {
  CaseRandom rng;
  for (int trial = 0; trial < 3; ++trial) {
    const Corpus c =
        DrawCorpus(rng, rng.Pick(std::vector<DType>(std::begin(kAllDtypes), std::end(kAllDtypes))), 1, 6, 1);
    SCOPED_TRACE(Drawn(c.Describe()));
    const std::string p = TempPrefix("spec" + std::to_string(trial));
    WriteAll(p + ".idx", SpecIndex(c));
    WriteAll(p + ".bin", SpecBin(c));
    ASSERT_OK_AND_ASSIGN(auto ds, IndexedDataset::Open(p));
    EXPECT_EQ(ds->dtype(), c.dtype);
    EXPECT_EQ(ds->num_sequences(), c.S());
    EXPECT_EQ(ds->num_documents(), c.D() - 1);
    std::vector<int32_t> lengths;
    for (const V& s : c.seqs) lengths.push_back(static_cast<int32_t>(s.size()));
    EXPECT_SAME(ds->sequence_lengths(), lengths);
    EXPECT_SAME(ds->document_indices(), c.docs);
    for (int64_t i = 0; i < c.S(); ++i) {
      ASSERT_OK_AND_ASSIGN(V got, ds->Get(i));
      EXPECT_SAME(got, c.seqs[static_cast<size_t>(i)]) << "sequence " << i;
    }
    // A part of one sequence, and ranges outside it.
    const int64_t i = rng.Int(0, c.S() - 1);
    const V& seq = c.seqs[static_cast<size_t>(i)];
    const int64_t len = static_cast<int64_t>(seq.size()), off = rng.Int(0, len - 1),
                  n = rng.Int(1, len - off);
    ASSERT_OK_AND_ASSIGN(V part, ds->Get(i, off, n));
    EXPECT_SAME(part, V(seq.begin() + off, seq.begin() + off + n))
        << "Get(" << i << ", " << off << ", " << n << ")";
    EXPECT_EQ(ds->Get(c.S()).status().code(), absl::StatusCode::kOutOfRange) << "Get(" << c.S() << ")";
    const int64_t past = len - off + rng.Int(1, 3);
    EXPECT_EQ(ds->Get(i, off, past).status().code(), absl::StatusCode::kOutOfRange)
        << "Get(" << i << ", " << off << ", " << past << ") runs past sequence " << i;
  }
}

TEST(IndexedDataset, RoundTripsEveryDtype) {
  CaseRandom rng;
  for (DType d : kAllDtypes) {
    EXPECT_EQ(DTypeSize(d), Size(d)) << Name(d);
    Corpus c = DrawCorpus(rng, d, 1, 4, 1);
    c.seqs.insert(c.seqs.begin() + rng.Int(0, c.S()), V{});  // an empty sequence, too
    c.docs = {0, c.S()};
    SCOPED_TRACE(Drawn(c.Describe()));
    const std::string p = TempPrefix(std::string("rt_") + Name(d));
    WriteCorpus(p, c, true);
    ASSERT_OK_AND_ASSIGN(auto ds, IndexedDataset::Open(p, d));
    size_t tokens = 0;
    for (const V& s : c.seqs) tokens += s.size();
    EXPECT_EQ(ReadAll(p + ".bin").size(), tokens * static_cast<size_t>(Size(d)))
        << "the .bin holds the tokens only";
    for (int64_t i = 0; i < c.S(); ++i) {
      ASSERT_OK_AND_ASSIGN(V got, ds->Get(i));
      EXPECT_SAME(got, c.seqs[static_cast<size_t>(i)]) << "sequence " << i;
    }
  }
}

TEST(IndexedDataset, WriterRejectsTokensTheDtypeCannotHold) {
  CaseRandom rng;
  const DType d =
      rng.Pick(std::vector<DType>{DType::kUInt8, DType::kInt8, DType::kInt16, DType::kUInt16, DType::kInt32});
  const auto [lo, hi] = Range(d);
  const int64_t bad = rng.Chance(0.5) ? hi + rng.Int(1, 1000) : lo - rng.Int(1, 1000);
  V seq;
  for (int64_t k = rng.Int(0, 4); k > 0; --k) seq.push_back(rng.Int(0, 100));
  seq.insert(seq.begin() + rng.Int(0, static_cast<int64_t>(seq.size())), bad);
  SCOPED_TRACE(Drawn(Str(Name(d), ", AddSequence(", Show(seq), ")")));
  const std::string p = TempPrefix("range");
  ASSERT_OK_AND_ASSIGN(auto w, IndexedDatasetWriter::Create(p, d));
  auto st = w->AddSequence(seq);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr(std::to_string(bad))) << "the error names the token";
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

template <typename T>
std::string With(std::string bytes, size_t at, T value) {
  std::memcpy(&bytes[at], &value, sizeof value);
  return bytes;
}

TEST(IndexedDataset, BadInputNamesFileAndField) {
  CaseRandom rng;
  // Two or more sequences, none empty: every pointer addresses tokens.
  const Corpus c =
      DrawCorpus(rng, rng.Pick(std::vector<DType>(std::begin(kAllDtypes), std::end(kAllDtypes))), 2, 6, 1);
  const std::string idx = SpecIndex(c), bin = SpecBin(c);
  const size_t S = static_cast<size_t>(c.S()), item = static_cast<size_t>(Size(c.dtype));
  {
    const size_t keep = static_cast<size_t>(rng.Int(0, 33));
    SCOPED_TRACE(Drawn(Str(c.Describe(), "; the .idx cut to ", keep, " bytes")));
    const std::string m = OpenCorrupt(idx.substr(0, keep), bin, "trunc");
    EXPECT_THAT(m, HasSubstr("bad_trunc_")) << "names the file";
    EXPECT_THAT(m, HasSubstr(".idx"));
    EXPECT_THAT(m, HasSubstr("header"));
  }
  {
    const size_t at = static_cast<size_t>(rng.Int(0, 8));
    std::string magic = idx;
    magic[at] = static_cast<char>(magic[at] ^ static_cast<char>(rng.Int(1, 255)));
    SCOPED_TRACE(Drawn(Str(c.Describe(), "; magic byte ", at, " changed")));
    EXPECT_THAT(OpenCorrupt(magic, bin, "magic"), HasSubstr("magic"));
  }
  {
    const uint64_t v = rng.Chance(0.2) ? 0 : static_cast<uint64_t>(rng.Int(2, 1000));
    SCOPED_TRACE(Drawn(Str(c.Describe(), "; version ", v)));
    EXPECT_THAT(OpenCorrupt(With<uint64_t>(idx, 9, v), bin, "version"), HasSubstr("version"));
  }
  {
    const uint8_t code = rng.Chance(0.2) ? 0 : static_cast<uint8_t>(rng.Int(9, 255));
    SCOPED_TRACE(Drawn(Str(c.Describe(), "; dtype code ", static_cast<int>(code))));
    EXPECT_THAT(OpenCorrupt(With<uint8_t>(idx, 17, code), bin, "code"), HasSubstr("dtype"));
  }
  {
    const uint64_t count = (idx.size() - 34) / 12 + static_cast<uint64_t>(rng.Int(1, 100));  // does not fit
    SCOPED_TRACE(Drawn(Str(c.Describe(), "; sequence count ", count)));
    EXPECT_THAT(OpenCorrupt(With<uint64_t>(idx, 18, count), bin, "count"), HasSubstr("sequence count"));
  }
  {
    // One pointer moved to or past the end of the .bin (still a multiple of the item size).
    const size_t k = static_cast<size_t>(rng.Int(0, c.S() - 1));
    const int64_t far = static_cast<int64_t>(bin.size() + item * static_cast<size_t>(rng.Int(0, 20)));
    SCOPED_TRACE(
        Drawn(Str(c.Describe(), "; pointers[", k, "] = ", far, ", the .bin has ", bin.size(), " bytes")));
    const std::string m = OpenCorrupt(With<int64_t>(idx, 34 + 4 * S + 8 * k, far), bin, "ptr");
    EXPECT_THAT(m, HasSubstr("pointers"));
    EXPECT_THAT(m, HasSubstr(".bin"));
  }
  {
    const size_t cut = static_cast<size_t>(rng.Int(1, static_cast<int64_t>(bin.size())));
    SCOPED_TRACE(Drawn(Str(c.Describe(), "; the .bin cut short by ", cut, " of its ", bin.size(), " bytes")));
    EXPECT_THAT(OpenCorrupt(idx, bin.substr(0, bin.size() - cut), "shortbin"), HasSubstr("pointers"));
  }
  {
    const size_t j = static_cast<size_t>(rng.Int(1, c.D() - 1));
    const int64_t bad = c.S() + rng.Int(1, 10);  // past the sequence count
    SCOPED_TRACE(Drawn(Str(c.Describe(), "; document indices[", j, "] = ", bad)));
    EXPECT_THAT(OpenCorrupt(With<int64_t>(idx, 34 + 12 * S + 8 * j, bad), bin, "docs"),
                HasSubstr("document indices"));
  }
}

// "The document indices start at 0" and "the file ends exactly after the document indices", each with the
// field named as the header lists it.
TEST(IndexedDataset, DocumentIndicesStartAtZeroAndEndTheFile) {
  CaseRandom rng;
  const Corpus c =
      DrawCorpus(rng, rng.Pick(std::vector<DType>(std::begin(kAllDtypes), std::end(kAllDtypes))), 2, 6, 0);
  const std::string idx = SpecIndex(c), bin = SpecBin(c);
  const size_t S = static_cast<size_t>(c.S()), D = static_cast<size_t>(c.D());
  const size_t docs_at = 34 + 12 * S;
  {
    const int64_t first = rng.Int(1, c.S());  // sequence 0 belongs to no document
    SCOPED_TRACE(Drawn(Str(c.Describe(), "; document indices[0] = ", first)));
    EXPECT_THAT(OpenCorrupt(With<int64_t>(idx, docs_at, first), bin, "start"),
                HasSubstr(Str("field 'document indices'[0] = ", first)));
  }
  {
    // The last one below S (but not below the one before it): the last sequences belong to no document.
    const int64_t last = rng.Int(c.docs[D - 2], c.S() - 1);
    SCOPED_TRACE(Drawn(Str(c.Describe(), "; document indices[", D - 1, "] = ", last)));
    EXPECT_THAT(OpenCorrupt(With<int64_t>(idx, docs_at + 8 * (D - 1), last), bin, "last"),
                HasSubstr(Str("field 'document indices'[", D - 1, "] = ", last)));
  }
  {
    int64_t extra = rng.Int(1, 16);
    if (extra == c.S()) ++extra;
    SCOPED_TRACE(Drawn(Str(c.Describe(), "; ", extra, " bytes after the document indices")));
    const std::string t = OpenCorrupt(idx + std::string(static_cast<size_t>(extra), '\0'), bin, "trailing");
    EXPECT_THAT(t, HasSubstr("field 'document indices'"));
    EXPECT_THAT(t, HasSubstr("trailing"));
    EXPECT_THAT(t, Not(HasSubstr("multimodal"))) << "only exactly S trailing bytes look like modes";
  }
  {
    // Exactly S more bytes: what a Megatron multimodal index keeps there (one int8 mode per sequence).
    std::string modes;
    for (size_t i = 0; i < S; ++i) modes.push_back(static_cast<char>(rng.Int(0, 3)));
    SCOPED_TRACE(Drawn(Str(c.Describe(), "; ", S, " bytes (one per sequence) after the document indices")));
    const std::string m = OpenCorrupt(idx + modes, bin, "modes");
    EXPECT_THAT(m, HasSubstr("field 'document indices'"));
    EXPECT_THAT(m, HasSubstr("multimodal"));
  }
}

TEST(IndexedDataset, DtypeMismatchNamesBothTypes) {
  CaseRandom rng;
  const std::vector<DType> all(std::begin(kAllDtypes), std::end(kAllDtypes));
  const Corpus c = DrawCorpus(rng, rng.Pick(all));
  // Another dtype, neither name inside the other ("int8" is inside "uint8"), so that each must be named.
  DType expected;
  do {
    expected = rng.Pick(all);
  } while (std::string(Name(expected)).find(Name(c.dtype)) != std::string::npos ||
           std::string(Name(c.dtype)).find(Name(expected)) != std::string::npos);
  SCOPED_TRACE(Drawn(Str(c.Describe(), "; opened expecting ", Name(expected))));
  const std::string p = TempPrefix("mismatch");
  WriteAll(p + ".idx", SpecIndex(c));
  WriteAll(p + ".bin", SpecBin(c));
  auto ds = IndexedDataset::Open(p, expected);
  ASSERT_FALSE(ds.ok());
  const std::string m(ds.status().message());
  EXPECT_THAT(m, HasSubstr("dtype"));
  EXPECT_THAT(m, HasSubstr(Name(c.dtype)));
  EXPECT_THAT(m, HasSubstr(Name(expected)));
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

std::string Hex(const std::string& s) {
  std::string out;
  char b[4];
  for (unsigned char ch : s) {
    std::snprintf(b, sizeof b, "%02x", ch);
    out += b;
  }
  return out;
}

// Seeded mutation fuzzing: flip, overwrite, truncate and extend the index of a drawn corpus; every input must
// either open (and then every sequence must read) or fail with an error naming the file and the field --
// never crash (ASan watches).
TEST(IndexedDataset, FuzzedIndexNeverCrashes) {
  CaseRandom rng;
  const Corpus c =
      DrawCorpus(rng, rng.Pick(std::vector<DType>(std::begin(kAllDtypes), std::end(kAllDtypes))), 2, 4, 0);
  SCOPED_TRACE(Drawn(c.Describe()));
  const std::string base = SpecIndex(c), bin = SpecBin(c);
  const std::string p = TempPrefix("fuzz");
  WriteAll(p + ".bin", bin);
  int survived = 0, opened = 0;
  const int kInputs = 3000;
  for (int it = 0; it < kInputs; ++it) {
    std::string s = base;
    const int edits = 1 + static_cast<int>(rng.Int(0, 3));
    for (int e = 0; e < edits; ++e) {
      const auto at = [&](size_t n) { return static_cast<size_t>(rng.Int(0, static_cast<int64_t>(n) - 1)); };
      switch (rng.Int(0, 4)) {
        case 0:
          if (!s.empty()) s[at(s.size())] ^= static_cast<char>(1u << rng.Int(0, 7));
          break;
        case 1:
          if (!s.empty()) s[at(s.size())] = static_cast<char>(rng.Next());
          break;
        case 2:
          s.resize(at(s.size() + 1));
          break;
        case 3:
          s.append(static_cast<size_t>(rng.Int(0, 15)), static_cast<char>(rng.Next()));
          break;
        case 4:
          if (s.size() > 8) {
            int64_t v = static_cast<int64_t>(rng.Next());
            std::memcpy(&s[at(s.size() - 7)], &v, 8);
          }
          break;
      }
    }
    WriteAll(p + ".idx", s);
    auto ds = IndexedDataset::Open(p);
    if (ds.ok()) {
      ++opened;
      for (int64_t i = 0; i < (*ds)->num_sequences(); ++i) {
        ASSERT_OK((*ds)->Get(i).status()) << "input " << it << " opened, but sequence " << i
                                          << " does not read; the .idx (hex): " << Hex(s);
      }
    } else {
      const std::string m(ds.status().message());
      ASSERT_THAT(m, HasSubstr("fuzz_")) << "error does not name the file; the .idx (hex): " << Hex(s);
      ASSERT_TRUE(NamesAField(m)) << "error does not name the field as the header lists it: " << m
                                  << "; the .idx (hex): " << Hex(s);
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
