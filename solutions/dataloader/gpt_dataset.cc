// Lab 2, stage D (solution): GPT sample construction (document, sample and shuffle indices, cached on disk)
// and greedy blending. T = tokens per epoch, L = seq_length, N = num_samples, E = epochs.
#include "labs/dataloader/gpt_dataset.h"

#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "labs/dataloader/dataset.h"
#include "reference/base/status.h"

namespace distlab::dataloader {

int64_t NumEpochs(int64_t tokens_per_epoch, int64_t seq_length, int64_t num_samples) {
  if (tokens_per_epoch <= 0) return 0;
  int64_t epochs = 1, tokens = tokens_per_epoch;
  // N samples of L tokens, plus the one extra token the last label needs.
  while (tokens < num_samples * seq_length + 1) {
    ++epochs;
    tokens += tokens_per_epoch;
  }
  return epochs;
}

bool SeparateFinalEpoch(int64_t num_epochs, int64_t tokens_per_epoch, int64_t seq_length,
                        int64_t num_samples) {
  if (num_epochs <= 1) return false;
  const int64_t before_final = ((num_epochs - 1) * tokens_per_epoch - 1) / seq_length;
  const int64_t from_final = num_samples - before_final;
  const int64_t per_epoch = (tokens_per_epoch - 1) / seq_length;
  return from_final < static_cast<int64_t>(0.80 * static_cast<double>(per_epoch));
}

std::vector<int64_t> BuildDocumentIndex(int64_t num_documents, int64_t num_epochs, uint64_t seed,
                                        bool separate_final_epoch, bool shuffle) {
  std::vector<int64_t> idx;
  idx.reserve(static_cast<size_t>(num_documents * num_epochs));
  for (int64_t e = 0; e < num_epochs; ++e) {
    for (int64_t d = 0; d < num_documents; ++d) idx.push_back(d);
  }
  if (!shuffle) return idx;
  if (!separate_final_epoch) {
    SeededShuffle(&idx, seed);
    return idx;
  }
  // The first E-1 epochs mix freely; the barely used final epoch is shuffled on its own.
  std::vector<int64_t> head(idx.begin(), idx.end() - num_documents),
      tail(idx.end() - num_documents, idx.end());
  SeededShuffle(&head, seed);
  SeededShuffle(&tail, seed + 1);
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

absl::StatusOr<std::vector<int64_t>> BuildSampleIndex(const std::vector<int32_t>& sizes,
                                                      const std::vector<int64_t>& document_index,
                                                      int64_t seq_length, int64_t num_samples) {
  if (seq_length < 1) return absl::InvalidArgumentError("seq_length must be >= 1");
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(2 * (num_samples + 1)));
  int64_t pos = 0, offset = 0;  // where the current sample starts
  out.push_back(pos);
  out.push_back(offset);
  for (int64_t s = 0; s < num_samples; ++s) {
    int64_t remaining = seq_length + 1;  // L + 1 tokens per sample
    while (remaining != 0) {
      if (pos >= static_cast<int64_t>(document_index.size())) {
        return absl::OutOfRangeError(absl::StrCat("sample ", s, " runs past the end of the document index (",
                                                  document_index.size(), " entries)"));
      }
      const int64_t doc = document_index[static_cast<size_t>(pos)];
      if (doc < 0 || doc >= static_cast<int64_t>(sizes.size())) {
        return absl::OutOfRangeError(
            absl::StrCat("document index entry ", pos, " = ", doc, " is not a document"));
      }
      const int64_t left_in_doc = sizes[static_cast<size_t>(doc)] - offset;
      remaining -= left_in_doc;
      if (remaining <= 0) {
        // The sample ends inside this document, on token offset + left_in_doc + remaining - 1. The next
        // sample starts on that same token: the "- 1" shares the boundary.
        offset += remaining + left_in_doc - 1;
        remaining = 0;
      } else {
        ++pos;
        offset = 0;
      }
    }
    out.push_back(pos);
    out.push_back(offset);
  }
  return out;
}

namespace {

std::string CacheKey(const std::vector<int32_t>& sizes, const GptConfig& c) {
  const uint64_t sizes_hash = XXH64(sizes.data(), sizes.size() * sizeof(int32_t), 0);
  const std::string desc = absl::StrCat(
      "distlab-gpt-indices v1|name=", c.name, "|L=", c.seq_length, "|N=", c.num_samples, "|seed=", c.seed,
      "|shuffle=", c.shuffle ? 1 : 0, "|docs=", sizes.size(), "|sizes=", sizes_hash);
  return absl::StrFormat("%016x", XXH64(desc.data(), desc.size(), 0));
}

constexpr char kCacheMagic[8] = {'D', 'L', 'G', 'P', 'T', 'I', 'D', 'X'};

bool SaveCache(const std::string& path, const GptIndices& g) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return false;
  const int64_t head[5] = {
      g.num_epochs, g.separate_final_epoch ? 1 : 0, static_cast<int64_t>(g.document_index.size()),
      static_cast<int64_t>(g.sample_index.size()), static_cast<int64_t>(g.shuffle_index.size())};
  bool ok = std::fwrite(kCacheMagic, 1, 8, f) == 8 && std::fwrite(head, 8, 5, f) == 5;
  for (const auto* v : {&g.document_index, &g.sample_index, &g.shuffle_index}) {
    ok = ok && std::fwrite(v->data(), 8, v->size(), f) == v->size();
  }
  ok = (std::fclose(f) == 0) && ok;
  // Write then rename: a reader never sees half a cache file.
  return ok && std::rename(tmp.c_str(), path.c_str()) == 0;
}

bool LoadCache(const std::string& path, GptIndices* g) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[8];
  int64_t head[5];
  bool ok = std::fread(magic, 1, 8, f) == 8 && std::memcmp(magic, kCacheMagic, 8) == 0 &&
            std::fread(head, 8, 5, f) == 5;
  for (int k = 0; ok && k < 3; ++k) ok = head[2 + k] >= 0 && head[2 + k] < (int64_t{1} << 40);
  if (ok) {
    g->num_epochs = head[0];
    g->separate_final_epoch = head[1] != 0;
    std::vector<int64_t>* vs[3] = {&g->document_index, &g->sample_index, &g->shuffle_index};
    for (int k = 0; ok && k < 3; ++k) {
      vs[k]->resize(static_cast<size_t>(head[2 + k]));
      ok = std::fread(vs[k]->data(), 8, vs[k]->size(), f) == vs[k]->size();
    }
    char extra;
    ok = ok && std::fread(&extra, 1, 1, f) == 0;  // nothing after the arrays
  }
  std::fclose(f);
  return ok;
}

}  // namespace

absl::StatusOr<GptIndices> BuildGptIndices(const std::vector<int32_t>& sizes, const GptConfig& c) {
  if (c.seq_length < 1)
    return absl::InvalidArgumentError(absl::StrCat("seq_length must be >= 1, got ", c.seq_length));
  if (c.num_samples < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_samples must be >= 1, got ", c.num_samples));
  }
  int64_t tokens = 0;
  for (int32_t s : sizes) {
    if (s < 0) return absl::InvalidArgumentError(absl::StrCat("negative sequence length ", s));
    tokens += s;
  }
  if (tokens < 2)
    return absl::InvalidArgumentError(absl::StrCat("the documents hold ", tokens, " tokens; need >= 2"));

  GptIndices g;
  g.cache_key = CacheKey(sizes, c);
  const std::string path = c.cache_dir.empty() ? "" : c.cache_dir + "/" + g.cache_key + ".gptidx";
  if (!path.empty()) {
    GptIndices cached;
    cached.cache_key = g.cache_key;
    if (LoadCache(path, &cached)) {
      const int64_t rows = static_cast<int64_t>(cached.sample_index.size()) / 2 - 1;
      if (rows >= c.num_samples && static_cast<int64_t>(cached.shuffle_index.size()) == rows) {
        cached.loaded_from_cache = true;
        return cached;
      }
    }
  }
  g.num_epochs = NumEpochs(tokens, c.seq_length, c.num_samples);
  g.separate_final_epoch = SeparateFinalEpoch(g.num_epochs, tokens, c.seq_length, c.num_samples);
  g.document_index = BuildDocumentIndex(static_cast<int64_t>(sizes.size()), g.num_epochs, c.seed,
                                        g.separate_final_epoch, c.shuffle);
  const int64_t total = (g.num_epochs * tokens - 1) / c.seq_length;  // every whole sample the epochs hold
  ASSIGN_OR_RETURN(g.sample_index, BuildSampleIndex(sizes, g.document_index, c.seq_length, total));
  const int64_t before_final =
      g.separate_final_epoch ? ((g.num_epochs - 1) * tokens - 1) / c.seq_length : total;
  std::vector<int64_t> head(static_cast<size_t>(before_final)),
      tail(static_cast<size_t>(total - before_final));
  std::iota(head.begin(), head.end(), 0);
  std::iota(tail.begin(), tail.end(), before_final);
  if (c.shuffle) {
    SeededShuffle(&head, c.seed + 2);
    SeededShuffle(&tail, c.seed + 3);
  }
  head.insert(head.end(), tail.begin(), tail.end());
  g.shuffle_index = std::move(head);
  if (!path.empty() && !SaveCache(path, g)) {
    return absl::InternalError(absl::StrCat("cannot write the index cache ", path));
  }
  return g;
}

absl::StatusOr<std::vector<int64_t>> GptSample(const IndexedDataset& dataset, const GptIndices& g,
                                               int64_t seq_length, int64_t i) {
  if (i < 0 || i >= static_cast<int64_t>(g.shuffle_index.size())) {
    return absl::OutOfRangeError(absl::StrCat("sample ", i, " is outside [0, ", g.shuffle_index.size(), ")"));
  }
  const int64_t row = g.shuffle_index[static_cast<size_t>(i)];
  if (row < 0 || 2 * (row + 1) + 1 >= static_cast<int64_t>(g.sample_index.size())) {
    return absl::OutOfRangeError(absl::StrCat("shuffle index ", i, " = ", row, " is not a sample-index row"));
  }
  const int64_t p0 = g.sample_index[2 * row], o0 = g.sample_index[2 * row + 1];
  const int64_t p1 = g.sample_index[2 * row + 2], o1 = g.sample_index[2 * row + 3];
  auto doc = [&](int64_t p) { return g.document_index[static_cast<size_t>(p)]; };
  std::vector<int64_t> out;
  if (p0 == p1) {
    ASSIGN_OR_RETURN(out, dataset.Get(doc(p0), o0, o1 - o0 + 1));
  } else {
    ASSIGN_OR_RETURN(out, dataset.Get(doc(p0), o0));
    for (int64_t p = p0 + 1; p < p1; ++p) {
      ASSIGN_OR_RETURN(auto mid, dataset.Get(doc(p)));
      out.insert(out.end(), mid.begin(), mid.end());
    }
    ASSIGN_OR_RETURN(auto last, dataset.Get(doc(p1), 0, o1 + 1));
    out.insert(out.end(), last.begin(), last.end());
  }
  if (static_cast<int64_t>(out.size()) != seq_length + 1) {
    return absl::InternalError(
        absl::StrCat("sample ", i, " has ", out.size(), " tokens, expected ", seq_length + 1));
  }
  return out;
}

absl::StatusOr<BlendIndices> BuildBlendingIndices(const std::vector<double>& weights, int64_t size) {
  if (weights.empty()) return absl::InvalidArgumentError("blending: no weights");
  if (size < 0) return absl::InvalidArgumentError("blending: negative size");
  double sum = 0;
  for (size_t d = 0; d < weights.size(); ++d) {
    if (!(weights[d] >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("blending: weight ", d, " = ", weights[d], " is negative"));
    }
    sum += weights[d];
  }
  if (sum <= 0) return absl::InvalidArgumentError("blending: the weights sum to 0");
  BlendIndices b;
  std::vector<int64_t> taken(weights.size(), 0);
  for (int64_t i = 0; i < size; ++i) {
    const double at = static_cast<double>(std::max<int64_t>(i, 1));
    size_t best = 0;
    double best_err = weights[0] / sum * at - static_cast<double>(taken[0]);
    for (size_t d = 1; d < weights.size(); ++d) {
      const double err = weights[d] / sum * at - static_cast<double>(taken[d]);
      if (err > best_err) {  // strictly greater: ties stay with the lowest index
        best = d;
        best_err = err;
      }
    }
    b.dataset_index.push_back(static_cast<int64_t>(best));
    b.dataset_sample_index.push_back(taken[best]++);
  }
  return b;
}

}  // namespace distlab::dataloader
