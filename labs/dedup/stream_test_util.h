// Lab 3 (dedup), given; not graded: what the streaming tests (corpus_stream_test, set_file_test,
// stream_dedup_test, stream_ranks_test) share -- a fresh folder under the test's temporary directory, and the
// planted corpus of synthetic.h written as JSON-lines shards.
#ifndef DISTLAB_LABS_DEDUP_STREAM_TEST_UTIL_H_
#define DISTLAB_LABS_DEDUP_STREAM_TEST_UTIL_H_

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "labs/dedup/corpus_stream.h"
#include "labs/dedup/synthetic.h"
#include "nlohmann/json.hpp"

namespace distlab::dedup::stream_testing {

// TEST_TMPDIR/name (else /tmp/name), emptied and made.
inline std::string TmpDir(const std::string& name) {
  namespace fs = std::filesystem;
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(tmp ? tmp : "/tmp") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

struct PlantedShards {
  int shards = 1;
  std::string extension = ".jsonl";  // the codec, by CodecOf
  // Document d is named "doc<d>" by an "id"; with every_id = false only the even ones are, so the others
  // are named by shard and line.
  bool every_id = true;
  // > 0: a line that is not JSON after this many documents of the last shard.
  int bad_line = 0;
};

// The planted corpus split into `how.shards` files dir/part<s><extension>; returns their paths.
inline std::vector<std::string> WritePlanted(const synthetic::PlantedCorpus& planted, const std::string& dir,
                                             const PlantedShards& how) {
  std::vector<std::string> paths;
  const size_t n = planted.documents.size();
  for (int s = 0; s < how.shards; ++s) {
    paths.push_back(dir + "/part" + std::to_string(s) + how.extension);
    auto sink = OpenByteSink(paths.back(), CodecOf(paths.back()));
    EXPECT_TRUE(sink.ok()) << sink.status();
    if (!sink.ok()) continue;
    int written = 0;
    for (size_t d = n * s / how.shards; d < n * (s + 1) / how.shards; ++d) {
      if (s == how.shards - 1 && how.bad_line > 0 && written++ == how.bad_line) {
        EXPECT_TRUE((*sink)->Write("{\"text\": oops}\n").ok());
      }
      nlohmann::json line = {{"text", planted.documents[d]}};
      if (how.every_id || d % 2 == 0) line["id"] = "doc" + std::to_string(d);
      EXPECT_TRUE((*sink)->Write(line.dump() + "\n").ok());
    }
    EXPECT_TRUE((*sink)->Close().ok());
  }
  return paths;
}

}  // namespace distlab::dedup::stream_testing

#endif  // DISTLAB_LABS_DEDUP_STREAM_TEST_UTIL_H_
