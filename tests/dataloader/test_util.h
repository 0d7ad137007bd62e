// Shared by the hidden tests of Lab 2: leak checks (child processes, file descriptors, shared-memory
// segments) and small datasets whose samples say where they were made.
#ifndef DISTLAB_TESTS_DATALOADER_TEST_UTIL_H_
#define DISTLAB_TESTS_DATALOADER_TEST_UTIL_H_

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/dataloader/dataset.h"
#include "labs/dataloader/loader.h"

namespace distlab::dataloader::testing {

inline int CountOpenFds() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n - 1;  // the directory stream's own descriptor
}

inline std::vector<std::string> ShmEntries(const std::string& prefix) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (!prefix.empty() && name.compare(0, prefix.size(), prefix) == 0) out.push_back(name);
    }
    ::closedir(d);
  }
  return out;
}

// True when this process has no child at all (running or zombie).
inline bool NoChildren() {
  int status = 0;
  return ::waitpid(-1, &status, WNOHANG) == -1 && errno == ECHILD;
}

// Records the descriptors open at construction; Check() fails the test on any child, fd or segment left.
class LeakCheck {
 public:
  LeakCheck() : fds_(CountOpenFds()) {}
  void Check(const std::string& shm_prefix) const {
    EXPECT_TRUE(NoChildren()) << "a worker process was left behind (not reaped)";
    EXPECT_EQ(CountOpenFds(), fds_) << "file descriptors leaked";
    EXPECT_TRUE(ShmEntries(shm_prefix).empty())
        << "shared-memory segments left under /dev/shm/" << shm_prefix;
  }

 private:
  int fds_;
};

// Sample i = {i, worker id (-1 in the main process)}, shape [2].
class IotaDataset : public MapDataset {
 public:
  explicit IotaDataset(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  Sample Get(int64_t i) const override {
    const WorkerInfo* info = GetWorkerInfo();
    return Sample{{2}, {static_cast<float>(i), static_cast<float>(info ? info->id : -1)}};
  }

 private:
  int64_t n_;
};

}  // namespace distlab::dataloader::testing

#endif  // DISTLAB_TESTS_DATALOADER_TEST_UTIL_H_
