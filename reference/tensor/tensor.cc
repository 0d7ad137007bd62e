#include "reference/tensor/tensor.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace distlab::tensor {

size_t SizeOf(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }
const char* Name(DType dtype) { return dtype == DType::kF32 ? "f32" : "bf16"; }
const char* Name(Device device) { return device == Device::kCpu ? "cpu" : "cuda"; }

std::string ShapeString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) Fail("NumElements", "negative dimension in shape " + ShapeString(shape));
    n *= d;
  }
  return n;
}

void Fail(const std::string& where, const std::string& message) {
  std::fprintf(stderr, "distlab::tensor: %s: %s\n", where.c_str(), message.c_str());
  std::fflush(stderr);
  std::abort();
}

Tensor::Tensor() = default;

Tensor::Tensor(Shape shape, DType dtype, MemCategory category, MemoryTracker* tracker, Device device)
    : shape_(std::move(shape)), dtype_(dtype), device_(device), category_(category), tracker_(tracker) {
  numel_ = NumElements(shape_);
  if (device_ != Device::kCpu) {
    Fail("Tensor", std::string("device ") + Name(device_) +
                       " is not built in this runtime (only cpu); GPU storage comes with the cuda backend");
  }
  AllocateStorage();
}

Tensor Tensor::Zeros(Shape shape, MemCategory category, DType dtype) {
  return Tensor(std::move(shape), dtype, category);
}

Tensor Tensor::FromVector(Shape shape, const std::vector<float>& values, MemCategory category) {
  Tensor t(std::move(shape), DType::kF32, category);
  if (static_cast<int64_t>(values.size()) != t.numel()) {
    Fail("Tensor::FromVector", std::to_string(values.size()) + " values for shape " + ShapeString(t.shape()) +
                                   " of " + std::to_string(t.numel()) + " elements");
  }
  if (!values.empty()) std::memcpy(t.data_, values.data(), t.bytes());
  return t;
}

Tensor::~Tensor() { FreeStorage(); }

Tensor::Tensor(const Tensor& other)
    : shape_(other.shape_),
      numel_(other.numel_),
      dtype_(other.dtype_),
      device_(other.device_),
      category_(other.category_),
      tracker_(CurrentTracker()) {
  if (other.allocated()) {
    AllocateStorage();
    std::memcpy(data_, other.data_, bytes());
  }
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) {
    Tensor copy(other);
    *this = std::move(copy);
  }
  return *this;
}

Tensor::Tensor(Tensor&& other) noexcept
    : shape_(std::move(other.shape_)),
      numel_(other.numel_),
      dtype_(other.dtype_),
      device_(other.device_),
      category_(other.category_),
      tracker_(other.tracker_),
      data_(other.data_) {
  other.data_ = nullptr;
  other.numel_ = 0;
  other.shape_.clear();
}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    FreeStorage();
    shape_ = std::move(other.shape_);
    numel_ = other.numel_;
    dtype_ = other.dtype_;
    device_ = other.device_;
    category_ = other.category_;
    tracker_ = other.tracker_;
    data_ = other.data_;
    other.data_ = nullptr;
    other.numel_ = 0;
    other.shape_.clear();
  }
  return *this;
}

void Tensor::AllocateStorage() {
  if (data_ != nullptr || numel_ == 0) {
    // Zero-element tensors need no storage but still count as allocated: give them a 1-byte block.
    if (data_ == nullptr) data_ = new uint8_t[1]();
    return;
  }
  data_ = new uint8_t[bytes()]();
  if (tracker_ != nullptr) tracker_->Allocate(category_, bytes());
}

void Tensor::FreeStorage() {
  if (data_ == nullptr) return;
  delete[] data_;
  data_ = nullptr;
  if (tracker_ != nullptr && numel_ > 0) tracker_->Free(category_, bytes());
}

int64_t Tensor::dim(int i) const {
  const int n = ndim();
  const int j = i < 0 ? i + n : i;
  if (j < 0 || j >= n) {
    Fail("Tensor::dim", "dimension " + std::to_string(i) + " of a tensor of shape " + ShapeString(shape_));
  }
  return shape_[j];
}

namespace {
void CheckAccess(const Tensor& t, DType want, const char* what) {
  if (!t.allocated()) Fail(what, "tensor of shape " + ShapeString(t.shape()) + " has no storage (released?)");
  if (t.dtype() != want) {
    Fail(what, std::string("tensor of shape ") + ShapeString(t.shape()) + " is " + Name(t.dtype()) +
                   ", not " + Name(want));
  }
}
}  // namespace

float* Tensor::f32() {
  CheckAccess(*this, DType::kF32, "Tensor::f32");
  return reinterpret_cast<float*>(data_);
}
const float* Tensor::f32() const {
  CheckAccess(*this, DType::kF32, "Tensor::f32");
  return reinterpret_cast<const float*>(data_);
}
uint16_t* Tensor::bf16() {
  CheckAccess(*this, DType::kBF16, "Tensor::bf16");
  return reinterpret_cast<uint16_t*>(data_);
}
const uint16_t* Tensor::bf16() const {
  CheckAccess(*this, DType::kBF16, "Tensor::bf16");
  return reinterpret_cast<const uint16_t*>(data_);
}
void* Tensor::raw() {
  if (!allocated()) Fail("Tensor::raw", "tensor of shape " + ShapeString(shape_) + " has no storage");
  return data_;
}
const void* Tensor::raw() const {
  if (!allocated()) Fail("Tensor::raw", "tensor of shape " + ShapeString(shape_) + " has no storage");
  return data_;
}

float Tensor::Get(int64_t i) const {
  if (i < 0 || i >= numel_) {
    Fail("Tensor::Get", "index " + std::to_string(i) + " out of range for shape " + ShapeString(shape_));
  }
  return dtype_ == DType::kF32 ? f32()[i] : BF16ToFloat(bf16()[i]);
}

void Tensor::Set(int64_t i, float value) {
  if (i < 0 || i >= numel_) {
    Fail("Tensor::Set", "index " + std::to_string(i) + " out of range for shape " + ShapeString(shape_));
  }
  if (dtype_ == DType::kF32) {
    f32()[i] = value;
  } else {
    bf16()[i] = FloatToBF16(value);
  }
}

std::vector<float> Tensor::ToVector() const {
  std::vector<float> v(numel_);
  for (int64_t i = 0; i < numel_; ++i) v[i] = Get(i);
  return v;
}

void Tensor::Release() { FreeStorage(); }

void Tensor::Allocate() {
  if (!allocated()) AllocateStorage();
}

void Tensor::Reshape(Shape shape) {
  if (NumElements(shape) != numel_) {
    Fail("Tensor::Reshape", "cannot reshape " + ShapeString(shape_) + " into " + ShapeString(shape));
  }
  shape_ = std::move(shape);
}

Tensor Tensor::To(DType dtype, MemCategory category) const {
  Tensor out(shape_, dtype, category);
  for (int64_t i = 0; i < numel_; ++i) out.Set(i, Get(i));
  return out;
}

void Tensor::SetCategory(MemCategory category) {
  if (category == category_) return;
  if (allocated() && tracker_ != nullptr && numel_ > 0) {
    tracker_->Free(category_, bytes());
    tracker_->Allocate(category, bytes());
  }
  category_ = category;
}

std::string Tensor::DebugString(int max_elements) const {
  std::string s = std::string("Tensor(") + Name(dtype_) + ShapeString(shape_);
  if (!allocated()) return s + ", released)";
  s += ", {";
  for (int64_t i = 0; i < numel_ && i < max_elements; ++i) {
    if (i) s += ", ";
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", Get(i));
    s += buf;
  }
  if (numel_ > max_elements) s += ", ...";
  return s + "})";
}

}  // namespace distlab::tensor
