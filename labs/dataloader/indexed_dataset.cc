// Lab 2 (dataloader), stage D: the Megatron .bin/.idx writer and reader. indexed_dataset.h draws the layout
// byte by byte; notes/02-dataloader.md section 4 explains it. Until a function is done it fails with
// "TODO(dataloader stage D): <name>". Stuck? ./labctl hint dataloader D
#include "labs/dataloader/indexed_dataset.h"

#include "absl/strings/str_cat.h"
#include "reference/base/status.h"

namespace distlab::dataloader {

// TODO(dataloader stage D): DTypeSize, DTypeName -- contract: indexed_dataset.h (DType, DTypeSize, DTypeName:
//   0 and "unknown" for a code that is none of the eight).
int DTypeSize(DType dtype) { throw NotImplementedError("dataloader", "D", "DTypeSize"); }
const char* DTypeName(DType dtype) { throw NotImplementedError("dataloader", "D", "DTypeName"); }

struct IndexedDatasetWriter::Impl {
  // TODO(dataloader stage D): whatever the writer needs until Finalize.
};
IndexedDatasetWriter::IndexedDatasetWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IndexedDatasetWriter::~IndexedDatasetWriter() = default;

// TODO(dataloader stage D): IndexedDatasetWriter -- contract: indexed_dataset.h (the .idx layout, the
//   writer); idea: notes/02-dataloader.md §4. Errors: indexed_dataset.h lists them. Little-endian, no
//   padding: write each field's bytes yourself, never a struct (a struct has padding the layout lacks).
//   What does the document index hold before the first document ends, and after the last?
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
  // TODO(dataloader stage D): whatever the reader needs; the destructor must unmap what Open mapped.
};
IndexedDataset::IndexedDataset(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IndexedDataset::~IndexedDataset() = default;

// TODO(dataloader stage D): IndexedDataset::Open -- contract: indexed_dataset.h (the layout, IndexedDataset:
//   its errors and field names); idea: notes/02-dataloader.md §4. Tools: open, fstat, mmap(PROT_READ,
//   MAP_PRIVATE); the arrays start at offsets that are not multiples of 8, so read them with memcpy (a
//   misaligned int64_t* read is undefined behaviour). Every number in the file may be corrupt.
//   Which numbers decide where you read next, and what must hold before you may use each of them?
absl::StatusOr<std::unique_ptr<IndexedDataset>> IndexedDataset::Open(const std::string& prefix) {
  return Unimplemented("dataloader", "D", "IndexedDataset::Open");
}
// TODO(dataloader stage D): IndexedDataset::Open(prefix, expected) -- contract: indexed_dataset.h (Open).
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
// TODO(dataloader stage D): IndexedDataset::Get -- contract: indexed_dataset.h (Get: OutOfRange where
//   Megatron reads on unchecked).
absl::StatusOr<std::vector<int64_t>> IndexedDataset::Get(int64_t i, int64_t offset, int64_t length) const {
  return Unimplemented("dataloader", "D", "IndexedDataset::Get");
}

}  // namespace distlab::dataloader
