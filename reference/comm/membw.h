// The physical bound of the threads backend: how fast this machine copies memory.
//
// B = bytes copied per second by memcpy on `threads` threads, each copying its share of `bytes` (a copy of S
// bytes counts S). A collective on n ranks of one machine must read and write its arrays through this same
// memory system, e.g. an all-reduce reads n*S and writes n*S, so its algbw is at most B/n.
#ifndef DISTLAB_REFERENCE_COMM_MEMBW_H_
#define DISTLAB_REFERENCE_COMM_MEMBW_H_

#include <cstddef>

namespace distlab::comm {

// Best of a few repetitions of `threads` threads copying bytes/threads each (buffers allocated and touched
// before timing); a repetition repeats the copy until at least 32 MiB have moved, so that small sizes time
// the copy (from cache, as a collective of that size would find its buffers) and not the threads' start.
// bytes >= 1, threads >= 1 (smaller values are raised to 1).
double MeasureCopyBandwidth(size_t bytes, int threads);

// std::thread::hardware_concurrency(), at least 1.
int HardwareThreads();

}  // namespace distlab::comm

#endif  // DISTLAB_REFERENCE_COMM_MEMBW_H_
