// Lab 3 (dedup), given; not graded: the band tables of the streaming tool (BandTable in stream_internal.h) --
// pass 1's band keys held in memory, or, under a memory budget, spilled to sorted runs on disk and merged
// band by band.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"
#include "labs/dedup/stream_internal.h"
#include "reference/base/status.h"

namespace distlab::dedup::internal {

namespace {

constexpr size_t kRecord = sizeof(BandRecord);  // 16 bytes: key, band, document

// 8 b bytes of keys and one 16-byte sort record: what a held document costs at a spill.
int64_t PerDocument(int bands) { return 8 * static_cast<int64_t>(bands) + static_cast<int64_t>(kRecord); }

bool KeyDocLess(const BandRecord& a, const BandRecord& b) {
  return a.key != b.key ? a.key < b.key : a.doc < b.doc;
}

// Sorts records [0, n) by (key, doc) in place, given that they agree on the key's bits above shift + 8.
// Keys are hashes spread evenly over 64 bits, so an in-place counting sort on the next 8 bits (each record
// swapped straight into its bucket: "American flag sort") splits the records into 256 buckets of about equal
// size; the buckets are split again the same way until they hold a few hundred records, and std::sort
// finishes those while they sit in the cache. On one band's records this takes 0.03 s at 10^6 documents and
// 0.55 s at 10^7, where std::sort alone took 0.11 s and 1.3 s.
void SortRecords(BandRecord* records, size_t n, int shift = 56) {
  constexpr size_t kSmall = 512;
  if (n < kSmall || shift < 0) return std::sort(records, records + n, KeyDocLess);
  auto digit = [shift](const BandRecord& r) { return static_cast<size_t>((r.key >> shift) & 255); };
  size_t end[257] = {};  // bucket x is [end[x], end[x + 1]) once summed
  for (size_t i = 0; i < n; ++i) ++end[digit(records[i]) + 1];
  for (size_t x = 1; x <= 256; ++x) end[x] += end[x - 1];
  size_t next[256];  // the first place of bucket x not yet filled
  std::copy(end, end + 256, next);
  for (size_t x = 0; x < 256; ++x) {
    while (next[x] < end[x + 1]) {
      BandRecord r = records[next[x]];
      // Swap r into its bucket, taking the record there, until one that belongs here comes back.
      for (size_t to = digit(r); to != x; to = digit(r)) std::swap(r, records[next[to]++]);
      records[next[x]++] = r;
    }
  }
  for (size_t x = 0; x < 256; ++x) SortRecords(records + end[x], end[x + 1] - end[x], shift - 8);
}

}  // namespace

// --- SpillFile ---

BandTable::SpillFile& BandTable::SpillFile::operator=(SpillFile&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    dir_ = std::move(other.dir_);
  }
  return *this;
}

absl::Status BandTable::SpillFile::Open(const std::string& dir) {
  std::string name = dir + "/dedup-bands-XXXXXX";
  fd_ = mkstemp(name.data());
  if (fd_ < 0) {
    return absl::InternalError(
        absl::StrCat("cannot create a band spill file in ", dir, ": ", std::strerror(errno)));
  }
  unlink(name.c_str());  // gone when closed, whatever way the program ends
  dir_ = dir;
  return absl::OkStatus();
}

absl::Status BandTable::SpillFile::Append(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  for (size_t at = 0; at < bytes;) {
    const ssize_t put = write(fd_, p + at, bytes - at);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot write a band spill file in ", dir_, ": ",
                                                       std::strerror(put < 0 ? errno : ENOSPC)));
    }
    at += static_cast<size_t>(put);
  }
  return absl::OkStatus();
}

absl::Status BandTable::SpillFile::Read(int64_t offset, void* data, size_t bytes) const {
  char* p = static_cast<char*>(data);
  for (size_t at = 0; at < bytes;) {
    const ssize_t got = pread(fd_, p + at, bytes - at, static_cast<off_t>(offset + static_cast<int64_t>(at)));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      return absl::DataLossError(absl::StrCat("cannot read back a band spill file in ", dir_, ": ",
                                              got < 0 ? std::strerror(errno) : "it ends early"));
    }
    at += static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

void BandTable::SpillFile::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

// --- BandTable ---

int64_t BandTable::MinimumBudget(int bands) {
  return std::max<int64_t>((kMinFanIn + 1) * kRunBuffer, kMinRunDocuments * PerDocument(bands));
}

absl::Status BandTable::Init(int bands, int64_t budget, const std::string& tmp_dir) {
  const int64_t least = MinimumBudget(bands);
  if (budget < 0 || (budget > 0 && budget < least)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a memory budget of ", budget, " bytes is too small: the least for ", bands, " bands is ", least,
        " bytes (", (least + 1023) / 1024, " KiB; 0 means no budget) -- merge buffers of ", kRunBuffer,
        " bytes for at least ", kMinFanIn, " runs and the output, and runs of at least ", kMinRunDocuments,
        " documents at ", PerDocument(bands), " bytes each"));
  }
  bands_ = bands;
  budget_ = budget;
  dir_ = tmp_dir;
  if (dir_.empty()) dir_ = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
  if (budget > 0) {
    run_documents_ = budget / PerDocument(bands);  // their keys, and one band's records after them
    max_runs_ = budget / kRunBuffer - 1;
  }
  return absl::OkStatus();
}

void BandTable::Use(size_t bytes) {
  block_used_ = std::max(block_used_, bytes);
  Note();
}

void BandTable::Unmap() {
  if (block_ != nullptr) munmap(block_, static_cast<size_t>(budget_));
  block_ = nullptr;
  block_used_ = 0;
}

absl::Status BandTable::Add(const uint64_t* keys) {
  if (documents_ == INT_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("more than ", INT_MAX, " documents: the lab's document ids are int"));
  }
  ++documents_, ++held_;
  if (budget_ == 0) {
    for (int j = 0; j < bands_; ++j) keys_.push_back(keys[j]);
    Note();
    return absl::OkStatus();
  }
  if (block_ == nullptr) {
    // Address space only: a page becomes memory when first written. Every phase reuses the same pages (no
    // freed keys linger in the heap beside the merge's buffers), and munmap gives them all back.
    void* p = mmap(nullptr, static_cast<size_t>(budget_), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot map the memory budget of ", budget_, " bytes: ", std::strerror(errno)));
    }
    block_ = static_cast<char*>(p);
  }
  std::memcpy(HeldKeys() + (held_ - 1) * bands_, keys, sizeof(uint64_t) * bands_);
  Use(static_cast<size_t>(held_ * bands_) * sizeof(uint64_t));
  return held_ == run_documents_ ? Spill(/*last=*/false) : absl::OkStatus();
}

absl::Status BandTable::Finish() {
  return !files_.empty() && held_ > 0 ? Spill(/*last=*/true) : absl::OkStatus();
}

void BandTable::HeldRecords(int band, int first_doc, BandRecord* out) const {
  const int64_t first = documents_ - held_;
  for (int64_t d = 0; d < held_; ++d) {
    const uint64_t key =
        budget_ > 0 ? HeldKeys()[d * bands_ + band] : keys_[static_cast<size_t>(d) * bands_ + band];
    out[d] = {key, band, static_cast<int32_t>(first_doc + first + d)};
  }
}

absl::Status BandTable::Spill(bool last) {
  if (files_.empty()) {
    files_.resize(bands_);
    for (SpillFile& f : files_) RETURN_IF_ERROR(f.Open(dir_));
    starts_ = {0};
  }
  // One band's records at a time, in the block after the keys.
  const size_t keys_bytes = static_cast<size_t>(held_ * bands_) * sizeof(uint64_t);
  BandRecord* run = BlockRecords(keys_bytes);
  Use(keys_bytes + static_cast<size_t>(held_) * kRecord);
  for (int j = 0; j < bands_; ++j) {
    HeldRecords(j, 0, run);
    SortRecords(run, static_cast<size_t>(held_));
    RETURN_IF_ERROR(files_[j].Append(run, static_cast<size_t>(held_) * kRecord));
  }
  spilled_bytes_ += held_ * bands_ * static_cast<int64_t>(kRecord);
  starts_.push_back(starts_.back() + held_);
  ++spills_;
  held_ = 0;
  const int64_t runs = static_cast<int64_t>(starts_.size()) - 1;
  return !last && runs >= max_runs_ ? MergeRuns() : absl::OkStatus();
}

size_t BandTable::BufferRecords() const {
  const int64_t buffers = static_cast<int64_t>(starts_.size());  // R runs and the output
  return static_cast<size_t>(std::clamp(budget_ / buffers, kRunBuffer, kMaxRunBuffer)) / kRecord;
}

absl::Status BandTable::Merge(const SpillFile& file, size_t per_buffer, const Emit& emit) {
  // The block holds every buffer: run r's at r * per_buffer records, the output's after the last run's.
  struct Run {
    int64_t next = 0, end = 0;  // records of the file not yet read: [next, end)
    BandRecord* buffer = nullptr;
    size_t size = 0, at = 0;  // records in the buffer, and the next one
  };
  const size_t runs = starts_.size() - 1;
  std::vector<Run> run(runs);
  auto refill = [&](Run& r) {
    r.size = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(per_buffer), r.end - r.next));
    r.at = 0;
    const absl::Status s = file.Read(r.next * static_cast<int64_t>(kRecord), r.buffer, r.size * kRecord);
    r.next += static_cast<int64_t>(r.size);
    return s;
  };
  // The heads of the runs, smallest (key, doc) on top; no two are equal (a document is in one run).
  using Head = std::pair<std::pair<uint64_t, int32_t>, size_t>;
  std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads;
  auto push = [&](size_t r) {
    heads.push({{run[r].buffer[run[r].at].key, run[r].buffer[run[r].at].doc}, r});
  };
  Use((runs + 1) * per_buffer * kRecord);
  for (size_t r = 0; r < runs; ++r) {
    run[r].next = starts_[r], run[r].end = starts_[r + 1];
    run[r].buffer = BlockRecords(r * per_buffer * kRecord);
    RETURN_IF_ERROR(refill(run[r]));
    if (run[r].size > 0) push(r);
  }
  BandRecord* const out = BlockRecords(runs * per_buffer * kRecord);
  size_t filled = 0;
  while (!heads.empty()) {
    const size_t r = heads.top().second;
    heads.pop();
    out[filled++] = run[r].buffer[run[r].at++];
    if (filled == per_buffer) {
      RETURN_IF_ERROR(emit(out, filled));
      filled = 0;
    }
    if (run[r].at == run[r].size) {
      if (run[r].next == run[r].end) continue;
      RETURN_IF_ERROR(refill(run[r]));
    }
    push(r);
  }
  return filled == 0 ? absl::OkStatus() : emit(out, filled);
}

absl::Status BandTable::MergeRuns() {
  const size_t per_buffer = BufferRecords();
  for (int j = 0; j < bands_; ++j) {
    SpillFile merged;
    RETURN_IF_ERROR(merged.Open(dir_));
    RETURN_IF_ERROR(Merge(files_[j], per_buffer, [&](const BandRecord* records, size_t count) {
      return merged.Append(records, count * kRecord);
    }));
    files_[j] = std::move(merged);  // the old runs' file closes, and its space goes
  }
  spilled_bytes_ += starts_.back() * bands_ * static_cast<int64_t>(kRecord);
  starts_ = {0, starts_.back()};
  return absl::OkStatus();
}

absl::Status BandTable::Begin(int band) {
  if (band != next_band_ || band >= bands_) {
    return absl::InternalError(absl::StrCat("band ", band, " of the band tables read out of order (",
                                            next_band_, " of ", bands_, " is next)"));
  }
  ++next_band_;
  return absl::OkStatus();
}

void BandTable::End(int band) {
  if (!files_.empty()) files_[band].Close();
  if (band + 1 < bands_) return;
  keys_.clear();
  records_ = std::vector<BandRecord>();
  files_.clear();
  Unmap();
}

absl::Status BandTable::ForEachBucket(int band, const std::function<void(const std::vector<int>&)>& fn) {
  RETURN_IF_ERROR(Begin(band));
  // The documents of the current key; a key's records are neighbours in (key, doc) order, even across the
  // merge's output buffers.
  std::vector<int> docs;
  uint64_t key = 0;
  auto feed = [&](const BandRecord* records, size_t count) {
    for (size_t i = 0; i < count; ++i) {
      if (!docs.empty() && records[i].key != key) {
        if (docs.size() > 1) fn(docs);
        docs.clear();
      }
      key = records[i].key;
      docs.push_back(records[i].doc);
    }
    return absl::OkStatus();
  };
  if (files_.empty()) {  // held: sorted in memory, in the block after the keys or in records_
    BandRecord* records = nullptr;
    if (budget_ > 0) {
      const size_t keys_bytes = static_cast<size_t>(held_ * bands_) * sizeof(uint64_t);
      records = BlockRecords(keys_bytes);
      Use(keys_bytes + static_cast<size_t>(held_) * kRecord);
    } else {
      records_.resize(static_cast<size_t>(held_));
      records = records_.data();
      Note();
    }
    HeldRecords(band, 0, records);
    SortRecords(records, static_cast<size_t>(held_));
    feed(records, static_cast<size_t>(held_)).IgnoreError();
  } else {
    RETURN_IF_ERROR(Merge(files_[band], BufferRecords(), feed));
  }
  if (docs.size() > 1) fn(docs);
  End(band);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<BandRecord>> BandTable::TakeBand(int band, int first_doc) {
  RETURN_IF_ERROR(Begin(band));
  std::vector<BandRecord> records;
  if (files_.empty()) {
    records.resize(static_cast<size_t>(held_));
    HeldRecords(band, first_doc, records.data());
  } else {    // every run of the band, as it lies in the file: the shuffle sorts them
    Unmap();  // no merge here: the block is not needed any more
    records.resize(static_cast<size_t>(starts_.back()));
    RETURN_IF_ERROR(files_[band].Read(0, records.data(), records.size() * kRecord));
    for (BandRecord& r : records) r.doc += first_doc;
  }
  peak_ = std::max(peak_, held_bytes() + records.capacity() * kRecord);
  End(band);
  return records;
}

}  // namespace distlab::dedup::internal
