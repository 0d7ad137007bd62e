// scan: refuses submitted files that try to pull something other than themselves into the build.
//
//   scan FILE...    prints "FILE:LINE: <source line>" for each refused line; exit status 1 when any, else 0
//
// A student's .cc file may include the lab's headers, the runtime's and the libraries' -- by a quoted or
// angled path that names no hidden folder. It may not read other files at compile time: `.incbin` (an
// assembler directive that embeds any file), `#embed`, `__has_include` (a probe for hidden files), an
// #include of tests/ or solutions/, of an absolute or ../ path, or of a macro (`#include NAME`, whose value
// no scan can see). The scan sees the text the preprocessor sees: backslash-newlines are spliced first,
// comments are blanked, and the digraph %: counts as #.
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Line {
  int number;  // the first physical line of the logical line
  std::string text;
};

// Splices backslash-newlines (so "#inc\<newline>lude" is one line) and blanks comments (so "#/**/include" is
// an include), keeping string literals as they are.
std::vector<Line> LogicalLines(const std::string& src) {
  std::vector<Line> out;
  std::string cur;
  int line = 1, start = 1;
  bool in_block = false;
  char quote = 0;
  for (size_t i = 0; i < src.size(); ++i) {
    const char c = src[i];
    if (c == '\\' && i + 1 < src.size() && src[i + 1] == '\n') {
      ++i;
      ++line;
      continue;
    }
    if (c == '\n') {
      if (!in_block) {
        out.push_back({start, cur});
        cur.clear();
        start = line + 1;
      }
      ++line;
      quote = 0;
      continue;
    }
    if (in_block) {
      if (c == '*' && i + 1 < src.size() && src[i + 1] == '/') {
        in_block = false;
        ++i;
        cur += ' ';
      }
      continue;
    }
    if (quote) {
      cur += c;
      if (c == '\\' && i + 1 < src.size()) {
        cur += src[++i];
      } else if (c == quote) {
        quote = 0;
      }
      continue;
    }
    if (c == '/' && i + 1 < src.size() && src[i + 1] == '*') {
      in_block = true;
      ++i;
      continue;
    }
    if (c == '/' && i + 1 < src.size() && src[i + 1] == '/') {
      while (i + 1 < src.size() && src[i + 1] != '\n') ++i;  // a line comment ends at the newline
      continue;
    }
    if (c == '"' || c == '\'') quote = c;
    cur += c;
  }
  if (!cur.empty()) out.push_back({start, cur});
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: scan FILE...\n";
    return 2;
  }
  const std::regex refused(R"(\.incbin|\bincbin\b|(#|%:)\s*embed\b|__has_include|)"
                           R"((#|%:)\s*include(_next)?\s*[<"](/|[^">]*\.\./|[^">]*\b(tests|solutions)/)|)"
                           R"((#|%:)\s*include(_next)?\s*[A-Za-z_])");
  int found = 0;
  for (int a = 1; a < argc; ++a) {
    std::ifstream in(argv[a], std::ios::binary);
    if (!in) {
      std::cerr << "scan: cannot read " << argv[a] << "\n";
      return 2;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    for (const Line& l : LogicalLines(ss.str())) {
      if (std::regex_search(l.text, refused)) {
        std::cout << argv[a] << ":" << l.number << ": " << l.text << "\n";
        ++found;
      }
    }
  }
  return found ? 1 : 0;
}
