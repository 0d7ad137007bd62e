// Lab 2, stage D (solution): the Megatron .bin/.idx writer and the validating mmap reader.
#include "labs/dataloader/indexed_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"

namespace distlab::dataloader {

int DTypeSize(DType d) {
  switch (d) {
    case DType::kUInt8:
    case DType::kInt8:
      return 1;
    case DType::kInt16:
    case DType::kUInt16:
      return 2;
    case DType::kInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kFloat64:
      return 8;
  }
  return 0;
}

const char* DTypeName(DType d) {
  switch (d) {
    case DType::kUInt8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kInt16:
      return "int16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kFloat64:
      return "float64";
    case DType::kFloat32:
      return "float32";
    case DType::kUInt16:
      return "uint16";
  }
  return "unknown";
}

namespace {

bool Fits(DType d, int64_t v) {
  switch (d) {
    case DType::kUInt8:
      return v >= 0 && v <= 255;
    case DType::kInt8:
      return v >= -128 && v <= 127;
    case DType::kInt16:
      return v >= -32768 && v <= 32767;
    case DType::kUInt16:
      return v >= 0 && v <= 65535;
    case DType::kInt32:
      return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
    case DType::kFloat32:
      return v >= -(int64_t{1} << 24) && v <= (int64_t{1} << 24);  // exactly representable
    case DType::kFloat64:
      return v >= -(int64_t{1} << 53) && v <= (int64_t{1} << 53);
    case DType::kInt64:
      return true;
  }
  return false;
}

// Little-endian store of one token (x86 and ARM Linux are little-endian; the format is too).
void Encode(DType d, int64_t v, char* out) {
  switch (d) {
    case DType::kUInt8: {
      uint8_t x = static_cast<uint8_t>(v);
      std::memcpy(out, &x, 1);
      break;
    }
    case DType::kInt8: {
      int8_t x = static_cast<int8_t>(v);
      std::memcpy(out, &x, 1);
      break;
    }
    case DType::kInt16: {
      int16_t x = static_cast<int16_t>(v);
      std::memcpy(out, &x, 2);
      break;
    }
    case DType::kUInt16: {
      uint16_t x = static_cast<uint16_t>(v);
      std::memcpy(out, &x, 2);
      break;
    }
    case DType::kInt32: {
      int32_t x = static_cast<int32_t>(v);
      std::memcpy(out, &x, 4);
      break;
    }
    case DType::kInt64: {
      std::memcpy(out, &v, 8);
      break;
    }
    case DType::kFloat32: {
      float x = static_cast<float>(v);
      std::memcpy(out, &x, 4);
      break;
    }
    case DType::kFloat64: {
      double x = static_cast<double>(v);
      std::memcpy(out, &x, 8);
      break;
    }
  }
}

// A float token that is NaN or outside int64 (a corrupt file) must not reach the undefined conversion.
int64_t ToToken(double x) { return (x > -9.2e18 && x < 9.2e18) ? static_cast<int64_t>(x) : 0; }

int64_t Decode(DType d, const char* p) {
  switch (d) {
    case DType::kUInt8: {
      uint8_t x;
      std::memcpy(&x, p, 1);
      return x;
    }
    case DType::kInt8: {
      int8_t x;
      std::memcpy(&x, p, 1);
      return x;
    }
    case DType::kInt16: {
      int16_t x;
      std::memcpy(&x, p, 2);
      return x;
    }
    case DType::kUInt16: {
      uint16_t x;
      std::memcpy(&x, p, 2);
      return x;
    }
    case DType::kInt32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case DType::kInt64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return x;
    }
    case DType::kFloat32: {
      float x;
      std::memcpy(&x, p, 4);
      return ToToken(x);
    }
    case DType::kFloat64: {
      double x;
      std::memcpy(&x, p, 8);
      return ToToken(x);
    }
  }
  return 0;
}

std::string Base(const std::string& path) {
  size_t s = path.find_last_of('/');
  return s == std::string::npos ? path : path.substr(s + 1);
}

// A read-only mapping of a whole file (an empty file maps to nothing).
struct Mapping {
  const char* data = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (data != nullptr) ::munmap(const_cast<char*>(data), size);
  }
  absl::Status Open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
    struct stat sb;
    if (::fstat(fd, &sb) != 0) {
      ::close(fd);
      return absl::InternalError(absl::StrCat(path, ": fstat: ", std::strerror(errno)));
    }
    size = static_cast<size_t>(sb.st_size);
    if (size > 0) {
      void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        ::close(fd);
        size = 0;
        return absl::InternalError(absl::StrCat(path, ": mmap: ", std::strerror(errno)));
      }
      data = static_cast<const char*>(p);
    }
    ::close(fd);
    return absl::OkStatus();
  }
};

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // the arrays are not aligned (the header is 34 bytes)
  return v;
}

}  // namespace

// ------------------------------------------------------------------------------------------------- writer
struct IndexedDatasetWriter::Impl {
  std::string prefix;
  DType dtype;
  FILE* bin = nullptr;
  std::vector<int32_t> sizes;
  std::vector<int64_t> pointers;
  std::vector<int64_t> doc_idx{0};
  int64_t bytes = 0;
  bool finalized = false;
};

IndexedDatasetWriter::IndexedDatasetWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (impl_ && impl_->bin) std::fclose(impl_->bin);
}

absl::StatusOr<std::unique_ptr<IndexedDatasetWriter>> IndexedDatasetWriter::Create(const std::string& prefix,
                                                                                   DType dtype) {
  if (DTypeSize(dtype) == 0) {
    return absl::InvalidArgumentError(absl::StrCat("unknown dtype code ", static_cast<int>(dtype)));
  }
  auto impl = std::make_unique<Impl>();
  impl->prefix = prefix;
  impl->dtype = dtype;
  impl->bin = std::fopen((prefix + ".bin").c_str(), "wb");
  if (impl->bin == nullptr) {
    return absl::InternalError(absl::StrCat(prefix, ".bin: cannot create: ", std::strerror(errno)));
  }
  return std::unique_ptr<IndexedDatasetWriter>(new IndexedDatasetWriter(std::move(impl)));
}

absl::Status IndexedDatasetWriter::AddSequence(const std::vector<int64_t>& tokens) {
  Impl& m = *impl_;
  if (m.finalized) return absl::FailedPreconditionError("AddSequence after Finalize");
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(
        "a sequence longer than 2^31-1 tokens does not fit the int32 length field");
  }
  const int w = DTypeSize(m.dtype);
  std::vector<char> buf(tokens.size() * static_cast<size_t>(w));
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!Fits(m.dtype, tokens[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("token ", tokens[i], " at position ", i, " does not fit dtype ", DTypeName(m.dtype)));
    }
    Encode(m.dtype, tokens[i], buf.data() + i * w);
  }
  if (!buf.empty() && std::fwrite(buf.data(), 1, buf.size(), m.bin) != buf.size()) {
    return absl::InternalError(absl::StrCat(m.prefix, ".bin: write failed"));
  }
  m.sizes.push_back(static_cast<int32_t>(tokens.size()));
  m.pointers.push_back(m.bytes);  // pointer = byte offset = (tokens before) * itemsize
  m.bytes += static_cast<int64_t>(buf.size());
  return absl::OkStatus();
}

absl::Status IndexedDatasetWriter::EndDocument() {
  Impl& m = *impl_;
  if (m.finalized) return absl::FailedPreconditionError("EndDocument after Finalize");
  m.doc_idx.push_back(static_cast<int64_t>(m.sizes.size()));
  return absl::OkStatus();
}

absl::Status IndexedDatasetWriter::Finalize() {
  Impl& m = *impl_;
  if (m.finalized) return absl::OkStatus();
  if (m.doc_idx.back() != static_cast<int64_t>(m.sizes.size())) RETURN_IF_ERROR(EndDocument());
  m.finalized = true;
  if (std::fclose(m.bin) != 0) {
    m.bin = nullptr;
    return absl::InternalError(absl::StrCat(m.prefix, ".bin: close failed"));
  }
  m.bin = nullptr;
  const std::string path = m.prefix + ".idx";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return absl::InternalError(absl::StrCat(path, ": cannot create: ", std::strerror(errno)));
  const uint64_t version = kIndexVersion, count = m.sizes.size(), docs = m.doc_idx.size();
  const uint8_t code = static_cast<uint8_t>(m.dtype);
  bool ok = std::fwrite(kIndexMagic, 1, 9, f) == 9 && std::fwrite(&version, 8, 1, f) == 1 &&
            std::fwrite(&code, 1, 1, f) == 1 && std::fwrite(&count, 8, 1, f) == 1 &&
            std::fwrite(&docs, 8, 1, f) == 1 &&
            std::fwrite(m.sizes.data(), 4, m.sizes.size(), f) == m.sizes.size() &&
            std::fwrite(m.pointers.data(), 8, m.pointers.size(), f) == m.pointers.size() &&
            std::fwrite(m.doc_idx.data(), 8, m.doc_idx.size(), f) == m.doc_idx.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) return absl::InternalError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

// ------------------------------------------------------------------------------------------------- reader
struct IndexedDataset::Impl {
  std::string idx_path, bin_path;
  Mapping idx, bin;
  DType dtype;
  int64_t count = 0, docs = 0;
  const char* sizes = nullptr;     // int32[count]
  const char* pointers = nullptr;  // int64[count]
  const char* doc_idx = nullptr;   // int64[docs]

  int32_t size_at(int64_t i) const { return Load<int32_t>(sizes + 4 * i); }
  int64_t pointer_at(int64_t i) const { return Load<int64_t>(pointers + 8 * i); }
  int64_t doc_at(int64_t i) const { return Load<int64_t>(doc_idx + 8 * i); }

  absl::Status Bad(const std::string& field, const std::string& what) const {
    return absl::DataLossError(absl::StrCat(Base(idx_path), ": field '", field, "' ", what));
  }
  absl::Status BadAt(const std::string& field, int64_t i, const std::string& what) const {
    return absl::DataLossError(absl::StrCat(Base(idx_path), ": field '", field, "'[", i, "] ", what));
  }

  absl::Status Validate() {
    const size_t n = idx.size;
    if (n < static_cast<size_t>(kIndexHeaderBytes)) {
      return Bad("header", absl::StrCat("is truncated: the file has ", n, " bytes, the header needs ",
                                        kIndexHeaderBytes));
    }
    if (std::memcmp(idx.data, kIndexMagic, 9) != 0) {
      return Bad("magic", "is not \"MMIDIDX\\0\\0\": this is not a Megatron mmap index file");
    }
    const uint64_t version = Load<uint64_t>(idx.data + 9);
    if (version != kIndexVersion)
      return Bad("version", absl::StrCat("is ", version, ", only version 1 is known"));
    const uint8_t code = static_cast<uint8_t>(idx.data[17]);
    dtype = static_cast<DType>(code);
    if (code < 1 || code > 8) return Bad("dtype", absl::StrCat("has unknown code ", static_cast<int>(code)));
    const uint64_t s = Load<uint64_t>(idx.data + 18), d = Load<uint64_t>(idx.data + 26);
    // Checked arithmetic: a corrupt count must not overflow into a size that "fits".
    const uint64_t body = n - static_cast<uint64_t>(kIndexHeaderBytes);
    if (s > body / 12) {
      return Bad("sequence count", absl::StrCat("is ", s, ", but the file has room for at most ", body / 12));
    }
    if (d > (body - 12 * s) / 8) {
      return Bad("document count",
                 absl::StrCat("is ", d, ", but the file has room for at most ", (body - 12 * s) / 8));
    }
    const uint64_t expected = static_cast<uint64_t>(kIndexHeaderBytes) + 12 * s + 8 * d;
    if (expected != n) {
      std::string why = " (trailing data)";
      if (n - expected == s && s > 0) {
        why = absl::StrCat(" (", s, " trailing bytes, one per sequence: a Megatron multimodal index keeps ",
                           "sequence modes there; this reader reads text-only indices)");
      }
      return Bad("document indices",
                 absl::StrCat("end at byte ", expected, " but the file has ", n, " bytes", why));
    }
    count = static_cast<int64_t>(s);
    docs = static_cast<int64_t>(d);
    sizes = idx.data + kIndexHeaderBytes;
    pointers = sizes + 4 * count;
    doc_idx = pointers + 8 * count;
    const int64_t item = DTypeSize(dtype);
    const uint64_t bin_bytes = bin.size;
    for (int64_t i = 0; i < count; ++i) {
      const int32_t len = size_at(i);
      if (len < 0) return BadAt("sizes", i, absl::StrCat("= ", len, " is negative"));
      const int64_t p = pointer_at(i);
      if (p < 0 || p % item != 0) {
        return BadAt("pointers", i,
                     absl::StrCat("= ", p, " is not a valid offset for ", DTypeName(dtype), " tokens"));
      }
      const uint64_t end = static_cast<uint64_t>(p) + static_cast<uint64_t>(len) * item;
      if (static_cast<uint64_t>(p) > bin_bytes || end > bin_bytes) {
        return BadAt(
            "pointers", i,
            absl::StrCat("= ", p, " plus ", static_cast<int64_t>(len) * item, " bytes runs past the end of ",
                         Base(bin_path), " (", bin_bytes, " bytes)"));
      }
    }
    if (docs < 1) return Bad("document count", "is 0; it must be at least 1 (the leading 0)");
    if (doc_at(0) != 0) return BadAt("document indices", 0, absl::StrCat("= ", doc_at(0), " must be 0"));
    for (int64_t i = 1; i < docs; ++i) {
      const int64_t v = doc_at(i), prev = doc_at(i - 1);
      if (v < prev || v > count) {
        return BadAt("document indices", i, absl::StrCat("= ", v, " must lie in [", prev, ", ", count, "]"));
      }
    }
    if (doc_at(docs - 1) != count) {
      return BadAt("document indices", docs - 1,
                   absl::StrCat("= ", doc_at(docs - 1), " must equal the sequence count ", count));
    }
    return absl::OkStatus();
  }
};

IndexedDataset::IndexedDataset(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IndexedDataset::~IndexedDataset() = default;

absl::StatusOr<std::unique_ptr<IndexedDataset>> IndexedDataset::Open(const std::string& prefix) {
  auto impl = std::make_unique<Impl>();
  impl->idx_path = prefix + ".idx";
  impl->bin_path = prefix + ".bin";
  RETURN_IF_ERROR(impl->idx.Open(impl->idx_path));
  RETURN_IF_ERROR(impl->bin.Open(impl->bin_path));
  RETURN_IF_ERROR(impl->Validate());
  return std::unique_ptr<IndexedDataset>(new IndexedDataset(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<IndexedDataset>> IndexedDataset::Open(const std::string& prefix,
                                                                     DType expected) {
  ASSIGN_OR_RETURN(auto ds, Open(prefix));
  if (ds->dtype() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(Base(prefix + ".idx"), ": field 'dtype' is ",
                                                   DTypeName(ds->dtype()), " but ", DTypeName(expected),
                                                   " was expected"));
  }
  return ds;
}

DType IndexedDataset::dtype() const { return impl_->dtype; }
int64_t IndexedDataset::num_sequences() const { return impl_->count; }
int64_t IndexedDataset::num_documents() const { return impl_->docs - 1; }

std::vector<int32_t> IndexedDataset::sequence_lengths() const {
  std::vector<int32_t> v(static_cast<size_t>(impl_->count));
  for (int64_t i = 0; i < impl_->count; ++i) v[static_cast<size_t>(i)] = impl_->size_at(i);
  return v;
}

std::vector<int64_t> IndexedDataset::document_indices() const {
  std::vector<int64_t> v(static_cast<size_t>(impl_->docs));
  for (int64_t i = 0; i < impl_->docs; ++i) v[static_cast<size_t>(i)] = impl_->doc_at(i);
  return v;
}

absl::StatusOr<std::vector<int64_t>> IndexedDataset::Get(int64_t i, int64_t offset, int64_t length) const {
  const Impl& m = *impl_;
  if (i < 0 || i >= m.count) {
    return absl::OutOfRangeError(absl::StrCat("sequence ", i, " is outside [0, ", m.count, ")"));
  }
  const int64_t len = m.size_at(i);
  if (length < 0) length = len - offset;
  if (offset < 0 || length < 0 || offset + length > len) {
    return absl::OutOfRangeError(absl::StrCat("tokens [", offset, ", ", offset + length, ") of sequence ", i,
                                              " are outside its ", len, " tokens"));
  }
  const int item = DTypeSize(m.dtype);
  const char* p = m.bin.data + m.pointer_at(i) + offset * item;
  std::vector<int64_t> out(static_cast<size_t>(length));
  for (int64_t k = 0; k < length; ++k) out[static_cast<size_t>(k)] = Decode(m.dtype, p + k * item);
  return out;
}

}  // namespace distlab::dataloader
