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
// Several readers (ranks) split a corpus by whole files, or one plain shard by byte ranges (Open's `part`).
// Left out: byte ranges of a compressed shard (a gzip or zstd stream cannot be entered in the middle), remote
// storage.
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
  // are the corpus in order; a share may be empty. One plain shard (.jsonl, not compressed) is shared by its
  // bytes instead (byte_range()): of its B bytes, share `part` holds the lines whose first byte lies in
  // [part B / parts, (part + 1) B / parts). A line belongs to the share where it begins, so again the shares
  // in order are the corpus in order (a line longer than a share leaves that share empty). Everything else
  // (names, line numbers, shards(), the writer's form) is the whole corpus's, so a document is named alike in
  // every share and in the whole. A byte-range share that needs a line number (an error, or the name of a
  // document without "id") counts the lines before its first byte once, reading that part of the file.
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
  // Its line in that shard (JSON lines; 0 for a folder). share_line() counts from the share's first line
  // and costs nothing; line() is the file's line number (share_line() plus the lines before the share).
  int64_t line() const;
  int64_t share_line() const { return line_; }
  std::string Where() const;  // "<shard> line <n>" or "<folder>/<file>"
  // The same for a document read earlier: its shard() and share_line() then.
  std::string Where(int shard, int64_t share_line) const;
  // This stream is share part() of parts(); byte_range(): a share of one plain shard's bytes (see Open).
  int part() const { return part_; }
  int parts() const { return parts_; }
  bool byte_range() const { return range_end_ >= 0; }
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
  int64_t LinesBefore() const;  // lines of the shard before this share's first line; -1 if unreadable

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
  int part_ = 0, parts_ = 1;
  // A byte-range share: its bytes [range_begin_, range_end_) of the shard (range_end_ < 0: whole files).
  // buf_[0] is byte buf_offset_ of the shard; seeking_ until the end of the line that range_begin_ falls in
  // (the previous share's) has been passed; first_line_ is the byte where this share's first line begins.
  int64_t range_begin_ = 0, range_end_ = -1, buf_offset_ = 0, first_line_ = 0;
  bool seeking_ = false;
  mutable int64_t lines_before_ = -2;  // LinesBefore(), once counted (-2: not yet)
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
  // A byte-range share (CorpusStream::byte_range()) writes ShareFile(input, tmp) instead: `tmp` for share 0,
  // "<tmp>.<part>" for the others, which JoinShares then appends to `tmp` in order.
  static absl::StatusOr<std::unique_ptr<CorpusWriter>> OpenShare(const CorpusStream& input,
                                                                 const std::string& out,
                                                                 const std::string& tmp);
  static std::string ShareFile(const CorpusStream& input, const std::string& tmp);
  // Once every share has committed, by one caller: the byte-range shares' files appended to `tmp` in order
  // and removed, so `tmp` holds the survivors of the whole shard (nothing to do for whole-file shares).
  static absl::Status JoinShares(const CorpusStream& input, const std::string& tmp);
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
