// overlap: proves that no handout file shares a block of six or more consecutive lines with the answers
// (solutions/ and tests/ of the course checkout).
//
// Lines are normalised before comparing: surrounding whitespace trimmed, inner runs of whitespace collapsed.
// Lines that carry no content of their own are skipped (they neither count toward a block nor break one):
// empty lines, lines of only punctuation ("}", "};", "{"), #include lines, and namespace open/close lines.
// Every window of `--block` consecutive remaining lines of every answer file is hashed; each handout window
// found there is reported with both places. Exit status 1 when anything is shared.
#include <dirent.h>
#include <sys/stat.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "tools/base/cli.h"

namespace {

struct Line {
  std::string text;
  int number;
};

std::string Normalise(const std::string& raw) {
  std::string out;
  bool space = false;
  for (char c : raw) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

bool Skipped(const std::string& s) {
  if (s.empty()) return true;
  bool only_punct = true;
  for (char c : s) only_punct &= std::ispunct(static_cast<unsigned char>(c)) != 0;
  if (only_punct) return true;
  if (s.rfind("#include", 0) == 0 || s.rfind("# include", 0) == 0) return true;
  if (s.rfind("namespace", 0) == 0 && s.back() == '{') return true;
  if (s.rfind("} // namespace", 0) == 0 || s.rfind("}// namespace", 0) == 0) return true;
  return false;
}

bool IsText(const std::string& data) { return data.find('\0') == std::string::npos; }

std::vector<Line> Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<Line> out;
  if (!IsText(data)) return out;
  int number = 0;
  size_t start = 0;
  while (start <= data.size()) {
    size_t end = data.find('\n', start);
    if (end == std::string::npos) end = data.size();
    ++number;
    std::string n = Normalise(data.substr(start, end - start));
    if (!Skipped(n)) out.push_back({n, number});
    start = end + 1;
  }
  return out;
}

void Walk(const std::string& root, const std::string& rel, std::vector<std::string>* files) {
  std::string dir = rel.empty() ? root : root + "/" + rel;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == ".." || name == ".git" || name.rfind("bazel-", 0) == 0) continue;
    std::string r = rel.empty() ? name : rel + "/" + name;
    struct stat st;
    if (::lstat((root + "/" + r).c_str(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
    if (S_ISDIR(st.st_mode)) {
      Walk(root, r, files);
    } else if (S_ISREG(st.st_mode)) {
      files->push_back(r);
    }
  }
  ::closedir(d);
}

std::string Key(const std::vector<Line>& lines, size_t i, int block) {
  std::string k;
  for (int j = 0; j < block; ++j) k += lines[i + j].text + "\n";
  return k;
}

}  // namespace

int main(int argc, char** argv) {
  std::string handout;
  std::vector<std::string> answers;
  int block = 6;
  distlab::cli::App app{"Finds blocks of consecutive lines that handout files share with the answers."};
  app.add_option("--handout", handout, "the released tree")
      ->required()
      ->check(distlab::cli::ExistingDirectory());
  app.add_option("--answers", answers, "directories whose text must not appear in the handout (repeatable)")
      ->required();
  app.add_option("--block", block, "lines in a shared block that count as a leak")
      ->check(distlab::cli::Range(2, 1000));
  DISTLAB_CLI_PARSE(app, argc, argv);

  std::unordered_map<std::string, std::string> windows;  // block text -> "file:line"
  size_t answer_files = 0;
  for (const std::string& dir : answers) {
    std::vector<std::string> files;
    Walk(dir, "", &files);
    for (const auto& f : files) {
      std::vector<Line> lines = Load(dir + "/" + f);
      ++answer_files;
      for (size_t i = 0; i + block <= lines.size(); ++i) {
        windows.emplace(Key(lines, i, block), dir + "/" + f + ":" + std::to_string(lines[i].number));
      }
    }
  }
  std::vector<std::string> files;
  Walk(handout, "", &files);
  int leaks = 0;
  for (const auto& f : files) {
    std::vector<Line> lines = Load(handout + "/" + f);
    int reported_until = -1;  // one report per run of overlapping windows
    for (size_t i = 0; i + block <= lines.size(); ++i) {
      auto it = windows.find(Key(lines, i, block));
      if (it == windows.end()) continue;
      if (static_cast<int>(i) <= reported_until) {
        reported_until = static_cast<int>(i) + block - 1;
        continue;
      }
      ++leaks;
      reported_until = static_cast<int>(i) + block - 1;
      std::printf("shared block: %s:%d  ==  %s\n", f.c_str(), lines[i].number, it->second.c_str());
      for (int j = 0; j < block; ++j) std::printf("    | %s\n", lines[i + j].text.c_str());
    }
  }
  std::printf(
      "overlap: %zu handout files checked against %zu answer files: %d shared block(s) of >= %d lines\n",
      files.size(), answer_files, leaks, block);
  return leaks == 0 ? 0 : 1;
}
