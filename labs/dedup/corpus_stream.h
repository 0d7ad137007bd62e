// Lab 3 (dedup), given; not graded: corpora read one document at a time and written back in their own form,
// for the streaming `dedup` and `gencorpus` (corpus_io.h reads a whole corpus into memory; this does not).
//
// Inputs: one folder of text files, or one or more JSON-lines shards, each plain (.jsonl), gzip (.gz, zlib)
// or zstd (.zst, libzstd), chosen by the file name's last extension. The conventions are corpus_io.h's: a
// folder's regular files in sorted name order (subfolders and hidden files ignored), one JSON object per line
// with a string "text", blank lines (only spaces, tabs, '\r') skipped but counted, and a document's name is
// its file name, its "id" (a string as it is, any other value as its JSON text), or else its line number.
// With more than one shard a line number alone would repeat, so a document without "id" is named
// "<shard file name>:<line>" there.
//
// Errors name the shard and the line: a line that is not JSON, a line without a string "text", a gzip or
// zstd stream that ends before its end (a truncated shard), a shard that cannot be opened or read.
// Output appears only when complete: the writer writes under a temporary name beside OUT and renames it to
// OUT in Commit(); destroyed without Commit, it removes what it wrote.
// Several readers (ranks) split a corpus by whole files (Open's `part`). Left out: byte ranges of one shard
// (several readers of one file), remote storage.
#ifndef DISTLAB_LABS_DEDUP_CORPUS_STREAM_H_
#define DISTLAB_LABS_DEDUP_CORPUS_STREAM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "labs/dedup/corpus_io.h"

namespace distlab::dedup {

enum class Codec { kPlain, kGzip, kZstd };

// By the name's last extension: ".gz" -> gzip, ".zst" -> zstd, anything else -> plain.
Codec CodecOf(std::string_view path);

// Bytes out of one file, decompressed as its codec says.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Up to `cap` bytes into `buf`; 0 at the end. A compressed stream that stops before its end is
  // DataLoss ("truncated"); a corrupt one is DataLoss naming the library's message.
  virtual absl::StatusOr<size_t> Read(char* buf, size_t cap) = 0;
  // Bytes of the file consumed so far (compressed bytes for gzip and zstd): progress against its size.
  virtual int64_t consumed() const = 0;
};
absl::StatusOr<std::unique_ptr<ByteSource>> OpenByteSource(const std::string& path);

// Bytes into one file, compressed as `codec` says (gzip at level 1 and zstd at level 3: speed over ratio).
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual absl::Status Write(std::string_view bytes) = 0;
  virtual absl::Status Close() = 0;  // flushes the stream's end; the file is complete after it
};
absl::StatusOr<std::unique_ptr<ByteSink>> OpenByteSink(const std::string& path, Codec codec);

// One document at a time from a corpus.
class CorpusStream {
 public:
  // `inputs`: one folder, or one or more JSON-lines shards (read in the order given). Errors: no input, a
  // path that does not exist (NotFound), a folder among shards or more than one folder (InvalidArgument).
  // With parts > 1 the stream reads only share `part` of the corpus: of its S files (the shards, or the
  // folder's files), those of [part S / parts, (part + 1) S / parts) -- contiguous, so the shares in order
  // are the corpus in order; a share may be empty. Everything else (names, shards(), the writer's form) is
  // the whole corpus's, so a document is named alike in every share and in the whole.
  static absl::StatusOr<std::unique_ptr<CorpusStream>> Open(const std::vector<std::string>& inputs,
                                                            int part = 0, int parts = 1);
  ~CorpusStream();

  // The next document into `doc`; false at the end of the corpus. Errors (InvalidArgument or DataLoss)
  // begin with Where(): "docs.jsonl.gz line 12: ...". With parse = false only raw() is set: a JSON line is
  // not parsed (so not checked), for a pass that has read the same input before.
  absl::StatusOr<bool> Next(Document& doc, bool parse = true);

  CorpusFormat format() const { return format_; }
  const std::vector<std::string>& shards() const { return shards_; }  // a folder's files, or the shards
  int shard() const { return shard_; }              // index into shards() of the last document
  int first_shard() const { return first_shard_; }  // this share: shards() [first_shard, end_shard)
  int end_shard() const { return end_shard_; }
  int64_t line() const { return line_; }  // its line in that shard (JSON lines; 0 for a folder)
  std::string Where() const;              // "<shard> line <n>" or "<folder>/<file>"
  // The last document as stored: its JSON line (without '\n') or its file's bytes. The writer copies it,
  // so fields other than "id" and "text" survive.
  const std::string& raw() const { return raw_; }
  // Progress: bytes of the input files consumed (compressed where they are) and their total size.
  int64_t bytes_done() const;
  int64_t bytes_total() const { return bytes_total_; }

 private:
  CorpusStream() = default;
  absl::Status OpenShard(int s);
  absl::StatusOr<bool> NextLine();

  CorpusFormat format_ = CorpusFormat::kJsonLines;
  std::string folder_;
  std::vector<std::string> shards_;
  int shard_ = -1;
  int first_shard_ = 0, end_shard_ = 0;
  int64_t line_ = 0;
  std::string raw_;
  int64_t bytes_total_ = 0;
  int64_t bytes_before_ = 0;  // sizes of the shards already finished
  std::unique_ptr<ByteSource> source_;
  std::string buf_;  // decompressed bytes not yet returned as lines: buf_[pos_, end)
  size_t pos_ = 0;
  bool source_done_ = false;
};

// The survivors of a CorpusStream, in its form: a folder (each file keeps its name and bytes) for a folder;
// the file OUT in the shard's codec for one shard; the folder OUT with one file per shard, named as the
// shard, for several. Errors at Open: OUT's extension names another codec than the input's
// (InvalidArgument), OUT is an existing folder that is not empty, two shards share a file name.
class CorpusWriter {
 public:
  static absl::StatusOr<std::unique_ptr<CorpusWriter>> Open(const CorpusStream& input,
                                                            const std::string& out);
  // Open's checks of OUT against the input, writing nothing.
  static absl::Status CheckOutput(const CorpusStream& input, const std::string& out);
  // For one share of a corpus that several ranks read (CorpusStream::Open's `part`): the share's files go
  // into `tmp`, under their own names -- the folder the caller made, when OUT is a folder; the file `tmp`
  // itself when OUT is one file (written by the share that holds the one shard; the others write nothing).
  // Commit closes them and renames nothing: once every share has committed, the caller renames `tmp` to
  // OUT. Destroyed without Commit, it leaves `tmp` to the caller to remove.
  static absl::StatusOr<std::unique_ptr<CorpusWriter>> OpenShare(const CorpusStream& input,
                                                                 const std::string& out,
                                                                 const std::string& tmp);
  ~CorpusWriter();  // without Commit: removes the temporary output

  // Writes the document `input` returned last, as stored (CorpusStream::raw).
  absl::Status Write(const CorpusStream& input);
  // Closes every file (shards with no survivor are written empty) and renames the temporary output to OUT.
  absl::Status Commit();

 private:
  CorpusWriter() = default;
  absl::Status SwitchTo(int shard);

  const CorpusStream* input_ = nullptr;
  std::string out_, tmp_;
  bool folder_out_ = false, committed_ = false, share_ = false;
  int shard_ = -1;
  std::unique_ptr<ByteSink> sink_;
};

}  // namespace distlab::dedup

#endif  // DISTLAB_LABS_DEDUP_CORPUS_STREAM_H_
