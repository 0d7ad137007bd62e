// Lab 3 (dedup), given; not graded: tests of the streamed reader and writer (corpus_stream.h) -- every
// format, every bad input, and output that appears only when complete. No student code runs here.
#include "labs/dedup/corpus_stream.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "gtest/gtest.h"
#include "labs/dedup/stream_test_util.h"
#include "nlohmann/json.hpp"
#include "reference/base/status.h"
#include "tools/testing/test_support.h"

namespace distlab::dedup {
namespace {

namespace fs = std::filesystem;
using stream_testing::TmpDir;

void WriteFile(const std::string& path, const std::string& bytes, Codec codec) {
  auto sink = OpenByteSink(path, codec);
  ASSERT_TRUE(sink.ok()) << sink.status();
  ASSERT_TRUE((*sink)->Write(bytes).ok());
  ASSERT_TRUE((*sink)->Close().ok());
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct Read {
  std::vector<Document> docs;
  absl::Status status;
};

Read ReadAll(const std::vector<std::string>& inputs) {
  Read r;
  auto s = CorpusStream::Open(inputs);
  if (!s.ok()) return {{}, s.status()};
  Document d;
  for (;;) {
    absl::StatusOr<bool> more = (*s)->Next(d);
    if (!more.ok()) return {r.docs, more.status()};
    if (!*more) return r;
    r.docs.push_back(d);
  }
}

// The corpus_io.h conventions, in every codec:
//   line 1  {"id": "a", "text": "alpha", "url": "x"}   a string id as it is
//   line 2  (blank: skipped, still counted)
//   line 3  {"id": 7, "text": "line\nbreak"}           another id: its JSON text -> "7"
//   line 4  {"text": "no id"}                         no id: the line number -> "4" (no '\n' at the end)
const char kLines[] =
    "{\"id\": \"a\", \"text\": \"alpha\", \"url\": \"x\"}\n \t\n{\"id\": 7, \"text\": \"line\\nbreak\"}\n"
    "{\"text\": \"no id\"}";

TEST(CorpusStream, EveryCodecReadsTheSameDocuments) {
  const std::string dir = TmpDir("codecs");
  for (const char* name : {"c.jsonl", "c.jsonl.gz", "c.jsonl.zst"}) {
    const std::string path = dir + "/" + name;
    WriteFile(path, kLines, CodecOf(path));
    const Read r = ReadAll({path});
    ASSERT_TRUE(r.status.ok()) << name << ": " << r.status;
    ASSERT_EQ(r.docs.size(), 3u) << name;
    EXPECT_EQ(r.docs[0].name, "a");
    EXPECT_EQ(r.docs[0].text, "alpha");
    EXPECT_EQ(r.docs[1].name, "7");
    EXPECT_EQ(r.docs[1].text, "line\nbreak");
    EXPECT_EQ(r.docs[2].name, "4");
    EXPECT_EQ(r.docs[2].text, "no id");
  }
  EXPECT_NE(ReadBytes(dir + "/c.jsonl.gz"), ReadBytes(dir + "/c.jsonl"));  // compressed, really
}

// Without parsing, the same documents come back as raw lines (blank lines still skipped).
TEST(CorpusStream, UnparsedPassSeesTheSameLines) {
  const std::string dir = TmpDir("unparsed");
  WriteFile(dir + "/c.jsonl.gz", kLines, Codec::kGzip);
  ASSERT_OK_AND_ASSIGN(auto s, CorpusStream::Open({dir + "/c.jsonl.gz"}));
  Document d;
  std::vector<std::string> raw;
  for (;;) {
    ASSERT_OK_AND_ASSIGN(const bool more, s->Next(d, /*parse=*/false));
    if (!more) break;
    raw.push_back(s->raw());
  }
  ASSERT_EQ(raw.size(), 3u);
  EXPECT_EQ(raw[2], "{\"text\": \"no id\"}");
  EXPECT_TRUE(d.name.empty());
}

// A long shard: more than one read buffer of compressed and decompressed bytes, lines across their edges.
TEST(CorpusStream, LongShardsAcrossBufferEdges) {
  const std::string dir = TmpDir("long");
  std::string lines;
  for (int i = 0; i < 30000; ++i) {
    lines +=
        "{\"id\": " + std::to_string(i) + ", \"text\": \"" + std::string(50 + i % 97, 'a' + i % 26) + "\"}\n";
  }
  for (const char* name : {"l.jsonl", "l.jsonl.gz", "l.jsonl.zst"}) {
    const std::string path = dir + "/" + name;
    WriteFile(path, lines, CodecOf(path));
    const Read r = ReadAll({path});
    ASSERT_TRUE(r.status.ok()) << r.status;
    ASSERT_EQ(r.docs.size(), 30000u) << name;
    EXPECT_EQ(r.docs[29999].name, "29999");
    EXPECT_EQ(r.docs[12345].text, std::string(50 + 12345 % 97, 'a' + 12345 % 26));
  }
}

// labs/dedup/testdata as a folder: its files in name order, as ReadCorpus reads it.
TEST(CorpusStream, FolderOfTextFiles) {
  const Read r = ReadAll({"labs/dedup/testdata"});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.docs.size(), 4u);
  EXPECT_EQ(r.docs[0].name, "a.txt");
  EXPECT_EQ(r.docs[3].name, "docs.jsonl");
  EXPECT_EQ(r.docs[0].text, ReadBytes("labs/dedup/testdata/a.txt"));
}

// Two shards, read in the order given; without an id a document is "<shard file name>:<line>".
TEST(CorpusStream, ShardsInOrderWithShardNames) {
  const std::string dir = TmpDir("shards");
  WriteFile(dir + "/s1.jsonl.gz", "{\"text\": \"one\"}\n", Codec::kGzip);
  WriteFile(dir + "/s0.jsonl", "{\"text\": \"zero\"}\n{\"id\": \"z\", \"text\": \"z\"}\n", Codec::kPlain);
  const Read r = ReadAll({dir + "/s0.jsonl", dir + "/s1.jsonl.gz"});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.docs.size(), 3u);
  EXPECT_EQ(r.docs[0].name, "s0.jsonl:1");
  EXPECT_EQ(r.docs[1].name, "z");
  EXPECT_EQ(r.docs[2].name, "s1.jsonl.gz:1");
}

// Shares (Open's part of parts) split the files contiguously: in order they are the whole corpus, named as
// in the whole (a one-shard share of three still names "<shard>:<line>"), and a share may hold no file.
TEST(CorpusStream, SharesTileTheCorpus) {
  const std::string dir = TmpDir("shares");
  std::vector<std::string> shards;
  for (int s = 0; s < 3; ++s) {
    shards.push_back(dir + "/s" + std::to_string(s) + ".jsonl");
    WriteFile(shards.back(), "{\"text\": \"a\"}\n{\"text\": \"b\"}\n", Codec::kPlain);
  }
  const Read whole = ReadAll(shards);
  ASSERT_TRUE(whole.status.ok()) << whole.status;
  std::vector<std::string> names;
  for (int part = 0; part < 4; ++part) {
    ASSERT_OK_AND_ASSIGN(auto share, CorpusStream::Open(shards, part, 4));
    EXPECT_EQ(share->first_shard(), 3 * part / 4);
    EXPECT_EQ(share->end_shard(), 3 * (part + 1) / 4);
    Document d;
    for (;;) {
      ASSERT_OK_AND_ASSIGN(const bool more, share->Next(d));
      if (!more) break;
      names.push_back(d.name);
    }
  }
  ASSERT_EQ(names.size(), whole.docs.size());
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(names[i], whole.docs[i].name);
  EXPECT_EQ(names[0], "s0.jsonl:1");
  const Read folder_half = [&] {
    Read r;
    auto s = CorpusStream::Open({"labs/dedup/testdata"}, 1, 2);
    Document d;
    while (s.ok() && *(*s)->Next(d)) r.docs.push_back(d);
    return r;
  }();
  ASSERT_EQ(folder_half.docs.size(), 2u);  // the folder's 4 files, the second half
  EXPECT_EQ(folder_half.docs[1].name, "docs.jsonl");
  EXPECT_EQ(CorpusStream::Open(shards, 2, 2).status().code(), absl::StatusCode::kInvalidArgument);
}

void ExpectError(const Read& r, absl::StatusCode code, const std::vector<std::string>& parts) {
  EXPECT_EQ(r.status.code(), code) << r.status;
  for (const std::string& p : parts) EXPECT_NE(r.status.message().find(p), std::string::npos) << r.status;
}

// Share `part` of `parts` of these inputs, read to its end: its documents, and the error that stopped it.
Read ReadShare(const std::vector<std::string>& inputs, int part, int parts) {
  Read r;
  auto s = CorpusStream::Open(inputs, part, parts);
  if (!s.ok()) return {{}, s.status()};
  Document d;
  for (;;) {
    absl::StatusOr<bool> more = (*s)->Next(d);
    if (!more.ok()) return {r.docs, more.status()};
    if (!*more) return r;
    r.docs.push_back(d);
  }
}

// One plain shard is shared by its bytes: for 2 to 9 shares the documents of the shares, in order, are the
// whole file's -- names (line numbers of the whole file, for lines without "id"), texts and lines as stored
// -- although the cuts fall inside lines, on blank lines, and inside a line longer than a share. A
// compressed shard is not split: one share (the last, by the rule for whole files) holds it all.
TEST(CorpusStream, ByteRangesOfOnePlainShardTileIt) {
  const std::string dir = TmpDir("ranges");
  std::string lines;
  for (int d = 0; d < 40; ++d) {
    if (d % 7 == 3) lines += "\n  \n";  // blank lines: skipped, counted
    nlohmann::json j = {{"text", "document " + std::to_string(d) + std::string(d == 20 ? 600 : d % 5, 'x')}};
    if (d % 3 == 0) j["id"] = "id" + std::to_string(d);
    lines += j.dump() + "\n";
  }
  lines += "{\"text\": \"last, without a newline\"}";
  for (const std::string& name : {"one.jsonl", "one.jsonl.zst"}) {
    SCOPED_TRACE(name);
    const std::string path = dir + "/" + name;
    WriteFile(path, lines, CodecOf(path));
    const Read whole = ReadAll({path});
    ASSERT_TRUE(whole.status.ok()) << whole.status;
    ASSERT_EQ(whole.docs.size(), 41u);
    for (int parts = 2; parts <= 9; ++parts) {
      SCOPED_TRACE(::testing::Message() << parts << " shares");
      std::vector<Document> docs;
      int64_t bytes = 0;
      for (int part = 0; part < parts; ++part) {
        ASSERT_OK_AND_ASSIGN(auto share, CorpusStream::Open({path}, part, parts));
        EXPECT_EQ(share->byte_range(), CodecOf(path) == Codec::kPlain);
        bytes += share->bytes_total();
        const Read r = ReadShare({path}, part, parts);
        ASSERT_TRUE(r.status.ok()) << r.status;
        if (!share->byte_range() && part < parts - 1) EXPECT_TRUE(r.docs.empty());
        docs.insert(docs.end(), r.docs.begin(), r.docs.end());
      }
      if (CodecOf(path) == Codec::kPlain) EXPECT_EQ(bytes, static_cast<int64_t>(lines.size()));
      ASSERT_EQ(docs.size(), whole.docs.size());
      for (size_t i = 0; i < docs.size(); ++i) {
        EXPECT_EQ(docs[i].name, whole.docs[i].name) << "document " << i;
        EXPECT_EQ(docs[i].text, whole.docs[i].text) << "document " << i;
      }
    }
  }
  // The name of a document without "id" is its line in the whole file, in any share.
  EXPECT_EQ(ReadAll({dir + "/one.jsonl"}).docs.back().name, "53");
  // An error in a later share names the file's line, not the share's.
  WriteFile(dir + "/bad.jsonl", lines + "\n{\"text\": oops}\n", Codec::kPlain);
  const Read last = ReadShare({dir + "/bad.jsonl"}, 3, 4);
  ExpectError(last, absl::StatusCode::kInvalidArgument, {"bad.jsonl line 54: not valid JSON"});
}

TEST(CorpusStream, BadLinesNameTheShardAndLine) {
  const std::string dir = TmpDir("bad");
  WriteFile(dir + "/ok.jsonl", "{\"text\": \"fine\"}\n", Codec::kPlain);
  WriteFile(dir + "/b.jsonl.zst", "{\"text\": \"fine\"}\n{\"text\": \"cut\n", Codec::kZstd);
  ExpectError(ReadAll({dir + "/ok.jsonl", dir + "/b.jsonl.zst"}), absl::StatusCode::kInvalidArgument,
              {"b.jsonl.zst line 2", "not valid JSON"});
  WriteFile(dir + "/n.jsonl.gz", "{\"text\": \"fine\"}\n\n{\"text\": 3}\n", Codec::kGzip);
  ExpectError(ReadAll({dir + "/n.jsonl.gz"}), absl::StatusCode::kInvalidArgument,
              {"n.jsonl.gz line 3", "string field \"text\""});
  WriteFile(dir + "/a.jsonl", "[1, 2]\n", Codec::kPlain);
  ExpectError(ReadAll({dir + "/a.jsonl"}), absl::StatusCode::kInvalidArgument, {"a.jsonl line 1"});
}

// A line as nlohmann reads it, with the rules of corpus_stream.h: its text and "id" (a string as it is,
// another value as its JSON text), or the error the reader must give after "<shard> line <n>: ".
struct NlohmannReading {
  bool ok = false, has_id = false;
  std::string id, text, error;
};
NlohmannReading AsNlohmannReadsIt(const std::string& line) {
  NlohmannReading r;
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return r.error = "not valid JSON", r;
  const auto text = j.is_object() ? j.find("text") : j.end();
  if (!j.is_object() || text == j.end() || !text->is_string()) {
    return r.error = "expected a JSON object with a string field \"text\"", r;
  }
  r.ok = true, r.text = text->get<std::string>();
  const auto id = j.find("id");
  r.has_id = id != j.end();
  if (r.has_id) r.id = id->is_string() ? id->get<std::string>() : id->dump();
  return r;
}

TEST(CorpusStream, LinesReadAsNlohmannReadsThem) {
  const std::vector<std::string> lines = {
      R"({"id": 1, "text": "plain"})",
      R"({"text":"no spaces","id":22})",
      " \t{ \"id\" : \"s\" , \"text\" : \"spaced\" } \r",
      R"({"text": "esc \" \\ \/ \b \f \n \r \t end"})",
      R"({"id": "a\tb", "text": "x"})",
      R"({"text": "caf\u00e9 \ud83d\ude00"})",
      R"({"text": "\ud800 lone"})",
      R"({"text": "\x"})",
      R"({"text": "a\)",
      "{\"text\": \"raw\ttab\"}",
      "{\"text\": \"del \x7f ok\"}",
      "{\"text\": \"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"}",
      "{\"text\": \"\xC0\x80\"}",
      "{\"text\": \"\xE0\x80\x80\"}",
      "{\"text\": \"\xED\xA0\x80\"}",
      "{\"text\": \"\xF4\x90\x80\x80\"}",
      "{\"text\": \"\xF5\x80\"}",
      "{\"text\": \"\x80\"}",
      "{\"text\": \"cut \xC3\"}",
      "{\"text\": \"cut \xE2\x82\"}",
      R"({"id": 0, "text": "x"})",
      R"({"id": -0, "text": "x"})",
      R"({"id": -5, "text": "x"})",
      R"({"id": 1234567890123456789, "text": "x"})",
      R"({"id": 12345678901234567890, "text": "x"})",
      R"({"id": 99999999999999999999, "text": "x"})",
      R"({"id": 1.5, "text": "x"})",
      R"({"id": 1e3, "text": "x"})",
      R"({"id": true, "text": "x"})",
      R"({"id": null, "text": "x"})",
      R"({"id": [1, 2], "text": "x"})",
      R"({"id": {"b": 1, "a": 2}, "text": "x"})",
      R"({"text": "first", "text": "second"})",
      R"({"id": 1, "id": "two", "text": "x"})",
      R"({"te\u0078t": "escaped key"})",
      R"({"t\"ext": "a", "text": "b"})",
      R"({"": 1, "text": "empty key"})",
      "{\"t\xC3\xABxt\": \"a\", \"text\": \"b\"}",
      R"({"text": "a", "n": -12, "f": 0.5, "b": true, "z": null, "o": {"k": [1, {"x": "y"}]}})",
      R"({"text": "a", "n": 01})",
      R"({"text": "a", "n": -})",
      R"({"text": "a", "n": 1.})",
      R"({"text": "a", "n": tru})",
      R"({"text": "a", "n": truex})",
      R"({"text": "a"} x)",
      R"({"text": "a"}})",
      R"({"text": "a",})",
      R"({"text" "a"})",
      R"({"text": "a" "b"})",
      R"({,"text": "a"})",
      R"({"text": "a"} // comment)",
      R"({"text": 3})",
      R"({"text": null})",
      R"({"text": ["a"]})",
      R"({"id": 1})",
      R"({})",
      R"([1])",
      R"("text")",
      "\xEF\xBB\xBF{\"text\": \"after a byte order mark\"}",
      std::string("{\"text\": \"nul \0 inside\"}", 24),
      std::string("{\"text\": \"a\"}\0", 14),
  };
  // Random edits of those lines: bytes JSON gives a meaning to, escapes' letters, UTF-8 lead and
  // continuation bytes, replaced, inserted or deleted.
  std::vector<std::string> all = lines;
  testing::CaseRandom rng;
  const std::string bytes = "\"\\{}[],:0-19.eE tnu \t\r/\x80\xBF\xC3\xE2\xED\xF0\xF4\x01";
  for (int trial = 0; trial < 400; ++trial) {
    std::string line = lines[rng.Int(0, lines.size() - 1)];
    for (int edits = static_cast<int>(rng.Int(1, 3)); edits > 0 && !line.empty(); --edits) {
      const size_t at = rng.Int(0, line.size() - 1);
      const char b = bytes[rng.Int(0, bytes.size() - 1)];
      switch (rng.Int(0, 2)) {
        case 0:
          line[at] = b;
          break;
        case 1:
          line.insert(line.begin() + at, b);
          break;
        default:
          line.erase(at, 1);
      }
    }
    if (line.find_first_not_of(" \t\r") != std::string::npos) all.push_back(line);  // not a blank line
  }
  // The lines nlohmann reads, all in one shard, document by document (without "id": the line number).
  const std::string dir = TmpDir("like_nlohmann");
  std::string good;
  std::vector<NlohmannReading> want;
  std::vector<std::string> bad;
  for (const std::string& line : all) {
    NlohmannReading r = AsNlohmannReadsIt(line);
    if (!r.ok) {
      bad.push_back(line);
      continue;
    }
    good += line + "\n";
    if (!r.has_id) r.id = std::to_string(want.size() + 1);
    want.push_back(r);
  }
  WriteFile(dir + "/good.jsonl", good, Codec::kPlain);
  const Read got = ReadAll({dir + "/good.jsonl"});
  ASSERT_TRUE(got.status.ok()) << got.status;
  ASSERT_EQ(got.docs.size(), want.size());
  for (size_t d = 0; d < want.size(); ++d) {
    EXPECT_EQ(got.docs[d].name, want[d].id) << "line " << d + 1;
    EXPECT_EQ(got.docs[d].text, want[d].text) << "line " << d + 1;
  }
  // The others one shard each (an error ends the reading; the first 100 of them): the same message.
  if (bad.size() > 100) bad.resize(100);
  for (const std::string& line : bad) {
    WriteFile(dir + "/bad.jsonl", line + "\n", Codec::kPlain);
    const Read r = ReadAll({dir + "/bad.jsonl"});
    EXPECT_EQ(r.status.message(), dir + "/bad.jsonl line 1: " + AsNlohmannReadsIt(line).error)
        << "line " << ::testing::PrintToString(line);
  }
}

// A compressed shard cut short is an error naming it and the last whole line, never a quiet end.
TEST(CorpusStream, TruncatedShardsAreErrors) {
  const std::string dir = TmpDir("truncated");
  std::string lines;
  for (int i = 0; i < 2000; ++i) lines += "{\"text\": \"document number " + std::to_string(i) + "\"}\n";
  for (const char* name : {"t.jsonl.gz", "t.jsonl.zst"}) {
    const std::string path = dir + "/" + name;
    WriteFile(path, lines, CodecOf(path));
    const std::string whole = ReadBytes(path);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << whole.substr(0, whole.size() * 2 / 3);
    ExpectError(ReadAll({path}), absl::StatusCode::kDataLoss, {name, "after line", "truncated"});
  }
  std::string garbage = ReadBytes(dir + "/t.jsonl.gz");
  for (size_t i = 100; i < 200; ++i) garbage[i] = static_cast<char>(garbage[i] ^ 0x5A);
  std::ofstream(dir + "/g.jsonl.gz", std::ios::binary) << garbage;
  ExpectError(ReadAll({dir + "/g.jsonl.gz"}), absl::StatusCode::kDataLoss, {"g.jsonl.gz", "corrupt gzip"});
}

TEST(CorpusStream, MissingAndMixedInputs) {
  const std::string dir = TmpDir("missing");
  WriteFile(dir + "/ok.jsonl", "{\"text\": \"fine\"}\n", Codec::kPlain);
  ExpectError(ReadAll({dir + "/ok.jsonl", dir + "/gone.jsonl.gz"}), absl::StatusCode::kNotFound,
              {"gone.jsonl.gz"});
  ExpectError(ReadAll({dir + "/ok.jsonl", dir}), absl::StatusCode::kInvalidArgument, {"is a folder"});
  ExpectError(ReadAll({}), absl::StatusCode::kInvalidArgument, {"no input"});
}

// Writes the documents with an even line number (the first and the third of kLines).
absl::Status KeepSome(const std::vector<std::string>& inputs, const std::string& out, bool commit) {
  ASSIGN_OR_RETURN(auto in, CorpusStream::Open(inputs));
  ASSIGN_OR_RETURN(auto w, CorpusWriter::Open(*in, out));
  Document d;
  for (int i = 0;; ++i) {
    ASSIGN_OR_RETURN(const bool more, in->Next(d));
    if (!more) break;
    if (i % 2 == 0) RETURN_IF_ERROR(w->Write(*in));
  }
  return commit ? w->Commit() : absl::OkStatus();
}

// The survivors keep their lines as they were (the "url" field too) and the input's codec; until Commit
// nothing is at OUT, and a writer dropped without Commit leaves nothing behind.
TEST(CorpusWriter, SameFormAndOnlyWhenComplete) {
  const std::string dir = TmpDir("writer");
  WriteFile(dir + "/in.jsonl.zst", kLines, Codec::kZstd);
  ASSERT_TRUE(KeepSome({dir + "/in.jsonl.zst"}, dir + "/dropped.jsonl.zst", false).ok());
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  ASSERT_TRUE(KeepSome({dir + "/in.jsonl.zst"}, dir + "/out.jsonl.zst", true).ok());
  const Read r = ReadAll({dir + "/out.jsonl.zst"});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.docs.size(), 2u);
  EXPECT_EQ(r.docs[1].text, "no id");
  auto again = CorpusStream::Open({dir + "/out.jsonl.zst"});
  Document d;
  ASSERT_TRUE((*again)->Next(d).ok());
  EXPECT_EQ((*again)->raw(), "{\"id\": \"a\", \"text\": \"alpha\", \"url\": \"x\"}");
  const absl::Status mismatch = KeepSome({dir + "/in.jsonl.zst"}, dir + "/out.jsonl", true);
  EXPECT_EQ(mismatch.code(), absl::StatusCode::kInvalidArgument) << mismatch;
}

// Shards in, a folder of shards out, named as the inputs (one with no survivor is there, empty); a folder
// in, a folder out with the kept files' names and bytes.
TEST(CorpusWriter, ShardsAndFolders) {
  const std::string dir = TmpDir("writer_shards");
  WriteFile(dir + "/p0.jsonl.gz", "{\"text\": \"a\"}\n", Codec::kGzip);
  WriteFile(dir + "/p1.jsonl", "{\"text\": \"b\"}\n", Codec::kPlain);
  WriteFile(dir + "/p2.jsonl.zst", "{\"text\": \"c\"}\n", Codec::kZstd);
  ASSERT_TRUE(
      KeepSome({dir + "/p0.jsonl.gz", dir + "/p1.jsonl", dir + "/p2.jsonl.zst"}, dir + "/out", true).ok());
  EXPECT_EQ(ReadAll({dir + "/out/p0.jsonl.gz"}).docs.size(), 1u);
  EXPECT_EQ(ReadAll({dir + "/out/p1.jsonl"}).docs.size(), 0u);
  EXPECT_EQ(ReadAll({dir + "/out/p2.jsonl.zst"}).docs.size(), 1u);
  const absl::Status exists = KeepSome({dir + "/p0.jsonl.gz", dir + "/p1.jsonl"}, dir + "/out", true);
  EXPECT_NE(exists.message().find("not empty"), std::string::npos) << exists;

  ASSERT_TRUE(KeepSome({"labs/dedup/testdata"}, dir + "/folder", true).ok());
  EXPECT_EQ(ReadBytes(dir + "/folder/a.txt"), ReadBytes("labs/dedup/testdata/a.txt"));
  EXPECT_FALSE(fs::exists(dir + "/folder/b.txt"));
  EXPECT_TRUE(fs::exists(dir + "/folder/c.txt"));
}

}  // namespace
}  // namespace distlab::dedup
