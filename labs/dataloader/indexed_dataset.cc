// Lab 2 (dataloader), stage D: the Megatron .bin/.idx writer and reader. indexed_dataset.h draws the layout
// byte by byte.
#include "labs/dataloader/indexed_dataset.h"

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"

namespace distlab::dataloader {

// TODO(dataloader stage D): DTypeSize and DTypeName for the eight codes (0 / "unknown" otherwise).
int DTypeSize(DType dtype) { throw NotImplementedError("dataloader", "D", "DTypeSize"); }
const char* DTypeName(DType dtype) { throw NotImplementedError("dataloader", "D", "DTypeName"); }

struct IndexedDatasetWriter::Impl {
  // TODO(dataloader stage D): the open .bin, the sequence lengths, pointers and document indices so far.
};
IndexedDatasetWriter::IndexedDatasetWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IndexedDatasetWriter::~IndexedDatasetWriter() = default;

// TODO(dataloader stage D): the writer.
//   1. Create opens prefix.bin for writing (error naming it when it cannot).
//   2. AddSequence: every token must fit the dtype (InvalidArgument naming the token); append the tokens
//      little-endian; record length and pointer (the byte offset where it starts).
//   3. EndDocument appends the current sequence count to the document indices (which start as [0]).
//   4. Finalize ends an open document and writes prefix.idx exactly as the header comment lays it out.
absl::StatusOr<std::unique_ptr<IndexedDatasetWriter>> IndexedDatasetWriter::Create(const std::string& prefix,
                                                                                   DType dtype) {
  return Unimplemented("dataloader", "D", "IndexedDatasetWriter::Create");
}
absl::Status IndexedDatasetWriter::AddSequence(const std::vector<int64_t>& tokens) {
  return Unimplemented("dataloader", "D", "IndexedDatasetWriter::AddSequence");
}
absl::Status IndexedDatasetWriter::EndDocument() {
  return Unimplemented("dataloader", "D", "IndexedDatasetWriter::EndDocument");
}
absl::Status IndexedDatasetWriter::Finalize() {
  return Unimplemented("dataloader", "D", "IndexedDatasetWriter::Finalize");
}

struct IndexedDataset::Impl {
  // TODO(dataloader stage D): both mappings and where the three arrays start.
};
IndexedDataset::IndexedDataset(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IndexedDataset::~IndexedDataset() = default;

// TODO(dataloader stage D): Open -- mmap prefix.idx and prefix.bin read-only, then validate before trusting
// any number (each failure an error "<file>.idx: field '<name>'[i] ..." naming the file and the field):
//   1. the file holds at least the 34-byte header; 2. magic; 3. version 1; 4. a known dtype code;
//   5. the counts fit the file -- compute with care, a corrupt u64 count must not overflow -- and the file
//      ends exactly after the document indices; 6. every length >= 0, every pointer >= 0 and a multiple of
//      the item size, and pointer + length * itemsize within the .bin; 7. document indices start at 0,
//      never decrease, and end at the sequence count.
// The arrays start at unaligned offsets: read them with memcpy.
absl::StatusOr<std::unique_ptr<IndexedDataset>> IndexedDataset::Open(const std::string& prefix) {
  return Unimplemented("dataloader", "D", "IndexedDataset::Open");
}
// TODO(dataloader stage D): as Open, then a dtype other than `expected` -> InvalidArgument naming 'dtype'
// and both dtype names.
absl::StatusOr<std::unique_ptr<IndexedDataset>> IndexedDataset::Open(const std::string& prefix,
                                                                     DType expected) {
  return Unimplemented("dataloader", "D", "IndexedDataset::Open");
}

DType IndexedDataset::dtype() const { throw NotImplementedError("dataloader", "D", "IndexedDataset::dtype"); }
int64_t IndexedDataset::num_sequences() const {
  throw NotImplementedError("dataloader", "D", "IndexedDataset::num_sequences");
}
int64_t IndexedDataset::num_documents() const {
  throw NotImplementedError("dataloader", "D", "IndexedDataset::num_documents");
}
std::vector<int32_t> IndexedDataset::sequence_lengths() const {
  throw NotImplementedError("dataloader", "D", "IndexedDataset::sequence_lengths");
}
std::vector<int64_t> IndexedDataset::document_indices() const {
  throw NotImplementedError("dataloader", "D", "IndexedDataset::document_indices");
}
// TODO(dataloader stage D): Get -- tokens [offset, offset + length) of sequence i converted to int64;
// i, offset or length outside the sequence -> OutOfRange.
absl::StatusOr<std::vector<int64_t>> IndexedDataset::Get(int64_t i, int64_t offset, int64_t length) const {
  return Unimplemented("dataloader", "D", "IndexedDataset::Get");
}

}  // namespace distlab::dataloader
