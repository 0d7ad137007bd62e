// Hidden tests of stage A: ShutdownWithDeadline and RunWithWatchdog, including a rank that never arrives,
// a rank that throws, and a rank that is busy (not communicating) when another fails. Every case draws what
// the behaviour does not depend on from the grading seed: rank counts, which rank fails or hangs and how,
// deadlines and timeouts (within bounds that keep each case well under a second or two), activities, error
// codes and messages, the types of thrown exceptions. The draws keep what makes each case bite: a stuck rank
// other than rank 0, at least two unfinished ranks, a busy rank beside the one that fails. A failure shows
// the scenario and what came back, and ends with the seed (testing::SeedNote()).
#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "labs/collectives/lifecycle.h"
#include "tests/collectives/test_util.h"
#include "tools/testing/test_support.h"

namespace distlab::collectives {
namespace {

using std::chrono::milliseconds;
using testing::CaseRandom;
using testing::SeedNote;
using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Opens a gate when it goes out of scope, so a held-up stream is always released before it is destroyed.
struct Gate {
  std::atomic<bool> open{false};
  ~Gate() { open = true; }
  void HoldUp(comm::Stream& s) {
    s.Enqueue([this] {
      while (!open) std::this_thread::sleep_for(milliseconds(1));
      return absl::OkStatus();
    });
  }
};

int Draw(CaseRandom& rng, int lo, int hi) { return static_cast<int>(rng.Int(lo, hi)); }

// What a rank is doing, e.g. "loading shard 17".
std::string Activity(CaseRandom& rng) {
  static const std::vector<std::string> kWhat = {
      "loading shard",    "forward pass of step", "all-reduce of bucket",  "writing checkpoint",
      "evaluating batch", "prefetching batch",    "backward pass of layer"};
  return rng.Pick(kWhat) + " " + std::to_string(rng.Int(0, 999));
}

// An error text, e.g. "bad checksum in block 31".
std::string Problem(CaseRandom& rng) {
  static const std::vector<std::string> kWhat = {
      "file not found: shard-",        "NaN in the loss at step ",    "bad checksum in block ",
      "no space left for checkpoint ", "batch of 0 samples at step ", "learning rate < 0 at step "};
  return rng.Pick(kWhat) + std::to_string(rng.Int(0, 9999));
}

absl::Status AllReduceOnce(comm::Comm& comm, comm::Stream& stream, float* x) {
  return comm.AllReduce(x, x, 1, comm::DataType::kF32, comm::RedOp::kSum, stream);
}

bool Has(const absl::Status& s, const std::string& part) {
  return s.message().find(part) != absl::string_view::npos;
}

// --- ShutdownWithDeadline ---------------------------------------------------------------------------------

// n ranks each launch a drawn number of all-reduces (ranks 1.. on their own threads), all of which finish;
// then every rank shuts down with a generous deadline: each must be destroyed, not aborted.
TEST(ShutdownWithDeadline, DestroysWhenWorkIsDone) {
  CaseRandom rng;
  const int n = Draw(rng, 2, 4), calls = Draw(rng, 1, 3);
  std::vector<float> x(n);
  float sum = 0;
  for (float& v : x) sum += (v = static_cast<float>(rng.Int(-20, 20)));
  const std::string input = std::to_string(n) + " ranks after " + std::to_string(calls) +
                            " finished all-reduce" + (calls > 1 ? "s" : "");
  ASSERT_OK_AND_ASSIGN(auto comms, comm::CommInitAll(n, testutil::Options()));
  std::vector<std::unique_ptr<comm::Stream>> streams;
  for (int r = 0; r < n; ++r) streams.push_back(std::make_unique<comm::Stream>());
  std::vector<absl::Status> launched(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      for (int k = 0; k < calls && launched[r].ok(); ++k)
        launched[r] = AllReduceOnce(*comms[r], *streams[r], &x[r]);
      if (launched[r].ok()) launched[r] = streams[r]->Synchronize();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) ASSERT_OK(launched[r]) << input << ": rank " << r << "\n" << SeedNote();
  for (int r = 0; r < n; ++r) {
    ASSERT_OK_AND_ASSIGN(ShutdownResult res,
                         ShutdownWithDeadline(*comms[r], *streams[r], testing::Scaled(milliseconds(2000))));
    EXPECT_EQ(res, ShutdownResult::kDestroyed) << input << ": rank " << r << " was not destroyed\n"
                                               << SeedNote();
    EXPECT_TRUE(comms[r]->released()) << input << ": rank " << r << "\n" << SeedNote();
  }
  float want = sum;
  for (int k = 1; k < calls; ++k) want *= n;
  EXPECT_EQ(x[0], want) << input << ": the all-reduce result changed\n" << SeedNote();
}

// Work that finishes before the deadline must be waited for, not aborted.
TEST(ShutdownWithDeadline, WaitsForSlowWorkThatFinishesInTime) {
  CaseRandom rng;
  const int tasks = Draw(rng, 1, 3);
  std::vector<int> ms(tasks);
  for (int& m : ms) m = Draw(rng, 20, 60);
  ASSERT_OK_AND_ASSIGN(auto comms, comm::CommInitAll(1, testutil::Options()));
  comm::Stream s;
  std::atomic<int> ran{0};
  std::string input = "a stream with " + std::to_string(tasks) + " queued task(s) of";
  for (int m : ms) {
    input += " " + std::to_string(m) + " ms";
    s.Enqueue([&ran, m] {
      std::this_thread::sleep_for(milliseconds(m));
      ++ran;
      return absl::OkStatus();
    });
  }
  input += ", deadline 3 s";
  ASSERT_OK_AND_ASSIGN(ShutdownResult res,
                       ShutdownWithDeadline(*comms[0], s, testing::Scaled(milliseconds(3000))));
  EXPECT_EQ(res, ShutdownResult::kDestroyed) << input << ": aborted work that finished in time\n"
                                             << SeedNote();
  EXPECT_EQ(ran, tasks) << input << ": returned before the pending work had finished\n" << SeedNote();
}

// Rank 0's share of an all-reduce waits on its stream for ranks 1.., whose streams are held up: the deadline
// passes, rank 0 is aborted within the bound of lifecycle.h (deadline + 400 ms, scaled), and the held-up
// ranks' all-reduces then fail ABORTED.
TEST(ShutdownWithDeadline, AbortsStuckWorkWithinTheBound) {
  CaseRandom rng;
  const int n = Draw(rng, 2, 4), deadline = Draw(rng, 60, 200);
  const std::string input = "rank 0 of " + std::to_string(n) +
                            " waiting in an all-reduce for held-up ranks, deadline " +
                            std::to_string(deadline) + " ms";
  ASSERT_OK_AND_ASSIGN(auto comms, comm::CommInitAll(n, testutil::Options()));
  std::vector<std::unique_ptr<comm::Stream>> streams;
  for (int r = 0; r < n; ++r) streams.push_back(std::make_unique<comm::Stream>());
  Gate gate;
  for (int r = 1; r < n; ++r) gate.HoldUp(*streams[r]);
  std::vector<float> x(n, 1);
  std::vector<std::thread> threads;
  for (int r = 1; r < n; ++r) {
    threads.emplace_back([&, r] { (void)AllReduceOnce(*comms[r], *streams[r], &x[r]); });
  }
  ASSERT_OK(AllReduceOnce(*comms[0], *streams[0], &x[0]));
  for (auto& t : threads) t.join();
  const auto t0 = Clock::now();
  ASSERT_OK_AND_ASSIGN(ShutdownResult res,
                       ShutdownWithDeadline(*comms[0], *streams[0], milliseconds(deadline)));
  const double ms = MsSince(t0);
  EXPECT_EQ(res, ShutdownResult::kAborted) << input << ": not aborted\n" << SeedNote();
  EXPECT_GE(ms, deadline - 5) << input << ": aborted after " << ms << " ms, before the deadline\n"
                              << SeedNote();
  EXPECT_LT(ms, deadline + testing::Scaled(milliseconds(400)).count())
      << input << ": took " << ms << " ms, longer than deadline + 400 ms\n"
      << SeedNote();
  EXPECT_TRUE(comms[0]->released()) << input << "\n" << SeedNote();
  gate.open = true;
  for (int r = 1; r < n; ++r) {
    absl::Status s = streams[r]->Synchronize();
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted)
        << input << ": rank " << r << "'s all-reduce ended " << s << "\n"
        << SeedNote();
    (void)comms[r]->Abort();
  }
}

// Work that ignores the abort (a stream task that keeps running): the call still returns within the bound
// of lifecycle.h, deadline + 400 ms (scaled), not when the work ends -- an implementation that waits for
// the stream to drain takes the 5 s the task runs.
TEST(ShutdownWithDeadline, BoundedEvenWhenTheWorkIgnoresTheAbort) {
  CaseRandom rng;
  const int deadline = Draw(rng, 60, 200);
  const std::string input =
      "a stream task that ignores the abort and runs for 5 s, deadline " + std::to_string(deadline) + " ms";
  ASSERT_OK_AND_ASSIGN(auto comms, comm::CommInitAll(1, testutil::Options()));
  comm::Stream s;
  Gate gate;
  std::atomic<bool> started{false};
  s.Enqueue([&] {
    started = true;
    const auto give_up = Clock::now() + std::chrono::seconds(5);
    while (!gate.open && Clock::now() < give_up) std::this_thread::sleep_for(milliseconds(1));
    return absl::OkStatus();
  });
  while (!started) std::this_thread::sleep_for(milliseconds(1));
  const auto t0 = Clock::now();
  ASSERT_OK_AND_ASSIGN(ShutdownResult res, ShutdownWithDeadline(*comms[0], s, milliseconds(deadline)));
  const double ms = MsSince(t0);
  gate.open = true;
  EXPECT_EQ(res, ShutdownResult::kAborted) << input << "\n" << SeedNote();
  EXPECT_TRUE(comms[0]->released()) << input << "\n" << SeedNote();
  EXPECT_GE(ms, deadline - 5) << input << ": aborted after " << ms << " ms, before the deadline\n"
                              << SeedNote();
  EXPECT_LT(ms, deadline + testing::Scaled(milliseconds(400)).count())
      << input << ": took " << ms << " ms: waited for work that ignores the abort instead of giving up after "
      << "the grace period\n"
      << SeedNote();
  (void)s.Synchronize();
}

// A negative deadline is INVALID_ARGUMENT; a communicator already destroyed or aborted is
// FAILED_PRECONDITION.
TEST(ShutdownWithDeadline, RejectsReleasedCommAndNegativeDeadline) {
  CaseRandom rng;
  const int negative = Draw(rng, -1000, -1), deadline = Draw(rng, 0, 50);
  const bool destroy = rng.Chance(0.5);
  ASSERT_OK_AND_ASSIGN(auto comms, comm::CommInitAll(1, testutil::Options()));
  comm::Stream s;
  EXPECT_EQ(ShutdownWithDeadline(*comms[0], s, milliseconds(negative)).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "deadline " << negative << " ms\n"
      << SeedNote();
  ASSERT_OK(destroy ? comms[0]->Destroy() : comms[0]->Abort());
  EXPECT_EQ(ShutdownWithDeadline(*comms[0], s, milliseconds(deadline)).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "deadline " << deadline << " ms on a communicator already " << (destroy ? "destroyed" : "aborted")
      << "\n"
      << SeedNote();
}

// --- RunWithWatchdog --------------------------------------------------------------------------------------

// n ranks each all-reduce their value a drawn number of times; every result comes back and the run is OK.
TEST(RunWithWatchdog, HealthyRunReturnsOkAndResults) {
  CaseRandom rng;
  const int n = Draw(rng, 2, 6), steps = Draw(rng, 1, 4);
  std::vector<float> start(n), result(n, 0);
  float want = 0;
  for (float& v : start) want += (v = static_cast<float>(rng.Int(-20, 20)));
  for (int k = 1; k < steps; ++k) want *= n;
  const std::string input =
      std::to_string(n) + " healthy ranks, " + std::to_string(steps) + " all-reduces each";
  absl::Status s = RunWithWatchdog(
      n,
      [&](int rank, comm::Comm& comm, comm::Stream& stream, RankActivity& activity) -> absl::Status {
        float x = start[rank];
        for (int i = 0; i < steps; ++i) {
          activity.Set("all-reduce " + std::to_string(i));
          absl::Status s = AllReduceOnce(comm, stream, &x);
          if (!s.ok()) return s;
          s = stream.Synchronize();
          if (!s.ok()) return s;
        }
        result[rank] = x;
        return absl::OkStatus();
      },
      testing::Scaled(milliseconds(5000)), testutil::Options());
  EXPECT_OK(s) << input << "\n" << SeedNote();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(result[r], want) << input << ": rank " << r << "'s result did not come back\n" << SeedNote();
  }
}

// One of the standard exception types, thrown with `what`.
[[noreturn]] void ThrowStandard(int kind, const std::string& what) {
  switch (kind) {
    case 0:
      throw std::runtime_error(what);
    case 1:
      throw std::logic_error(what);
    case 2:
      throw std::out_of_range(what);
    case 3:
      throw std::invalid_argument(what);
    case 4:
      throw std::length_error(what);
    case 5:
      throw std::domain_error(what);
    case 6:
      throw std::range_error(what);
    default:
      throw std::overflow_error(what);
  }
}
const char* const kStandardNames[] = {"std::runtime_error",    "std::logic_error",   "std::out_of_range",
                                      "std::invalid_argument", "std::length_error",  "std::domain_error",
                                      "std::range_error",      "std::overflow_error"};

// One rank throws before the all-reduce; the others wait in it. The run must end quickly (the watchdog
// aborts the waiting ranks) and report the thrower's exception and activity.
TEST(RunWithWatchdog, RankThatThrows) {
  CaseRandom rng;
  const int n = Draw(rng, 3, 6), thrower = Draw(rng, 0, n - 1), kind = Draw(rng, 0, 7);
  const std::string doing = Activity(rng), what = Problem(rng);
  const std::string input = "rank " + std::to_string(thrower) + " of " + std::to_string(n) + " throws " +
                            kStandardNames[kind] + "(\"" + what + "\") while '" + doing +
                            "'; the others wait in an all-reduce";
  const milliseconds timeout = testing::Scaled(milliseconds(4000));
  const auto t0 = Clock::now();
  absl::Status s = RunWithWatchdog(
      n,
      [&](int rank, comm::Comm& comm, comm::Stream& stream, RankActivity& activity) -> absl::Status {
        if (rank == thrower) {
          activity.Set(doing);
          ThrowStandard(kind, what);
        }
        activity.Set("gradient all-reduce");
        float x = 1;
        return AllReduceOnce(comm, stream, &x);
      },
      timeout, testutil::Options());
  const std::string got = "; RunWithWatchdog returned " + s.ToString() + "\n" + SeedNote();
  ASSERT_FALSE(s.ok()) << input << got;
  EXPECT_TRUE(Has(s, "rank " + std::to_string(thrower))) << input << ": the thrower is not named" << got;
  EXPECT_TRUE(Has(s, doing)) << input << ": its activity is missing" << got;
  EXPECT_TRUE(Has(s, what)) << input << ": what() is missing" << got;
  EXPECT_NE(s.code(), absl::StatusCode::kAborted)
      << input << ": reported a consequence (an abort), not the cause" << got;
  EXPECT_LT(MsSince(t0), timeout.count() / 2.0)
      << input << ": waited for the timeout instead of reacting to the failure" << got;
}

const absl::StatusCode kCodes[] = {
    absl::StatusCode::kInvalidArgument,    absl::StatusCode::kNotFound,        absl::StatusCode::kDataLoss,
    absl::StatusCode::kResourceExhausted,  absl::StatusCode::kOutOfRange,      absl::StatusCode::kUnavailable,
    absl::StatusCode::kFailedPrecondition, absl::StatusCode::kPermissionDenied};

absl::StatusCode DrawCode(CaseRandom& rng) {
  return rng.Pick(std::vector<absl::StatusCode>(std::begin(kCodes), std::end(kCodes)));
}

// A rank that returns an error: its code and message come back, prefixed with the rank and its activity.
TEST(RunWithWatchdog, RankErrorKeepsItsCode) {
  CaseRandom rng;
  const int n = Draw(rng, 2, 5), failing = Draw(rng, 0, n - 1);
  const absl::StatusCode code = DrawCode(rng);
  const std::string doing = Activity(rng), what = Problem(rng);
  const absl::Status error(code, what);
  const std::string input = "rank " + std::to_string(failing) + " of " + std::to_string(n) + " returns " +
                            error.ToString() + " while '" + doing + "'; the others wait in an all-reduce";
  absl::Status s = RunWithWatchdog(
      n,
      [&](int rank, comm::Comm& comm, comm::Stream& stream, RankActivity& activity) -> absl::Status {
        if (rank == failing) {
          activity.Set(doing);
          return error;
        }
        activity.Set("all-reduce");
        float x = 1;
        return AllReduceOnce(comm, stream, &x);
      },
      testing::Scaled(milliseconds(4000)), testutil::Options());
  const std::string got = "; RunWithWatchdog returned " + s.ToString() + "\n" + SeedNote();
  EXPECT_EQ(s.code(), code) << input << ": the rank's code is lost" << got;
  EXPECT_TRUE(Has(s, "rank " + std::to_string(failing))) << input << ": the rank is not named" << got;
  EXPECT_TRUE(Has(s, doing)) << input << ": its activity is missing" << got;
  EXPECT_TRUE(Has(s, what)) << input << ": its message is missing" << got;
}

// One rank (not rank 0) never arrives at the all-reduce: it is stuck, watching only for its own communicator
// to be released. After the timeout every rank is aborted; the error names the stuck rank and what it was
// doing, and arrives within timeout + a small bound.
TEST(RunWithWatchdog, RankThatNeverArrives) {
  CaseRandom rng;
  const int n = Draw(rng, 3, 6), stuck = Draw(rng, 1, n - 1), timeout_ms = Draw(rng, 200, 400);
  const std::string doing = Activity(rng);
  const std::string input = "rank " + std::to_string(stuck) + " of " + std::to_string(n) + " stuck in '" +
                            doing + "' while the others wait in an all-reduce, timeout " +
                            std::to_string(timeout_ms) + " ms";
  const milliseconds timeout(timeout_ms);
  const auto t0 = Clock::now();
  absl::Status s = RunWithWatchdog(
      n,
      [&](int rank, comm::Comm& comm, comm::Stream& stream, RankActivity& activity) -> absl::Status {
        if (rank == stuck) {
          activity.Set(doing);
          const auto give_up = Clock::now() + std::chrono::seconds(20);
          while (!comm.released() && Clock::now() < give_up) std::this_thread::sleep_for(milliseconds(1));
          return absl::OkStatus();
        }
        activity.Set("all-reduce");
        float x = 1;
        return AllReduceOnce(comm, stream, &x);
      },
      timeout, testutil::Options());
  const double ms = MsSince(t0);
  const std::string got = "; RunWithWatchdog returned after " + std::to_string(static_cast<int>(ms)) +
                          " ms: " + s.ToString() + "\n" + SeedNote();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << input << got;
  EXPECT_TRUE(Has(s, "rank " + std::to_string(stuck))) << input << ": the stuck rank is not named" << got;
  EXPECT_TRUE(Has(s, doing)) << input << ": its activity is missing" << got;
  EXPECT_GE(ms, timeout_ms - 10) << input << ": returned before the timeout" << got;
  EXPECT_LT(ms, timeout_ms + testing::Scaled(milliseconds(1500)).count())
      << input << ": the watchdog did not end the run in time" << got;
}

// One rank throws while one or two others are busy computing (not in any communication; they only notice
// their OWN communicator being aborted) and the rest wait in an all-reduce. Aborting only the failed rank
// would leave the busy ranks running until their own 3-second give-up; every rank must be aborted.
TEST(RunWithWatchdog, AbortReleasesEveryRank) {
  CaseRandom rng;
  const int n = Draw(rng, 3, 6);
  std::vector<int> order(n);
  for (int r = 0; r < n; ++r) order[r] = r;
  rng.Shuffle(order);
  const int thrower = order[0], busy_count = n > 3 ? Draw(rng, 1, 2) : 1, delay = Draw(rng, 10, 40);
  std::vector<bool> busy(n, false);
  for (int i = 1; i <= busy_count; ++i) busy[order[i]] = true;
  const std::string what = Problem(rng);
  std::string input = "rank " + std::to_string(thrower) + " of " + std::to_string(n) + " throws after " +
                      std::to_string(delay) + " ms while rank";
  for (int r = 0; r < n; ++r) {
    if (busy[r]) input += " " + std::to_string(r);
  }
  input += " computes (watching only its own communicator) and the rest wait in an all-reduce";
  const auto t0 = Clock::now();
  std::atomic<int> gave_up{-1};
  absl::Status s = RunWithWatchdog(
      n,
      [&](int rank, comm::Comm& comm, comm::Stream& stream, RankActivity& activity) -> absl::Status {
        if (rank == thrower) {
          activity.Set("forward pass");
          std::this_thread::sleep_for(milliseconds(delay));
          throw std::runtime_error(what);
        }
        if (busy[rank]) {
          activity.Set("long computation");
          const auto give_up = Clock::now() + testing::Scaled(milliseconds(3000));
          while (!comm.released()) {
            if (Clock::now() > give_up) {
              gave_up = rank;
              return absl::InternalError("rank " + std::to_string(rank) + " was never released");
            }
            std::this_thread::sleep_for(milliseconds(1));
          }
          return absl::AbortedError("noticed the abort");
        }
        activity.Set("all-reduce");
        float x = 1;
        return AllReduceOnce(comm, stream, &x);
      },
      testing::Scaled(milliseconds(10000)), testutil::Options());
  const std::string got = "; RunWithWatchdog returned " + s.ToString() + "\n" + SeedNote();
  EXPECT_TRUE(Has(s, "rank " + std::to_string(thrower))) << input << ": the thrower is not named" << got;
  EXPECT_TRUE(Has(s, what)) << input << ": what() is missing" << got;
  EXPECT_EQ(gave_up, -1) << input << ": rank " << gave_up << " was never aborted (took " << MsSince(t0)
                         << " ms)" << got;
}

namespace thrown {
// Types of the test's own, to check that the name is the dynamic type, fully qualified and demangled.
template <int N>
struct ShardError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
namespace io {
template <int N>
struct ChecksumError : std::logic_error {
  using std::logic_error::logic_error;
};
}  // namespace io
struct NotAnException {
  int code;
};

constexpr int kVariants = 64;

template <int N>
[[noreturn]] void ThrowOwn(bool io, const std::string& what) {
  if (io) throw io::ChecksumError<N>(what);
  throw ShardError<N>(what);
}
template <int... N>
constexpr std::array<void (*)(bool, const std::string&), sizeof...(N)> Table(
    std::integer_sequence<int, N...>) {
  return {&ThrowOwn<N>...};
}
constexpr auto kThrowOwn = Table(std::make_integer_sequence<int, kVariants>());

// How the C++ runtime demangles the types above (the enclosing anonymous namespace included).
std::string OwnName(int variant, bool io) {
  return std::string("distlab::collectives::(anonymous namespace)::thrown::") +
         (io ? "io::ChecksumError<" : "ShardError<") + std::to_string(variant) + ">";
}
}  // namespace thrown

// lifecycle.h: "threw <type>: <what>" with the demangled dynamic type; "threw a non-standard exception"
// for anything else; code INTERNAL; the rank and its activity first. Three runs: a type of the test's own
// (one of 128), a standard one (one of 8), and something that is not a std::exception.
TEST(RunWithWatchdog, ThrownTypeNamesAreDemangled) {
  CaseRandom rng;
  const int n = Draw(rng, 2, 5), thrower = Draw(rng, 0, n - 1);
  const std::string doing = Activity(rng);
  const int variant = Draw(rng, 0, thrown::kVariants - 1), standard = Draw(rng, 0, 7), odd = Draw(rng, 0, 2);
  const bool io = rng.Chance(0.5);
  const std::string what = Problem(rng);
  auto run = [&](int kind) {
    return RunWithWatchdog(
        n,
        [&, kind](int rank, comm::Comm& comm, comm::Stream& stream, RankActivity& activity) -> absl::Status {
          if (rank == thrower) {
            activity.Set(doing);
            if (kind == 0) thrown::kThrowOwn[variant](io, what);
            if (kind == 1) ThrowStandard(standard, what);
            if (odd == 0) throw std::string(what);
            if (odd == 1) throw variant;
            throw thrown::NotAnException{variant};
          }
          activity.Set("all-reduce");
          float x = 1;
          return AllReduceOnce(comm, stream, &x);
        },
        testing::Scaled(milliseconds(5000)), testutil::Options());
  };
  const std::string prefix = "rank " + std::to_string(thrower) + " failed while '" + doing + "': threw ";
  const std::string form =
      "lifecycle.h's form is \"rank R failed while '<activity>': threw <the dynamic type, demangled>: "
      "<what()>\" "
      "(\"...: threw a non-standard exception\" for anything else), code INTERNAL";
  const std::string scene = "rank " + std::to_string(thrower) + " of " + std::to_string(n) + " throws ";
  struct Run {
    std::string thrown, want;
  };
  const Run runs[] = {{thrown::OwnName(variant, io) + "(\"" + what + "\")",
                       prefix + thrown::OwnName(variant, io) + ": " + what},
                      {std::string(kStandardNames[standard]) + "(\"" + what + "\")",
                       prefix + kStandardNames[standard] + ": " + what},
                      {odd == 0   ? "a std::string"
                       : odd == 1 ? "an int"
                                  : "a struct that is not a std::exception",
                       prefix + "a non-standard exception"}};
  for (int kind = 0; kind < 3; ++kind) {
    const absl::Status s = run(kind);
    if (s.code() != absl::StatusCode::kInternal || s.message() != runs[kind].want) {
      ADD_FAILURE() << scene << runs[kind].thrown << " while '" << doing << "'; RunWithWatchdog returned "
                    << s.ToString() << "\n"
                    << form << "\n"
                    << SeedNote();
    }
  }
}

// Several ranks never finish: all of them, in rank order, "; "-separated (lifecycle.h).
TEST(RunWithWatchdog, EveryUnfinishedRankInRankOrder) {
  CaseRandom rng;
  const int n = Draw(rng, 4, 7), timeout_ms = Draw(rng, 200, 400);
  std::vector<int> order(n);
  for (int r = 0; r < n; ++r) order[r] = r;
  rng.Shuffle(order);
  const int unfinished = Draw(rng, 2, n - 1);
  std::vector<std::string> doing(n);  // "" for a rank that finishes
  for (int i = 0; i < unfinished; ++i) doing[order[i]] = Activity(rng);
  std::string input =
      std::to_string(n) + " ranks, timeout " + std::to_string(timeout_ms) + " ms; never finishing:";
  std::string want;
  for (int r = 0; r < n; ++r) {
    if (doing[r].empty()) continue;
    input += " rank " + std::to_string(r) + " ('" + doing[r] + "')";
    want += (want.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) +
            " did not finish within " + std::to_string(timeout_ms) + " ms while '" + doing[r] + "'";
  }
  absl::Status s = RunWithWatchdog(
      n,
      [&](int rank, comm::Comm& comm, comm::Stream&, RankActivity& activity) -> absl::Status {
        if (doing[rank].empty()) return absl::OkStatus();
        activity.Set(doing[rank]);
        const auto give_up = Clock::now() + std::chrono::seconds(20);
        while (!comm.released() && Clock::now() < give_up) std::this_thread::sleep_for(milliseconds(1));
        return absl::OkStatus();
      },
      milliseconds(timeout_ms), testutil::Options());
  if (s.code() != absl::StatusCode::kDeadlineExceeded || s.message() != want) {
    ADD_FAILURE()
        << input << "; RunWithWatchdog returned " << s.ToString()
        << "\nlifecycle.h: DEADLINE_EXCEEDED naming every unfinished rank in increasing rank order, "
           "each \"rank R did not finish within T ms while '<activity>'\", joined by \"; \"\n"
        << SeedNote();
  }
}

// An error the stream reports at the end counts as the rank's failure.
TEST(RunWithWatchdog, StreamErrorsCount) {
  CaseRandom rng;
  const int n = Draw(rng, 2, 5), failing = Draw(rng, 0, n - 1);
  const absl::StatusCode code = DrawCode(rng);
  const std::string what = Problem(rng);
  const absl::Status error(code, what);
  const std::string input = "rank " + std::to_string(failing) + " of " + std::to_string(n) +
                            " returns OK, but a task on its stream reports " + error.ToString();
  absl::Status s = RunWithWatchdog(
      n,
      [&](int rank, comm::Comm&, comm::Stream& stream, RankActivity& activity) -> absl::Status {
        activity.Set("enqueued work");
        if (rank == failing) stream.Enqueue([error] { return error; });
        return absl::OkStatus();
      },
      testing::Scaled(milliseconds(4000)), testutil::Options());
  const std::string got = "; RunWithWatchdog returned " + s.ToString() + "\n" + SeedNote();
  EXPECT_EQ(s.code(), code) << input << got;
  EXPECT_TRUE(Has(s, "rank " + std::to_string(failing))) << input << ": the rank is not named" << got;
  EXPECT_TRUE(Has(s, what)) << input << ": the stream's message is missing" << got;
}

TEST(RunWithWatchdog, RejectsBadArguments) {
  CaseRandom rng;
  const int bad_n = Draw(rng, -3, 0), n = Draw(rng, 1, 4), bad_timeout = Draw(rng, -100, 0);
  auto body = [](int, comm::Comm&, comm::Stream&, RankActivity&) { return absl::OkStatus(); };
  EXPECT_EQ(RunWithWatchdog(bad_n, body, milliseconds(100)).code(), absl::StatusCode::kInvalidArgument)
      << "n = " << bad_n << "\n"
      << SeedNote();
  EXPECT_EQ(RunWithWatchdog(n, body, milliseconds(bad_timeout)).code(), absl::StatusCode::kInvalidArgument)
      << "timeout " << bad_timeout << " ms\n"
      << SeedNote();
}

}  // namespace
}  // namespace distlab::collectives
