// Lab 3 (dedup), given; not graded: the shingle-set file of the streaming tool (stream_dedup.cc and
// stream_ranks.cc). Not an interface: only the tool's code and this file's test include it.
//
// Pass 1 writes every document's shingle set once, back to back: about the size of the text (15.7 GB at 10^7
// documents of 200 words). Verification reads back the candidates' sets, one at a time and in another order;
// Prefetch names the ranges that come next, so that when the file no longer fits in the page cache their
// reads queue on the disk together. The file is unlinked as soon as it is made, so it is gone when closed, on
// every exit path, a crash included. (Writing it past the page cache, with O_DIRECT, was measured and
// dropped: notes/03-dedup.md §5.1, "Run to run".)
#ifndef DISTLAB_LABS_DEDUP_SET_FILE_H_
#define DISTLAB_LABS_DEDUP_SET_FILE_H_

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace distlab::dedup::internal {

// Written by Append, then Flush after the last Append, then read by Read and Prefetch.
class SetFile {
 public:
  SetFile() = default;
  SetFile(const SetFile&) = delete;
  SetFile& operator=(const SetFile&) = delete;
  ~SetFile() {
    if (fd_ >= 0) close(fd_);
  }
  // A new file in `dir` ("" = $TMPDIR, else /tmp). Errors: a file that cannot be made (Internal, naming the
  // folder and the system's reason).
  absl::Status Open(std::string dir) {
    if (dir.empty()) dir = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
    std::string name = dir + "/dedup-shingles-XXXXXX";
    fd_ = mkstemp(name.data());
    if (fd_ < 0) {
      return absl::InternalError(
          absl::StrCat("cannot create the shingle-set file in ", dir, ": ", std::strerror(errno)));
    }
    unlink(name.c_str());
    where_ = dir;
    return absl::OkStatus();
  }
  // Adds `bytes` at the end of the file (gathered, and written 1 MB or more at a time). Errors: a write that
  // fails (ResourceExhausted naming the folder and the system's reason: the disk is full).
  absl::Status Append(const std::string& bytes) {
    constexpr size_t kFlushBytes = 1 << 20;
    if (buf_.empty() && bytes.size() >= kFlushBytes) return Write(bytes);  // large enough as it is
    buf_ += bytes;
    return buf_.size() >= kFlushBytes ? Flush() : absl::OkStatus();
  }
  // After the last Append: writes the rest. Errors as Append's.
  absl::Status Flush() {
    absl::Status written = Write(buf_);
    buf_.clear();
    return written;
  }
  // Reads `bytes` at `offset` into `set` (after Flush). Errors: a read that fails or ends early (DataLoss).
  absl::Status Read(uint64_t offset, uint64_t bytes, std::vector<uint64_t>& set) const {
    set.resize(bytes / sizeof(uint64_t));
    char* p = reinterpret_cast<char*>(set.data());
    for (uint64_t at = 0; at < bytes;) {
      const ssize_t got = pread(fd_, p + at, bytes - at, static_cast<off_t>(offset + at));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return absl::DataLossError("cannot read back the shingle-set file");
      at += got;
    }
    return absl::OkStatus();
  }
  // Asks the kernel to start reading these bytes now (they are read soon, in another order).
  void Prefetch(uint64_t offset, uint64_t bytes) const {
    posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes), POSIX_FADV_WILLNEED);
  }
  int64_t written() const { return written_; }

 private:
  absl::Status Write(const std::string& bytes) {
    for (size_t at = 0; at < bytes.size();) {
      const ssize_t put = write(fd_, bytes.data() + at, bytes.size() - at);
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) {
        return absl::ResourceExhaustedError(
            absl::StrCat("cannot write the shingle-set file in ", where_, ": ", std::strerror(errno)));
      }
      at += put, written_ += put;
    }
    return absl::OkStatus();
  }

  int fd_ = -1;
  std::string where_, buf_;
  int64_t written_ = 0;
};

}  // namespace distlab::dedup::internal

#endif  // DISTLAB_LABS_DEDUP_SET_FILE_H_
