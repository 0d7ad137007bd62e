// Key-value stores for rendezvous: how ranks started as separate processes find each other.
//
// A store maps string keys to byte strings. Ranks write what the others need (Gloo's listening addresses,
// NCCL's unique id, each rank's WORLD_SIZE) and wait for the keys of the others. Keys are written once; a
// value is never changed after it is set, so a reader that saw a key sees its final value.
//
//  * TcpStore: rank 0 serves the keys from a thread of its own process (MASTER_ADDR:MASTER_PORT, torchrun's
//    convention); every rank, rank 0 included, is a client. Works across machines. Connecting retries until
//    the timeout, so ranks may start in any order; an unreachable server is an UNAVAILABLE error naming the
//    address, never a hang.
//  * FileStore: one file per key in a directory every rank can read (one machine, or a shared filesystem).
//
// Every wait takes a timeout; a key that does not appear in time is DEADLINE_EXCEEDED naming the key.
#ifndef DISTLAB_REFERENCE_COMM_STORE_H_
#define DISTLAB_REFERENCE_COMM_STORE_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace distlab::comm {

class Store {
 public:
  virtual ~Store();

  // Sets key to value (keys are written once; a second Set of a key replaces its value).
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  // The value of key, or NOT_FOUND at once when it is not set.
  virtual absl::StatusOr<std::string> TryGet(const std::string& key) = 0;
  // "tcp store 10.0.0.1:29500" / "file store /tmp/x": names the store in error messages.
  virtual std::string Describe() const = 0;

  // Waits until key is set (polling TryGet), then returns its value.
  absl::StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout);
  // Waits until every key is set. DEADLINE_EXCEEDED names the keys still missing.
  // `seen` (optional) receives which keys were found.
  absl::Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                    std::vector<bool>* seen = nullptr);
};

class TcpStore final : public Store {
 public:
  // serve: start the server on `port` of every interface first (port 0 picks a free one; see port()).
  // Then connect to host:port, retrying until `timeout`.
  static absl::StatusOr<std::unique_ptr<TcpStore>> Create(const std::string& host, int port, bool serve,
                                                          std::chrono::milliseconds timeout);
  ~TcpStore() override;

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> TryGet(const std::string& key) override;
  std::string Describe() const override;
  int port() const;

  struct Impl;

 private:
  explicit TcpStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class FileStore final : public Store {
 public:
  // Creates `dir` if needed.
  static absl::StatusOr<std::unique_ptr<FileStore>> Create(const std::string& dir);

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> TryGet(const std::string& key) override;
  std::string Describe() const override { return "file store " + dir_; }
  const std::string& dir() const { return dir_; }

 private:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}
  std::string Path(const std::string& key) const;
  std::string dir_;
};

// A free TCP port of this machine (binds port 0 and releases it; another process may take it meanwhile).
absl::StatusOr<int> FreeTcpPort();

}  // namespace distlab::comm

#endif  // DISTLAB_REFERENCE_COMM_STORE_H_
