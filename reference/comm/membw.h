// The physical bound of the threads backend: how fast this machine copies memory.
//
// B = bytes copied per second by memcpy on `threads` threads, each copying its share of `bytes` (a copy of S
// bytes counts S). A collective on n ranks of one machine must read and write its arrays through this same
// memory system, e.g. an all-reduce reads n*S and writes n*S, so its algbw is at most B/n.
#ifndef DISTLAB_REFERENCE_COMM_MEMBW_H_
#define DISTLAB_REFERENCE_COMM_MEMBW_H_

#include <cstddef>
#include <vector>

namespace distlab::comm {

// Best of a few repetitions of `threads` threads copying bytes/threads each (buffers allocated and touched
// before timing); a repetition repeats the copy until at least 32 MiB have moved, so that small sizes time
// the copy (from cache, as a collective of that size would find its buffers) and not the threads' start.
// bytes >= 1, threads >= 1 (smaller values are raised to 1).
double MeasureCopyBandwidth(size_t bytes, int threads);

// One copy of `bytes` from each src[i] to dst[i] (equal sizes), on `threads` threads started together, each
// copying an equal share of the whole (the buffers laid end to end): the seconds from the moment every thread
// is spinning until the last one finishes. For a benchmark that times, beside each call of a collective, a
// copy of the same traffic on the collective's own buffers: on a machine whose memory bandwidth drifts from
// second to second (a shared VM) the two halves of a back-to-back pair see the same machine and the same
// pages. src.size() == dst.size(); threads >= 1 (smaller is raised to 1).
double TimeCopy(const std::vector<const void*>& src, const std::vector<void*>& dst, size_t bytes,
                int threads);

// std::thread::hardware_concurrency(), at least 1.
int HardwareThreads();

}  // namespace distlab::comm

#endif  // DISTLAB_REFERENCE_COMM_MEMBW_H_
