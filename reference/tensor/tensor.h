// A small dense tensor: a shape, f32 or bf16 storage on one device, and its bytes counted by a rank's
// MemoryTracker under one category.
//
// Vocabulary: numel = product of the shape, bytes = numel * 4 (f32) or 2 (bf16).
// Deliberately left out: strides and views (every tensor is contiguous and owns its storage), broadcasting,
// autograd (layers in reference/nn write their backward by hand). Device::kCuda is reserved so GPU storage
// and cuBLAS kernels can come later behind the same interface; only kCpu is built today.
//
// Misuse (a shape mismatch, reading bf16 as f32, touching a released tensor) is a programming error: it
// aborts with a message naming the shapes, like a failed CHECK.
#ifndef DISTLAB_REFERENCE_TENSOR_TENSOR_H_
#define DISTLAB_REFERENCE_TENSOR_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "reference/base/bf16.h"
#include "reference/tensor/memory.h"

namespace distlab::tensor {

enum class DType { kF32, kBF16 };
enum class Device { kCpu, kCuda };

size_t SizeOf(DType dtype);       // 4, 2
const char* Name(DType dtype);    // "f32", "bf16"
const char* Name(Device device);  // "cpu", "cuda"

// bf16 = the high 16 bits of an f32, rounded to nearest, ties to even; NaN stays a (quiet) NaN. One
// definition for the whole runtime, in reference/base/bf16.h (the communicator's bf16 reductions use it too).
using ::distlab::BF16ToFloat;
using ::distlab::FloatToBF16;

using Shape = std::vector<int64_t>;
std::string ShapeString(const Shape& shape);  // "[2, 3]"
int64_t NumElements(const Shape& shape);

// Aborts with "<where>: <message>" (the CHECK of this runtime).
[[noreturn]] void Fail(const std::string& where, const std::string& message);
#define DISTLAB_TENSOR_CHECK(cond, message)                    \
  do {                                                         \
    if (!(cond)) ::distlab::tensor::Fail(__func__, (message)); \
  } while (0)

class Tensor {
 public:
  // An empty tensor: shape [], no storage, counted nowhere.
  Tensor();
  // Zero-filled storage of `shape`, counted under `category` by `tracker` (default: this thread's).
  explicit Tensor(Shape shape, DType dtype = DType::kF32, MemCategory category = MemCategory::kActivations,
                  MemoryTracker* tracker = CurrentTracker(), Device device = Device::kCpu);
  static Tensor Zeros(Shape shape, MemCategory category = MemCategory::kActivations,
                      DType dtype = DType::kF32);
  // f32 tensor holding `values` (values.size() must equal numel).
  static Tensor FromVector(Shape shape, const std::vector<float>& values,
                           MemCategory category = MemCategory::kActivations);

  ~Tensor();
  Tensor(const Tensor& other);  // deep copy, counted under the same category on this thread's tracker
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;

  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const;  // negative i counts from the end
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  MemCategory category() const { return category_; }
  MemoryTracker* tracker() const { return tracker_; }
  size_t bytes() const { return static_cast<size_t>(numel_) * SizeOf(dtype_); }
  // False for an empty tensor and after Release().
  bool allocated() const { return data_ != nullptr; }

  // Typed access to CPU storage. Abort when the dtype differs or the tensor is not allocated.
  float* f32();
  const float* f32() const;
  uint16_t* bf16();
  const uint16_t* bf16() const;
  void* raw();
  const void* raw() const;

  // Element i (flat index) as float, whatever the dtype; Set rounds to the dtype.
  float Get(int64_t i) const;
  void Set(int64_t i, float value);
  std::vector<float> ToVector() const;

  // Frees the storage (the tracker is credited) but keeps shape, dtype and category: FSDP frees gathered
  // parameters this way. Allocate() brings zeroed storage back (no-op when allocated).
  void Release();
  void Allocate();

  // Same data, new shape of equal numel.
  void Reshape(Shape shape);
  // A copy in `dtype` (rounding to nearest-even into bf16), counted under `category`.
  Tensor To(DType dtype, MemCategory category) const;
  Tensor To(DType dtype) const { return To(dtype, category_); }
  // Re-files the bytes under another category (a gradient buffer lent to communication, say).
  void SetCategory(MemCategory category);

  std::string DebugString(int max_elements = 8) const;

 private:
  void AllocateStorage();
  void FreeStorage();

  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCpu;
  MemCategory category_ = MemCategory::kActivations;
  MemoryTracker* tracker_ = nullptr;
  uint8_t* data_ = nullptr;
};

}  // namespace distlab::tensor

#endif  // DISTLAB_REFERENCE_TENSOR_TENSOR_H_
