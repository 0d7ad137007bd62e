// Data types and reduction operators of the communication API, as NCCL names them.
//
// dtypes: f32, f64, bf16, f16, i32, i64, u8. ops: sum, prod, max, min, avg.
// Integer arithmetic wraps modulo 2^w (it is computed on the unsigned type of the same width), and integer
// avg is the wrapped sum divided by n, truncated toward zero. bf16 and f16 are reduced in float and rounded
// back to nearest-even after each binary step.
#ifndef DISTLAB_REFERENCE_COMM_TYPES_H_
#define DISTLAB_REFERENCE_COMM_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace distlab::comm {

enum class DataType { kF32, kF64, kBF16, kF16, kI32, kI64, kU8 };
enum class RedOp { kSum, kProd, kMax, kMin, kAvg };

inline constexpr DataType kAllDataTypes[] = {DataType::kF32, DataType::kF64, DataType::kBF16, DataType::kF16,
                                             DataType::kI32, DataType::kI64, DataType::kU8};
inline constexpr RedOp kAllRedOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg};

// Bytes per element: 4, 8, 2, 2, 4, 8, 1.
size_t SizeOf(DataType dtype);
// "f32", "f64", "bf16", "f16", "i32", "i64", "u8" (the names nccl-tests prints as "float", ... are in lab 1).
std::string_view Name(DataType dtype);
// "sum", "prod", "max", "min", "avg".
std::string_view Name(RedOp op);
// Inverse of Name(); an error names the accepted spellings.
absl::StatusOr<DataType> ParseDataType(std::string_view name);
absl::StatusOr<RedOp> ParseRedOp(std::string_view name);
bool IsFloating(DataType dtype);

// 16-bit floating-point storage types. Conversions round to nearest, ties to even; NaN stays NaN.
struct bf16 {
  uint16_t bits = 0;
};
struct f16 {
  uint16_t bits = 0;
};
bf16 ToBF16(float x);
float FromBF16(bf16 x);
f16 ToF16(float x);
float FromF16(f16 x);

// acc[i] = op(acc[i], in[i]) for i < count, on elements of `dtype` (avg accumulates as sum; see Finish).
void ReduceInto(void* acc, const void* in, size_t count, DataType dtype, RedOp op);
// After reducing n contributions with kAvg: divides by n (integers truncate toward zero). No-op otherwise.
void FinishReduce(void* acc, size_t count, DataType dtype, RedOp op, int n);
// The reduction of n inputs and its copies in one pass: out[o][i] = in[0][i] op in[1][i] op ... op
// in[n-1][i] (folded in rank order with ReduceInto's element operation, then FinishReduce's division for
// avg: the same bits) for every output o < outputs and i < count. Every input element is read once and every
// output written from registers, 64 bytes at a time, so a thread's loads and stores overlap (an accumulator
// filled first and copied out after reads and writes in turns, which one thread does at about 0.6 of a
// copy's speed). `streaming`: outputs are written with non-temporal stores where the platform has them;
// the caller fences (_mm_sfence) before telling others they are written. Outputs may alias inputs at the
// same position (in place).
void ReduceToOutputs(const void* const* in, int n, void* const* out, int outputs, size_t count,
                     DataType dtype, RedOp op, bool streaming);

// Element i of a typed buffer as double (tests and harnesses use it to compare and print).
double ElementAsDouble(const void* buf, size_t i, DataType dtype);
// Sets element i of a typed buffer from a double (rounded/wrapped to the type).
void SetElementFromDouble(void* buf, size_t i, DataType dtype, double value);

}  // namespace distlab::comm

#endif  // DISTLAB_REFERENCE_COMM_TYPES_H_
