// Lab 3 (dedup), given; not graded: streamed corpora and their codecs (see corpus_stream.h).
#include "labs/dedup/corpus_stream.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "reference/base/status.h"
#include "zlib.h"
#include "zstd.h"

namespace distlab::dedup {

namespace fs = std::filesystem;

namespace {

constexpr size_t kChunk = 1 << 20;  // bytes read or written at a time

std::string Errno() { return std::strerror(errno); }

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// A file descriptor read in chunks; the base of every source.
class FileReader {
 public:
  ~FileReader() {
    if (fd_ >= 0) close(fd_);
  }
  absl::Status Open(const std::string& path) {
    path_ = path;
    fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", Errno()));
    return absl::OkStatus();
  }
  absl::StatusOr<size_t> Read(char* buf, size_t cap) {
    for (;;) {
      const ssize_t got = read(fd_, buf, cap);
      if (got >= 0) {
        consumed_ += got;
        return static_cast<size_t>(got);
      }
      if (errno != EINTR) return absl::DataLossError(absl::StrCat("cannot read ", path_, ": ", Errno()));
    }
  }
  int64_t consumed() const { return consumed_; }
  // Reads go on from byte `offset` of the file (consumed() counts from there).
  absl::Status Seek(int64_t offset) {
    if (lseek(fd_, static_cast<off_t>(offset), SEEK_SET) < 0)
      return absl::DataLossError(absl::StrCat("cannot seek in ", path_, ": ", Errno()));
    return absl::OkStatus();
  }

 private:
  std::string path_;
  int fd_ = -1;
  int64_t consumed_ = 0;
};

class PlainSource : public ByteSource {
 public:
  absl::Status Open(const std::string& path, int64_t from = 0) {
    RETURN_IF_ERROR(file_.Open(path));
    return from > 0 ? file_.Seek(from) : absl::OkStatus();
  }
  absl::StatusOr<size_t> Read(char* buf, size_t cap) override { return file_.Read(buf, cap); }
  int64_t consumed() const override { return file_.consumed(); }

 private:
  FileReader file_;
};

// gzip (or zlib) members one after another, as `cat a.gz b.gz` makes them.
class GzipSource : public ByteSource {
 public:
  ~GzipSource() override { inflateEnd(&z_); }
  absl::Status Open(const std::string& path) {
    if (inflateInit2(&z_, 15 + 32) != Z_OK) return absl::InternalError("zlib: inflateInit2 failed");
    in_.resize(kChunk);
    return file_.Open(path);
  }
  absl::StatusOr<size_t> Read(char* buf, size_t cap) override {
    z_.next_out = reinterpret_cast<Bytef*>(buf);
    z_.avail_out = static_cast<uInt>(cap);
    while (z_.avail_out == cap) {
      if (z_.avail_in == 0 && !pending_) {
        ASSIGN_OR_RETURN(const size_t got, file_.Read(in_.data(), in_.size()));
        if (got == 0) {
          if (in_member_) return absl::DataLossError("truncated: the gzip stream ends before its end");
          return size_t{0};
        }
        z_.next_in = reinterpret_cast<Bytef*>(in_.data());
        z_.avail_in = static_cast<uInt>(got);
      }
      if (!in_member_) {  // the start of another member
        if (inflateReset(&z_) != Z_OK) return absl::InternalError("zlib: inflateReset failed");
        in_member_ = true;
      }
      const int rc = inflate(&z_, Z_NO_FLUSH);
      pending_ = z_.avail_out == 0;  // a full buffer: zlib may hold more output without more input
      if (rc == Z_STREAM_END) {
        in_member_ = false;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return absl::DataLossError(absl::StrCat("corrupt gzip data: ", z_.msg ? z_.msg : zError(rc)));
      }
    }
    return cap - z_.avail_out;
  }
  int64_t consumed() const override { return file_.consumed() - z_.avail_in; }

 private:
  FileReader file_;
  z_stream z_{};
  std::string in_;
  bool in_member_ = false;
  bool pending_ = false;
};

// zstd frames one after another.
class ZstdSource : public ByteSource {
 public:
  ~ZstdSource() override { ZSTD_freeDStream(d_); }
  absl::Status Open(const std::string& path) {
    d_ = ZSTD_createDStream();
    if (d_ == nullptr) return absl::InternalError("zstd: ZSTD_createDStream failed");
    in_.resize(ZSTD_DStreamInSize());
    return file_.Open(path);
  }
  absl::StatusOr<size_t> Read(char* buf, size_t cap) override {
    ZSTD_outBuffer out{buf, cap, 0};
    while (out.pos == 0) {
      if (input_.pos == input_.size && !pending_) {
        ASSIGN_OR_RETURN(const size_t got, file_.Read(in_.data(), in_.size()));
        if (got == 0) {
          if (in_frame_) return absl::DataLossError("truncated: the zstd stream ends before its end");
          return size_t{0};
        }
        input_ = ZSTD_inBuffer{in_.data(), got, 0};
      }
      const size_t rc = ZSTD_decompressStream(d_, &out, &input_);
      if (ZSTD_isError(rc)) {
        return absl::DataLossError(absl::StrCat("corrupt zstd data: ", ZSTD_getErrorName(rc)));
      }
      in_frame_ = rc != 0;             // 0: a frame just ended
      pending_ = out.pos == out.size;  // a full buffer: zstd may hold more output without more input
    }
    return out.pos;
  }
  int64_t consumed() const override {
    return file_.consumed() - static_cast<int64_t>(input_.size - input_.pos);
  }

 private:
  FileReader file_;
  ZSTD_DStream* d_ = nullptr;
  std::string in_;
  ZSTD_inBuffer input_{nullptr, 0, 0};
  bool in_frame_ = false;
  bool pending_ = false;
};

class FileWriter {
 public:
  ~FileWriter() {
    if (fd_ >= 0) close(fd_);
  }
  absl::Status Open(const std::string& path) {
    path_ = path;
    fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) return absl::InternalError(absl::StrCat("cannot create ", path, ": ", Errno()));
    return absl::OkStatus();
  }
  absl::Status Write(const char* data, size_t size) {
    while (size > 0) {
      const ssize_t put = write(fd_, data, size);
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) return absl::ResourceExhaustedError(absl::StrCat("cannot write ", path_, ": ", Errno()));
      data += put, size -= put;
    }
    return absl::OkStatus();
  }
  absl::Status Close() {
    const int rc = close(fd_);
    fd_ = -1;
    if (rc != 0) return absl::ResourceExhaustedError(absl::StrCat("cannot write ", path_, ": ", Errno()));
    return absl::OkStatus();
  }

 private:
  std::string path_;
  int fd_ = -1;
};

class PlainSink : public ByteSink {
 public:
  absl::Status Open(const std::string& path) { return file_.Open(path); }
  absl::Status Write(std::string_view bytes) override {
    buf_.append(bytes);
    if (buf_.size() >= kChunk) return Flush();
    return absl::OkStatus();
  }
  absl::Status Close() override {
    RETURN_IF_ERROR(Flush());
    return file_.Close();
  }

 private:
  absl::Status Flush() {
    RETURN_IF_ERROR(file_.Write(buf_.data(), buf_.size()));
    buf_.clear();
    return absl::OkStatus();
  }
  FileWriter file_;
  std::string buf_;
};

class GzipSink : public ByteSink {
 public:
  ~GzipSink() override { deflateEnd(&z_); }
  absl::Status Open(const std::string& path) {
    if (deflateInit2(&z_, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      return absl::InternalError("zlib: deflateInit2 failed");
    }
    out_.resize(kChunk);
    return file_.Open(path);
  }
  absl::Status Write(std::string_view bytes) override { return Deflate(bytes, Z_NO_FLUSH); }
  absl::Status Close() override {
    RETURN_IF_ERROR(Deflate({}, Z_FINISH));
    return file_.Close();
  }

 private:
  absl::Status Deflate(std::string_view bytes, int flush) {
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    z_.avail_in = static_cast<uInt>(bytes.size());
    int rc = Z_OK;
    do {
      z_.next_out = reinterpret_cast<Bytef*>(out_.data());
      z_.avail_out = static_cast<uInt>(out_.size());
      rc = deflate(&z_, flush);
      if (rc == Z_STREAM_ERROR) return absl::InternalError("zlib: deflate failed");
      RETURN_IF_ERROR(file_.Write(out_.data(), out_.size() - z_.avail_out));
    } while (z_.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
    return absl::OkStatus();
  }
  FileWriter file_;
  z_stream z_{};
  std::string out_;
};

class ZstdSink : public ByteSink {
 public:
  ~ZstdSink() override { ZSTD_freeCCtx(c_); }
  absl::Status Open(const std::string& path) {
    c_ = ZSTD_createCCtx();
    if (c_ == nullptr) return absl::InternalError("zstd: ZSTD_createCCtx failed");
    ZSTD_CCtx_setParameter(c_, ZSTD_c_compressionLevel, 3);
    out_.resize(ZSTD_CStreamOutSize());
    return file_.Open(path);
  }
  absl::Status Write(std::string_view bytes) override { return Compress(bytes, ZSTD_e_continue); }
  absl::Status Close() override {
    RETURN_IF_ERROR(Compress({}, ZSTD_e_end));
    return file_.Close();
  }

 private:
  absl::Status Compress(std::string_view bytes, ZSTD_EndDirective mode) {
    ZSTD_inBuffer in{bytes.data(), bytes.size(), 0};
    for (;;) {
      ZSTD_outBuffer out{out_.data(), out_.size(), 0};
      const size_t left = ZSTD_compressStream2(c_, &out, &in, mode);
      if (ZSTD_isError(left)) return absl::InternalError(absl::StrCat("zstd: ", ZSTD_getErrorName(left)));
      RETURN_IF_ERROR(file_.Write(out_.data(), out.pos));
      if (mode == ZSTD_e_end ? left == 0 : in.pos == in.size) return absl::OkStatus();
    }
  }
  FileWriter file_;
  ZSTD_CCtx* c_ = nullptr;
  std::string out_;
};

template <typename T>
absl::StatusOr<std::unique_ptr<T>> Opened(std::unique_ptr<T> x, const std::string& path) {
  RETURN_IF_ERROR(x->Open(path));
  return x;
}

}  // namespace

Codec CodecOf(std::string_view path) {
  if (EndsWith(path, ".gz")) return Codec::kGzip;
  if (EndsWith(path, ".zst")) return Codec::kZstd;
  return Codec::kPlain;
}

absl::StatusOr<std::unique_ptr<ByteSource>> OpenByteSource(const std::string& path) {
  switch (CodecOf(path)) {
    case Codec::kGzip: {
      ASSIGN_OR_RETURN(auto s, Opened(std::make_unique<GzipSource>(), path));
      return std::unique_ptr<ByteSource>(std::move(s));
    }
    case Codec::kZstd: {
      ASSIGN_OR_RETURN(auto s, Opened(std::make_unique<ZstdSource>(), path));
      return std::unique_ptr<ByteSource>(std::move(s));
    }
    case Codec::kPlain:
      break;
  }
  ASSIGN_OR_RETURN(auto s, Opened(std::make_unique<PlainSource>(), path));
  return std::unique_ptr<ByteSource>(std::move(s));
}

absl::StatusOr<std::unique_ptr<ByteSink>> OpenByteSink(const std::string& path, Codec codec) {
  switch (codec) {
    case Codec::kGzip: {
      ASSIGN_OR_RETURN(auto s, Opened(std::make_unique<GzipSink>(), path));
      return std::unique_ptr<ByteSink>(std::move(s));
    }
    case Codec::kZstd: {
      ASSIGN_OR_RETURN(auto s, Opened(std::make_unique<ZstdSink>(), path));
      return std::unique_ptr<ByteSink>(std::move(s));
    }
    case Codec::kPlain:
      break;
  }
  ASSIGN_OR_RETURN(auto s, Opened(std::make_unique<PlainSink>(), path));
  return std::unique_ptr<ByteSink>(std::move(s));
}

// ------------------------------------------------------------------------------------------ CorpusStream

absl::StatusOr<std::unique_ptr<CorpusStream>> CorpusStream::Open(const std::vector<std::string>& inputs,
                                                                 int part, int parts) {
  if (inputs.empty()) return absl::InvalidArgumentError("no input: give a folder or JSON-lines shards");
  if (parts < 1 || part < 0 || part >= parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("share ", part, " of ", parts, ": need 0 <= part < parts"));
  }
  std::unique_ptr<CorpusStream> s(new CorpusStream);
  for (const std::string& path : inputs) {
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (ec || !fs::exists(st))
      return absl::NotFoundError(absl::StrCat("corpus path ", path, " does not exist"));
    if (fs::is_directory(st) && inputs.size() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " is a folder: give one folder of text files, or JSON-lines shards"));
    }
  }
  if (fs::is_directory(inputs[0])) {
    s->format_ = CorpusFormat::kFolder;
    s->folder_ = inputs[0];
    for (const fs::directory_entry& e : fs::directory_iterator(inputs[0])) {
      const std::string name = e.path().filename().string();
      if (e.is_regular_file() && !name.empty() && name[0] != '.') s->shards_.push_back(e.path().string());
    }
    std::sort(s->shards_.begin(), s->shards_.end());
  } else {
    s->shards_ = inputs;
  }
  s->part_ = part, s->parts_ = parts;
  const int64_t files = static_cast<int64_t>(s->shards_.size());
  if (parts > 1 && files == 1 && s->format_ == CorpusFormat::kJsonLines &&
      CodecOf(s->shards_[0]) == Codec::kPlain) {
    std::error_code ec;
    const auto size = fs::file_size(s->shards_[0], ec);
    if (ec)
      return absl::NotFoundError(absl::StrCat("cannot read the size of ", s->shards_[0], ": ", ec.message()));
    const int64_t bytes = static_cast<int64_t>(size);
    s->range_begin_ = bytes * part / parts;
    s->range_end_ = bytes * (part + 1) / parts;
    s->first_shard_ = 0, s->end_shard_ = 1, s->shard_ = -1;
    s->bytes_total_ = s->range_end_ - s->range_begin_;
    return s;
  }
  s->first_shard_ = static_cast<int>(files * part / parts);
  s->end_shard_ = static_cast<int>(files * (part + 1) / parts);
  s->shard_ = s->first_shard_ - 1;
  for (int f = s->first_shard_; f < s->end_shard_; ++f) {
    std::error_code ec;
    const auto size = fs::file_size(s->shards_[f], ec);
    if (!ec) s->bytes_total_ += static_cast<int64_t>(size);
  }
  return s;
}

CorpusStream::~CorpusStream() = default;

std::string CorpusStream::Where() const { return Where(shard_, line_); }

std::string CorpusStream::Where(int shard, int64_t share_line) const {
  if (shard < first_shard_ || shard >= end_shard_) {
    return format_ == CorpusFormat::kFolder || shards_.empty() ? folder_ : shards_.front();
  }
  if (format_ == CorpusFormat::kFolder) return shards_[shard];
  if (!byte_range()) return absl::StrCat(shards_[shard], " line ", share_line);
  const int64_t before = LinesBefore();
  if (before < 0) {  // the count failed: say where the share begins instead
    return absl::StrCat(shards_[shard], " line ", share_line, " of the share that begins at byte ",
                        first_line_);
  }
  return absl::StrCat(shards_[shard], " line ", before + share_line);
}

int64_t CorpusStream::line() const {
  if (!byte_range()) return line_;
  const int64_t before = LinesBefore();
  return before < 0 ? line_ : before + line_;
}

int64_t CorpusStream::LinesBefore() const {
  if (!byte_range() || first_line_ == 0) return 0;
  if (lines_before_ != -2) return lines_before_;
  lines_before_ = -1;
  FileReader file;
  if (!file.Open(shards_[0]).ok()) return -1;
  std::string chunk(kChunk, '\0');
  int64_t lines = 0;
  for (int64_t left = first_line_; left > 0;) {
    absl::StatusOr<size_t> got =
        file.Read(chunk.data(), static_cast<size_t>(std::min<int64_t>(left, kChunk)));
    if (!got.ok() || *got == 0) return -1;
    lines += std::count(chunk.data(), chunk.data() + *got, '\n');
    left -= static_cast<int64_t>(*got);
  }
  return lines_before_ = lines;
}

int64_t CorpusStream::bytes_done() const {
  const int64_t done = bytes_before_ + (source_ ? source_->consumed() : 0);
  return byte_range() ? std::min(done, bytes_total_) : done;  // the last line may run past the share
}

absl::Status CorpusStream::OpenShard(int s) {
  if (source_) bytes_before_ += source_->consumed();
  source_.reset();
  shard_ = s;
  line_ = 0;
  buf_.clear();
  pos_ = 0;
  source_done_ = false;
  if (byte_range()) {
    // From the byte before the range: if it ends a line, the share's first line begins at range_begin_.
    auto plain = std::make_unique<PlainSource>();
    buf_offset_ = std::max<int64_t>(0, range_begin_ - 1);
    seeking_ = range_begin_ > 0;
    first_line_ = range_begin_;
    RETURN_IF_ERROR(plain->Open(shards_[s], buf_offset_));
    source_ = std::move(plain);
    return absl::OkStatus();
  }
  auto source = OpenByteSource(shards_[s]);
  if (!source.ok()) return absl::Status(source.status().code(), source.status().message());
  source_ = std::move(*source);
  return absl::OkStatus();
}

// The next line of the open shard into raw_ (without '\n'); false at the shard's end. A last line without
// '\n' is a line.
absl::StatusOr<bool> CorpusStream::NextLine() {
  for (;;) {
    if (seeking_) {  // a byte-range share skips the rest of the line its range begins in
      const size_t nl = buf_.find('\n', pos_);
      pos_ = nl == std::string::npos ? buf_.size() : nl + 1;
      seeking_ = nl == std::string::npos;
      first_line_ = buf_offset_ + static_cast<int64_t>(pos_);
    }
    // A byte-range share ends at the first line that begins past its range: that line is the next share's.
    if (!seeking_ && byte_range() && buf_offset_ + static_cast<int64_t>(pos_) >= range_end_) return false;
    const size_t nl = seeking_ ? std::string::npos : buf_.find('\n', pos_);
    if (nl != std::string::npos || (!seeking_ && source_done_ && pos_ < buf_.size())) {
      const size_t end = nl == std::string::npos ? buf_.size() : nl;
      raw_.assign(buf_, pos_, end - pos_);
      pos_ = nl == std::string::npos ? buf_.size() : nl + 1;
      ++line_;
      return true;
    }
    if (source_done_) return false;
    buf_offset_ += static_cast<int64_t>(pos_);
    buf_.erase(0, pos_);
    pos_ = 0;
    const size_t had = buf_.size();
    buf_.resize(had + kChunk);
    absl::StatusOr<size_t> got = source_->Read(buf_.data() + had, kChunk);
    if (!got.ok()) {
      return absl::DataLossError(
          absl::StrCat(shards_[shard_], " after line ", line_, ": ", got.status().message()));
    }
    buf_.resize(had + *got);
    source_done_ = *got == 0;
  }
}

namespace {

// The usual corpus line, read without building a JSON tree: one object whose values are strings (UTF-8,
// the two-character escapes), integers, true, false or null, with a string "text" and perhaps an "id" that
// is a string or an integer without a sign, neither key twice and no key with an escape. Any other line --
// \u escapes, numbers with a fraction, nested values, and every line that is not valid JSON -- is not
// "usual" and goes to nlohmann, so what a line gives (its document or its error) is nlohmann's either way.
// The scanner accepts only what nlohmann accepts and decodes what it accepts as nlohmann does.
class UsualLine {
 public:
  // False when the line is not of the usual shape (nothing is decoded then).
  bool Scan(std::string_view line) {
    p_ = line.data(), end_ = line.data() + line.size();
    bool has_text = false;
    has_id_ = false;
    if (!Eat('{')) return false;
    do {
      std::string_view key, raw;
      bool key_escaped = false, string = false, escaped = false;
      if (!String(key, key_escaped) || key_escaped || !Eat(':')) return false;
      SkipSpace();
      if (p_ < end_ && *p_ == '"') {
        if (!String(raw, escaped)) return false;
        string = true;
      } else if (!Integer(raw) && !Literal("true") && !Literal("false") && !Literal("null")) {
        return false;
      }
      if (key == "text") {
        if (has_text || !string) return false;
        has_text = true, text_ = raw, text_escaped_ = escaped;
      } else if (key == "id") {
        if (has_id_ || (!string && (raw.empty() || raw[0] == '-'))) return false;  // "-0" reads as 0
        has_id_ = true, id_ = raw, id_escaped_ = escaped, id_is_string_ = string;
      }
    } while (Eat(','));
    if (!Eat('}')) return false;
    SkipSpace();
    return p_ == end_ && has_text;
  }
  void Text(std::string& out) const { Decode(text_, text_escaped_, out); }
  bool has_id() const { return has_id_; }
  void Id(std::string& out) const {
    if (id_is_string_) return Decode(id_, id_escaped_, out);
    out.assign(id_.data(), id_.size());  // the digits of an integer, as nlohmann's dump() writes them
  }

 private:
  void SkipSpace() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\r' || *p_ == '\n')) ++p_;
  }
  bool Eat(char c) {
    SkipSpace();
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }
  // A string's bytes between its quotes, undecoded.
  bool String(std::string_view& raw, bool& escaped) {
    if (!Eat('"')) return false;
    const char* begin = p_;
    escaped = false;
    while (p_ < end_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        raw = std::string_view(begin, p_++ - begin);
        return true;
      }
      if (c == '\\') {
        if (p_ + 1 == end_ || Unescaped(p_[1]) == 0) return false;  // \u or a bad escape: not usual
        escaped = true, p_ += 2;
      } else if (c < 0x20) {
        return false;  // a control character must be escaped
      } else if (c < 0x80) {
        ++p_;
      } else {
        const int n = Utf8Length();
        if (n == 0) return false;
        p_ += n;
      }
    }
    return false;
  }
  // An integer as JSON writes them: -?(0|[1-9][0-9]*), not followed by a fraction or an exponent (what
  // follows must be ',', '}' or white space, which Scan checks).
  bool Integer(std::string_view& raw) {
    const char* begin = p_;
    if (p_ < end_ && *p_ == '-') ++p_;
    if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
    if (*p_++ != '0') {
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    raw = std::string_view(begin, p_ - begin);
    return raw.size() <= 19;  // within uint64, so nlohmann keeps it an integer
  }
  bool Literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word)
      return false;
    p_ += word.size();
    return true;
  }
  // The length of the well-formed UTF-8 sequence at p_ (the table of the Unicode standard, §3.9, which
  // nlohmann checks too), or 0.
  int Utf8Length() const {
    const auto* s = reinterpret_cast<const unsigned char*>(p_);
    const ptrdiff_t left = end_ - p_;
    auto in = [&](int i, unsigned lo, unsigned hi) { return i < left && s[i] >= lo && s[i] <= hi; };
    const unsigned c = s[0];
    if (c >= 0xC2 && c <= 0xDF) return in(1, 0x80, 0xBF) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
      const unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
      return in(1, lo, hi) && in(2, 0x80, 0xBF) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
      const unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
      return in(1, lo, hi) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
    }
    return 0;
  }
  // The byte of the escape \c, or 0 for one the scanner does not decode.
  static char Unescaped(char c) {
    switch (c) {
      case '"':
      case '\\':
      case '/':
        return c;
      case 'b':
        return '\b';
      case 'f':
        return '\f';
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      default:
        return 0;
    }
  }
  static void Decode(std::string_view raw, bool escaped, std::string& out) {
    if (!escaped) return static_cast<void>(out.assign(raw.data(), raw.size()));
    out.clear();
    out.reserve(raw.size());  // decoding only shortens: one allocation at most
    for (size_t at = 0;;) {
      const size_t slash = raw.find('\\', at);
      out.append(raw.data() + at, (slash == std::string_view::npos ? raw.size() : slash) - at);
      if (slash == std::string_view::npos) return;
      out += Unescaped(raw[slash + 1]);
      at = slash + 2;
    }
  }

  const char* p_ = nullptr;
  const char* end_ = nullptr;
  std::string_view text_, id_;
  bool text_escaped_ = false, id_escaped_ = false, id_is_string_ = false, has_id_ = false;
};

}  // namespace

absl::StatusOr<bool> CorpusStream::Next(Document& doc, bool parse) {
  if (format_ == CorpusFormat::kFolder) {
    if (shard_ + 1 >= end_shard_) return false;
    RETURN_IF_ERROR(OpenShard(shard_ + 1));
    raw_.clear();
    char chunk[1 << 16];
    for (;;) {
      absl::StatusOr<size_t> got = source_->Read(chunk, sizeof(chunk));
      if (!got.ok()) return got.status();
      if (*got == 0) break;
      raw_.append(chunk, *got);
    }
    if (!parse) return true;
    doc.name = fs::path(shards_[shard_]).filename().string();
    doc.text = raw_;
    return true;
  }
  for (;;) {
    if (!source_) {
      if (shard_ + 1 >= end_shard_) return false;
      RETURN_IF_ERROR(OpenShard(shard_ + 1));
    }
    ASSIGN_OR_RETURN(const bool more, NextLine());
    if (!more) {
      if (shard_ + 1 >= end_shard_) return false;
      RETURN_IF_ERROR(OpenShard(shard_ + 1));
      continue;
    }
    if (raw_.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (!parse) return true;
    const auto line_name = [&] {  // the name of a document without "id"
      return shards_.size() == 1 ? std::to_string(line())
                                 : absl::StrCat(fs::path(shards_[shard_]).filename().string(), ":", line_);
    };
    if (UsualLine usual; usual.Scan(raw_)) {  // most lines: no JSON tree (UsualLine)
      usual.Text(doc.text);
      if (usual.has_id()) {
        usual.Id(doc.name);
      } else {
        doc.name = line_name();
      }
      return true;
    }
    const nlohmann::json j = nlohmann::json::parse(raw_, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(Where(), ": not valid JSON"));
    const auto text = j.is_object() ? j.find("text") : j.end();
    if (!j.is_object() || text == j.end() || !text->is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(), ": expected a JSON object with a string field \"text\""));
    }
    doc.text = text->get<std::string>();
    const auto id = j.find("id");
    if (id != j.end()) {
      doc.name = id->is_string() ? id->get<std::string>() : id->dump();
    } else {
      doc.name = line_name();
    }
    return true;
  }
}

// ------------------------------------------------------------------------------------------ CorpusWriter

namespace {

bool FolderOut(const CorpusStream& input) {
  return input.format() == CorpusFormat::kFolder || input.shards().size() > 1;
}

}  // namespace

absl::Status CorpusWriter::CheckOutput(const CorpusStream& input, const std::string& out) {
  std::error_code ec;
  if (FolderOut(input)) {
    if (fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec))) {
      return absl::InvalidArgumentError(
          absl::StrCat("output folder ", out, " exists and is not empty: remove it or choose another"));
    }
    if (input.format() == CorpusFormat::kJsonLines) {
      std::set<std::string> names;
      for (const std::string& s : input.shards()) {
        if (!names.insert(fs::path(s).filename().string()).second) {
          return absl::InvalidArgumentError(absl::StrCat(
              "two shards are named ", fs::path(s).filename().string(), ": their outputs would collide"));
        }
      }
    }
  } else if (CodecOf(out) != CodecOf(input.shards()[0])) {
    return absl::InvalidArgumentError(absl::StrCat("output ", out,
                                                   " names another compression than the input ",
                                                   input.shards()[0], ": give OUT the input's extension"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CorpusWriter>> CorpusWriter::Open(const CorpusStream& input,
                                                                 const std::string& out) {
  RETURN_IF_ERROR(CheckOutput(input, out));
  std::unique_ptr<CorpusWriter> w(new CorpusWriter);
  w->input_ = &input;
  w->out_ = out;
  w->folder_out_ = FolderOut(input);
  std::error_code ec;
  w->tmp_ = absl::StrCat(out, ".tmp-", getpid());
  fs::remove_all(w->tmp_, ec);
  if (w->folder_out_ && !fs::create_directories(w->tmp_, ec)) {
    return absl::InternalError(absl::StrCat("cannot create folder ", w->tmp_, ": ", ec.message()));
  }
  if (!w->folder_out_) {
    ASSIGN_OR_RETURN(w->sink_, OpenByteSink(w->tmp_, CodecOf(out)));
    w->shard_ = 0;
  }
  return w;
}

absl::StatusOr<std::unique_ptr<CorpusWriter>> CorpusWriter::OpenShare(const CorpusStream& input,
                                                                      const std::string& out,
                                                                      const std::string& tmp) {
  RETURN_IF_ERROR(CheckOutput(input, out));
  std::unique_ptr<CorpusWriter> w(new CorpusWriter);
  w->input_ = &input;
  w->out_ = out;
  w->tmp_ = tmp;
  w->share_ = true;
  w->folder_out_ = FolderOut(input);
  w->shard_ = input.first_shard() - 1;
  if (!w->folder_out_ && input.end_shard() > input.first_shard()) {
    ASSIGN_OR_RETURN(w->sink_, OpenByteSink(ShareFile(input, tmp), CodecOf(out)));
    w->shard_ = 0;
  }
  return w;
}

std::string CorpusWriter::ShareFile(const CorpusStream& input, const std::string& tmp) {
  return input.byte_range() && input.part() > 0 ? absl::StrCat(tmp, ".", input.part()) : tmp;
}

absl::Status CorpusWriter::JoinShares(const CorpusStream& input, const std::string& tmp) {
  if (!input.byte_range()) return absl::OkStatus();
  // Plain bytes (a byte-range share is of a plain shard), so appending the files is joining the texts.
  const int fd = open(tmp.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot open ", tmp, " to append: ", Errno()));
  std::string chunk(kChunk, '\0');
  absl::Status status;
  for (int part = 1; part < input.parts() && status.ok(); ++part) {
    const std::string name = absl::StrCat(tmp, ".", part);
    FileReader file;
    status = file.Open(name);
    while (status.ok()) {
      absl::StatusOr<size_t> got = file.Read(chunk.data(), chunk.size());
      if (!got.ok() || *got == 0) {
        status = got.status();
        break;
      }
      for (size_t at = 0; at < *got && status.ok();) {
        const ssize_t put = write(fd, chunk.data() + at, *got - at);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0)
          status = absl::ResourceExhaustedError(absl::StrCat("cannot append to ", tmp, ": ", Errno()));
        at += put > 0 ? static_cast<size_t>(put) : 0;
      }
    }
    std::error_code ec;
    if (status.ok()) fs::remove(name, ec);
  }
  if (close(fd) != 0 && status.ok())
    status = absl::InternalError(absl::StrCat("cannot close ", tmp, ": ", Errno()));
  return status;
}

CorpusWriter::~CorpusWriter() {
  if (committed_ || share_) return;
  sink_.reset();
  std::error_code ec;
  fs::remove_all(tmp_, ec);
}

absl::Status CorpusWriter::SwitchTo(int shard) {
  while (shard_ < shard) {
    if (sink_) RETURN_IF_ERROR(sink_->Close());
    ++shard_;
    const std::string& s = input_->shards()[shard_];
    ASSIGN_OR_RETURN(sink_, OpenByteSink((fs::path(tmp_) / fs::path(s).filename()).string(), CodecOf(s)));
  }
  return absl::OkStatus();
}

absl::Status CorpusWriter::Write(const CorpusStream& input) {
  if (input.format() == CorpusFormat::kFolder) {
    const std::string name = fs::path(input.shards()[input.shard()]).filename().string();
    ASSIGN_OR_RETURN(auto file, OpenByteSink((fs::path(tmp_) / name).string(), Codec::kPlain));
    RETURN_IF_ERROR(file->Write(input.raw()));
    return file->Close();
  }
  if (folder_out_) RETURN_IF_ERROR(SwitchTo(input.shard()));
  RETURN_IF_ERROR(sink_->Write(input.raw()));
  return sink_->Write("\n");
}

absl::Status CorpusWriter::Commit() {
  if (input_->format() == CorpusFormat::kJsonLines) {
    const int last = share_ ? input_->end_shard() - 1 : static_cast<int>(input_->shards().size()) - 1;
    if (folder_out_) RETURN_IF_ERROR(SwitchTo(last));
    if (sink_) RETURN_IF_ERROR(sink_->Close());
    sink_.reset();
  }
  if (share_) {
    committed_ = true;
    return absl::OkStatus();
  }
  std::error_code ec;
  if (folder_out_) fs::remove(out_, ec);  // an empty folder (checked at Open) gives way
  fs::rename(tmp_, out_, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot rename ", tmp_, " to ", out_, ": ", ec.message()));
  committed_ = true;
  return absl::OkStatus();
}

}  // namespace distlab::dedup
