// Lab 3 stage D, reference solution: corpus files in and out, the cluster report, evaluation scores.
#include "labs/dedup/corpus_io.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace distlab::dedup {

namespace fs = std::filesystem;

namespace {

absl::StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

absl::StatusOr<Corpus> ReadCorpus(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st))
    return absl::NotFoundError(absl::StrCat("corpus path ", path, " does not exist"));
  Corpus corpus;
  if (fs::is_directory(st)) {
    corpus.format = CorpusFormat::kFolder;
    std::vector<fs::path> files;
    for (const fs::directory_entry& e : fs::directory_iterator(path)) {
      const std::string name = e.path().filename().string();
      if (e.is_regular_file() && !name.empty() && name[0] != '.') files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      absl::StatusOr<std::string> text = ReadFile(f);
      if (!text.ok()) return text.status();
      corpus.documents.push_back({f.filename().string(), std::move(*text)});
    }
    return corpus;
  }
  corpus.format = CorpusFormat::kJsonLines;
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("text") || !j["text"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " line ", number, ": expected a JSON object with a string field \"text\""));
    }
    Document doc;
    doc.text = j["text"].get<std::string>();
    if (!j.contains("id")) {
      doc.name = std::to_string(number);
    } else if (j["id"].is_string()) {
      doc.name = j["id"].get<std::string>();
    } else {
      doc.name = j["id"].dump();
    }
    corpus.documents.push_back(std::move(doc));
  }
  return corpus;
}

absl::Status WriteCorpus(const Corpus& corpus, const std::vector<int>& keep, const std::string& out) {
  for (int d : keep) {
    if (d < 0 || d >= static_cast<int>(corpus.documents.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("document id ", d, " outside [0, ", corpus.documents.size(), ")"));
    }
  }
  if (corpus.format == CorpusFormat::kFolder) {
    std::error_code ec;
    fs::create_directories(out, ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot create folder ", out, ": ", ec.message()));
    for (int d : keep) {
      std::ofstream f(fs::path(out) / corpus.documents[d].name, std::ios::binary);
      f << corpus.documents[d].text;
      if (!f)
        return absl::InternalError(absl::StrCat("cannot write ", corpus.documents[d].name, " in ", out));
    }
    return absl::OkStatus();
  }
  std::ofstream f(out, std::ios::binary);
  if (!f) return absl::InternalError(absl::StrCat("cannot write ", out));
  for (int d : keep) {
    f << nlohmann::json{{"id", corpus.documents[d].name}, {"text", corpus.documents[d].text}}.dump() << '\n';
  }
  return f ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot write ", out));
}

std::string ClusterReportJson(const Corpus& corpus, const DedupResult& result) {
  nlohmann::json clusters = nlohmann::json::array();
  for (const Cluster& c : result.clusters) {
    nlohmann::json members = nlohmann::json::array();
    for (int m : c.members) members.push_back(corpus.documents[m].name);
    clusters.push_back({{"id", c.id},
                        {"members", members},
                        {"survivor", corpus.documents[c.survivor].name},
                        {"max_jaccard", c.max_jaccard}});
  }
  const nlohmann::json report = {{"documents", corpus.documents.size()}, {"kept", result.kept.size()},
                                 {"removed", result.removed.size()},     {"bands", result.banding.bands},
                                 {"rows", result.banding.rows},          {"clusters", clusters}};
  return report.dump(2);
}

namespace {

template <typename T>
Scores Score(const std::vector<T>& predicted, const std::vector<T>& truth) {
  std::vector<T> common;
  std::set_intersection(predicted.begin(), predicted.end(), truth.begin(), truth.end(),
                        std::back_inserter(common));
  Scores s;
  s.precision = predicted.empty() ? 1.0 : static_cast<double>(common.size()) / predicted.size();
  s.recall = truth.empty() ? 1.0 : static_cast<double>(common.size()) / truth.size();
  s.f1 = s.precision + s.recall == 0 ? 0.0 : 2 * s.precision * s.recall / (s.precision + s.recall);
  return s;
}

}  // namespace

Scores ScorePairs(const std::vector<std::pair<int, int>>& predicted,
                  const std::vector<std::pair<int, int>>& truth) {
  return Score(predicted, truth);
}

Scores ScoreIds(const std::vector<int>& predicted, const std::vector<int>& truth) {
  return Score(predicted, truth);
}

std::vector<int> RemovedByPairs(int n, const std::vector<std::pair<int, int>>& pairs) {
  UnionFind uf(n);
  for (const auto& [i, j] : pairs) uf.Union(i, j);
  // With union by rank the root need not be the lowest id, so find each cluster's lowest member first.
  std::vector<int> lowest(n, n);
  for (int d = 0; d < n; ++d) lowest[uf.Find(d)] = std::min(lowest[uf.Find(d)], d);
  std::vector<int> removed;
  for (int d = 0; d < n; ++d) {
    if (lowest[uf.Find(d)] != d) removed.push_back(d);
  }
  return removed;
}

}  // namespace distlab::dedup
