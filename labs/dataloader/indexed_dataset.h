// Lab 2 (dataloader), stage D: Megatron-style indexed datasets -- a .bin file of raw tokens and a .idx file
// that says where each sequence starts. The reader maps both files and never copies the token file.
//
// .idx layout (little-endian, no padding, byte-compatible with Megatron-LM's MMapIndexedDataset):
//   offset 0   magic            9 bytes  "MMIDIDX\0\0"
//   offset 9   version          u64      1
//   offset 17  dtype code       u8       uint8=1 int8=2 int16=3 int32=4 int64=5 float64=6 float32=7 uint16=8
//   offset 18  sequence count S u64
//   offset 26  document count D u64      (number of documents + 1: the document indices start with 0)
//   offset 34  sequence lengths int32[S] (in tokens)
//              pointers         int64[S] (byte offset of each sequence in .bin)
//              document indices int64[D] (document d is sequences [doc[d], doc[d+1]))
// .bin: the tokens of all sequences, back to back, in the dtype.
//
// Where the lab and Megatron-LM differ on purpose:
//   * Megatron's multimodal indices append one int8 mode per sequence after the document indices (S more
//     bytes); the header does not say so, the reader is told (IndexedDataset(path, multimodal=True)). This
//     reader reads text-only indices: those S bytes are trailing data, an error that says they may be modes.
//   * Megatron's get(i, offset, length) reads offset and length unchecked, straight on into the next
//     sequence; Get here refuses any range outside sequence i (OutOfRange), so a wrong offset is an error
//     instead of silently wrong tokens.
#ifndef DISTLAB_LABS_DATALOADER_INDEXED_DATASET_H_
#define DISTLAB_LABS_DATALOADER_INDEXED_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace distlab::dataloader {

enum class DType : uint8_t {
  kUInt8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kFloat32 = 7,
  kUInt16 = 8,
};
inline constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr uint64_t kIndexVersion = 1;
inline constexpr int64_t kIndexHeaderBytes = 34;

// Bytes per token (0 for an unknown code) and a name ("uint16").
int DTypeSize(DType dtype);
const char* DTypeName(DType dtype);

// Writes prefix.bin while sequences are added and prefix.idx at Finalize().
class IndexedDatasetWriter {
 public:
  // The .bin cannot be created -> an error naming it.
  static absl::StatusOr<std::unique_ptr<IndexedDatasetWriter>> Create(const std::string& prefix, DType dtype);
  ~IndexedDatasetWriter();
  // Appends one sequence; a token that the dtype cannot hold -> InvalidArgument naming it.
  absl::Status AddSequence(const std::vector<int64_t>& tokens);
  // Closes the current document (the sequences added since the last EndDocument).
  absl::Status EndDocument();
  // Ends an open document, writes prefix.idx, closes both files.
  absl::Status Finalize();

 private:
  struct Impl;
  explicit IndexedDatasetWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The reader. Open validates everything before anything is read: bad input is an error (DataLoss) that names
// the file and the field, never a crash:
//   "<idx file name>: field '<field>' <what is wrong>"   or, for an array entry, "...: field '<field>'[i]
//   ..." data.idx: field 'pointers'[2] = 96 plus 40 bytes runs past the end of data.bin (120 bytes)
// The field names are exactly: 'header' (fewer than 34 bytes), 'magic', 'version', 'dtype', 'sequence count',
// 'document count', 'sizes' (the sequence lengths), 'pointers', 'document indices'. Refused: any file that
// breaks the layout above (the counts must fit the file; bytes after the document indices are 'document
// indices': trailing data), and any index under which a later Get could read outside the .bin or a sequence
// would belong to no document: sizes >= 0; pointers >= 0 and multiples of the item size; document indices
// start at 0, never decrease, stay <= S and end at S.
class IndexedDataset {
 public:
  static absl::StatusOr<std::unique_ptr<IndexedDataset>> Open(const std::string& prefix);
  // As Open, and a dtype other than `expected` -> InvalidArgument naming field 'dtype' and both names.
  static absl::StatusOr<std::unique_ptr<IndexedDataset>> Open(const std::string& prefix, DType expected);
  ~IndexedDataset();

  DType dtype() const;
  int64_t num_sequences() const;
  int64_t num_documents() const;  // D - 1
  std::vector<int32_t> sequence_lengths() const;
  std::vector<int64_t> document_indices() const;
  // Tokens [offset, offset + length) of sequence i as int64 (length -1: to the end); out of range ->
  // OutOfRange.
  absl::StatusOr<std::vector<int64_t>> Get(int64_t i, int64_t offset = 0, int64_t length = -1) const;

 private:
  struct Impl;
  explicit IndexedDataset(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace distlab::dataloader

#endif  // DISTLAB_LABS_DATALOADER_INDEXED_DATASET_H_
