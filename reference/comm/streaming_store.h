// Non-temporal (streaming) stores, shared by the threads backend's copies into user buffers
// (threads_comm.cc) and the reduction that writes its outputs in one pass (ReduceToOutputs in types.cc).
// They skip the read-for-ownership of every destination line and leave the caches to the inputs. Sanitizer
// builds use memcpy, so that ASan and TSan see every write of a user buffer. Not part of the API: code
// outside reference/comm must not include it.
#ifndef DISTLAB_REFERENCE_COMM_STREAMING_STORE_H_
#define DISTLAB_REFERENCE_COMM_STREAMING_STORE_H_

#include <cstring>

#if defined(__SSE2__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#include <emmintrin.h>
#define DISTLAB_COMM_STREAMING_STORES 1
#else
#define DISTLAB_COMM_STREAMING_STORES 0
#endif

namespace distlab::comm::internal {

// Whether Stream64 streams (else it is memcpy).
inline constexpr bool kStreamingStores = DISTLAB_COMM_STREAMING_STORES;

#if DISTLAB_COMM_STREAMING_STORES
// Writes the 64 bytes at src (any alignment) to dst (16-byte aligned) with non-temporal stores.
inline void Stream64(void* dst, const void* src) {
  const __m128i* s = static_cast<const __m128i*>(src);
  __m128i* d = static_cast<__m128i*>(dst);
  const __m128i a = _mm_loadu_si128(s), b = _mm_loadu_si128(s + 1);
  const __m128i c = _mm_loadu_si128(s + 2), e = _mm_loadu_si128(s + 3);
  _mm_stream_si128(d, a);
  _mm_stream_si128(d + 1, b);
  _mm_stream_si128(d + 2, c);
  _mm_stream_si128(d + 3, e);
}
// Streaming stores are weakly ordered: makes them visible before peers are told the writes are done.
inline void StoreFence() { _mm_sfence(); }
#else
inline void Stream64(void* dst, const void* src) { std::memcpy(dst, src, 64); }
inline void StoreFence() {}
#endif

}  // namespace distlab::comm::internal

#undef DISTLAB_COMM_STREAMING_STORES

#endif  // DISTLAB_REFERENCE_COMM_STREAMING_STORE_H_
