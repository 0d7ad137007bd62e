// Stream and Event: a worker thread per stream; events record the steady-clock time the stream reached them.
// A device backend (nccl) may attach a device queue to a stream (internal::AttachDevice): then Synchronize
// also waits for the device work, and events recorded on the stream are device events (CUDA events).
#include <chrono>
#include <exception>
#include <string>

#include "reference/comm/comm.h"
#include "reference/comm/internal.h"

namespace distlab::comm {

void Stream::Impl::Run() {
  std::unique_lock<std::mutex> lock(mu);
  while (true) {
    work_cv.wait(lock, [&] { return stop || !queue.empty(); });
    if (queue.empty()) return;  // stop requested and nothing left
    std::function<absl::Status()> work = std::move(queue.front());
    queue.pop_front();
    lock.unlock();
    absl::Status status;
    try {
      status = work();
    } catch (const std::exception& e) {
      status = absl::InternalError(std::string("stream work threw an exception: ") + e.what());
    } catch (...) {
      status = absl::InternalError("stream work threw a non-standard exception");
    }
    work = nullptr;  // release what the closure captured before reporting completion
    lock.lock();
    if (!status.ok() && error.ok()) error = internal::Fresh(status);
    ++completed;
    done_cv.notify_all();
  }
}

Stream::Stream() : impl_(std::make_unique<Impl>()) {
  impl_->worker = std::thread([impl = impl_.get()] { impl->Run(); });
}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->work_cv.notify_all();
  impl_->worker.join();
  impl_->device.reset();  // waits for the device work, then releases the device queue
}

absl::Status Stream::Synchronize() {
  internal::DeviceQueue* device = nullptr;
  absl::Status result;
  {
    std::unique_lock<std::mutex> lock(impl_->mu);
    const uint64_t target = impl_->enqueued;
    impl_->done_cv.wait(lock, [&] { return impl_->completed >= target; });
    result = internal::Fresh(impl_->error);
    impl_->error = absl::OkStatus();
    device = impl_->device.get();
  }
  if (device != nullptr) {
    absl::Status synced = device->Synchronize();
    if (result.ok()) result = synced;
  }
  return result;
}

void Stream::Enqueue(std::function<absl::Status()> work) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->device != nullptr) {
      // Host work runs after the device work launched before it.
      work = [device = impl_->device.get(), work = std::move(work)]() -> absl::Status {
        absl::Status synced = device->Synchronize();
        if (!synced.ok()) return synced;
        return work();
      };
    }
    impl_->queue.push_back(std::move(work));
    ++impl_->enqueued;
  }
  impl_->work_cv.notify_one();
}

bool Stream::Idle() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->completed == impl_->enqueued && (impl_->device == nullptr || impl_->device->Idle());
}

namespace internal {

DeviceQueue* AttachDevice(Stream& stream, const std::function<std::unique_ptr<DeviceQueue>()>& make) {
  Stream::Impl* impl = stream.impl();
  std::unique_lock<std::mutex> lock(impl->mu);
  if (impl->device == nullptr) impl->device = make();
  const uint64_t target = impl->enqueued;
  impl->done_cv.wait(lock, [&] { return impl->completed >= target; });
  return impl->device.get();
}

}  // namespace internal

// ---------------------------------------------------------------------------------------------------------

struct Event::State {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t generation = 0;  // bumped by each Record
  bool recorded = false;
  bool reached = false;
  std::chrono::steady_clock::time_point when;
  std::shared_ptr<internal::DeviceMarker> device;  // set when recorded on a stream with a device queue
};

Event::Event() : state_(std::make_shared<State>()) {}
Event::~Event() = default;

void Event::Record(Stream& stream) {
  internal::DeviceQueue* device = nullptr;
  {
    std::lock_guard<std::mutex> lock(stream.impl()->mu);
    device = stream.impl()->device.get();
  }
  if (device != nullptr) {
    // A device event, recorded after the host work enqueued so far (AttachDevice waits for it).
    std::shared_ptr<internal::DeviceMarker> marker =
        internal::AttachDevice(stream, [] { return nullptr; })->Record();
    std::lock_guard<std::mutex> lock(state_->mu);
    ++state_->generation;
    state_->recorded = true;
    state_->reached = false;
    state_->device = std::move(marker);
    return;
  }
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    generation = ++state_->generation;
    state_->recorded = true;
    state_->reached = false;
    state_->device = nullptr;
  }
  stream.Enqueue([state = state_, generation]() -> absl::Status {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(state->mu);
    if (state->generation == generation) {  // a later Record replaced this one otherwise
      state->when = now;
      state->reached = true;
      state->cv.notify_all();
    }
    return absl::OkStatus();
  });
}

absl::Status Event::Synchronize() {
  std::unique_lock<std::mutex> lock(state_->mu);
  if (!state_->recorded)
    return absl::FailedPreconditionError("Event::Synchronize: the event was never recorded");
  if (state_->device != nullptr) {
    std::shared_ptr<internal::DeviceMarker> marker = state_->device;
    lock.unlock();
    return marker->Synchronize();
  }
  state_->cv.wait(lock, [&] { return state_->reached; });
  return absl::OkStatus();
}

bool Event::Query() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->device != nullptr) return state_->device->Query();
  return state_->reached;
}

absl::StatusOr<double> Event::ElapsedMs(const Event& start, const Event& end) {
  std::shared_ptr<internal::DeviceMarker> d0, d1;
  {
    std::lock_guard<std::mutex> lock(start.state_->mu);
    d0 = start.state_->device;
  }
  {
    std::lock_guard<std::mutex> lock(end.state_->mu);
    d1 = end.state_->device;
  }
  if ((d0 == nullptr) != (d1 == nullptr)) {
    return absl::FailedPreconditionError(
        "Event::ElapsedMs: one event was recorded on a device (CUDA) stream and the other on a host stream");
  }
  if (d0 != nullptr) return d1->ElapsedMsSince(*d0);
  std::chrono::steady_clock::time_point t0, t1;
  for (auto [event, out, which] : {std::tuple{&start, &t0, "start"}, std::tuple{&end, &t1, "end"}}) {
    std::lock_guard<std::mutex> lock(event->state_->mu);
    if (!event->state_->recorded) {
      return absl::FailedPreconditionError(std::string("Event::ElapsedMs: the ") + which +
                                           " event was never recorded");
    }
    if (!event->state_->reached) {
      return absl::FailedPreconditionError(std::string("Event::ElapsedMs: the stream has not reached the ") +
                                           which + " event yet (Synchronize it first)");
    }
    *out = event->state_->when;
  }
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

}  // namespace distlab::comm
