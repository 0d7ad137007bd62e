// symbols: the grader's static check of a submission's compiled objects (tools/build_defs/grading.bzl says
// what the rules are and where each lab declares its part; tools/grader/README.md why).
//
//   symbols undefined --out FILE ARCHIVE_OR_OBJECT...
//       the undefined symbols (mangled) of the given objects and archives, one per line, sorted: the derived
//       part of a lab's allowlist (//solutions/<lab>:reference_symbols)
//   symbols check --rules RULES.json --reference FILE --object NAME=PATH...
//       checks each student object against the rules; prints one line per refusal, naming the file, the
//       symbol and the rule, then what to do instead; exit status 1 when anything is refused
//
// The ELF files are read by binutils (nm for symbols, readelf for section names, objdump for instructions)
// and names are demangled with the C++ runtime's abi::__cxa_demangle. The scope of a mangled name (std::,
// distlab::<lab>::, global) is read from its leading components; nothing past them is parsed.
#include <cxxabi.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/base/cli.h"

namespace {

using json = nlohmann::json;

// Runs argv (a binutils program), returns its stdout; throws when it cannot run or fails.
std::string Capture(const std::vector<std::string>& argv) {
  int fds[2];
  // Close-on-exec: objects are checked on several threads, and a child another thread forks must not hold
  // this pipe's write end open (this read would then wait for that child to exit).
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "symbols: cannot run %s (binutils is in ./labctl setup's packages)\n", args[0]);
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    throw std::runtime_error(argv[0] + " failed on " + argv.back() + " (status " + std::to_string(st) + ")");
  }
  return out;
}

struct Symbol {
  std::string name;  // mangled
  char type;         // nm's letter
};

// nm -P: "name type [value size]" per line; archive members appear as "archive[member]:" lines.
std::vector<Symbol> ReadSymbols(const std::string& path) {
  std::vector<Symbol> out;
  std::istringstream in(Capture({"nm", "-P", "--no-sort", path}));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string name, type;
    if (!(f >> name >> type) || type.size() != 1) continue;
    out.push_back({name, type[0]});
  }
  return out;
}

std::string Demangle(const std::string& name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) return name;
  std::string out = d;
  std::free(d);
  return out;
}

// The leading components of the entity an Itanium-mangled name denotes: "_ZN7distlab11collectives4RingEv"
// -> {distlab, collectives, Ring}; "_ZNSt6vectorIiSaIiEE9push_backEOi" -> {std, vector}; "_Z3foov" -> {foo}
// (global scope); special names (vtable, typeinfo, guard variable, thunks) -> the scope of what they are for;
// "?" where the name is not understood. An unmangled (C) name is one global component.
std::vector<std::string> Scope(const std::string& s) {
  if (s.rfind("_Z", 0) != 0) return {s};
  size_t p = 2;
  auto number = [&] {
    if (p < s.size() && s[p] == 'n') ++p;
    while (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) ++p;
  };
  auto call_offset = [&] {  // h <number> _  |  v <number> _ <number> _
    if (p < s.size() && s[p] == 'h') {
      ++p;
      number();
      ++p;
    } else if (p < s.size() && s[p] == 'v') {
      ++p;
      number();
      ++p;
      number();
      ++p;
    }
  };
  // Special names.
  for (int guard = 0; guard < 4 && p + 1 < s.size(); ++guard) {
    const std::string two = s.substr(p, 2);
    if (two == "TV" || two == "TT" || two == "TI" || two == "TS" || two == "TW" || two == "TH" ||
        two == "GV" || two == "GR") {
      p += 2;
    } else if (two == "Th" || two == "Tv") {
      ++p;
      call_offset();
    } else if (two == "Tc") {
      p += 2;
      call_offset();
      call_offset();
    } else if (two == "TC") {
      p += 2;  // construction vtable: the type comes first
    } else if (two == "GT") {
      p += 3;
    } else {
      break;
    }
  }
  std::vector<std::string> parts;
  auto source_name = [&]() -> bool {
    if (p >= s.size() || !std::isdigit(static_cast<unsigned char>(s[p]))) return false;
    size_t len = 0;
    while (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) len = len * 10 + (s[p++] - '0');
    if (p + len > s.size()) return false;
    parts.push_back(s.substr(p, len));
    p += len;
    return true;
  };
  if (p < s.size() && s[p] == 'L') ++p;  // internal linkage marker
  if (p < s.size() && s[p] == 'Z') {     // a local entity: the scope of the function it is in
    return Scope("_Z" + s.substr(p + 1));
  }
  if (p < s.size() && s[p] == 'N') {
    ++p;
    while (p < s.size() && std::strchr("rVKRO", s[p]) != nullptr) ++p;
    while (p < s.size() && s[p] != 'E') {
      if (s.compare(p, 2, "St") == 0) {
        parts.push_back("std");
        p += 2;
      } else if (s[p] == 'S' && p + 1 < s.size() && std::islower(static_cast<unsigned char>(s[p + 1]))) {
        parts.push_back("std");
        p += 2;
      } else if (s[p] == 'B') {  // an ABI tag: B <source-name>
        ++p;
        std::vector<std::string> saved = parts;
        source_name();
        parts = saved;
      } else if (!source_name()) {
        break;  // template arguments, constructors, operators, substitutions: enough is known
      }
    }
    return parts.empty() ? std::vector<std::string>{"?"} : parts;
  }
  if (s.compare(p, 2, "St") == 0) {
    p += 2;
    parts.push_back("std");
    if (!source_name()) parts.push_back("?");  // an operator or a template: still in std
    return parts;
  }
  if (p + 1 < s.size() && s[p] == 'S' && std::islower(static_cast<unsigned char>(s[p + 1])))
    return {"std", "?"};
  if (source_name()) return parts;  // global scope
  if (p < s.size() && std::islower(static_cast<unsigned char>(s[p]))) return {"operator " + s.substr(p, 2)};
  return {"?"};
}

bool ScopeStartsWith(const std::vector<std::string>& scope, const std::string& pattern_ns) {
  // pattern_ns: "a::b" (globs allowed per component)
  std::vector<std::string> want;
  size_t b = 0;
  for (;;) {
    size_t e = pattern_ns.find("::", b);
    want.push_back(pattern_ns.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 2;
  }
  if (scope.size() <= want.size()) return false;  // the namespace itself is not a symbol in it
  for (size_t i = 0; i < want.size(); ++i) {
    if (::fnmatch(want[i].c_str(), scope[i].c_str(), 0) != 0) return false;
  }
  return true;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

bool Mangled(const std::string& s) { return s.rfind("_Z", 0) == 0; }

bool MatchesEntry(const std::string& sym, const std::vector<std::string>& scope, const std::string& entry) {
  if (entry.size() > 3 && entry.compare(entry.size() - 3, 3, "::*") == 0) {
    return Mangled(sym) && ScopeStartsWith(scope, entry.substr(0, entry.size() - 3));
  }
  if (entry.rfind("_Z", 0) == 0) return ::fnmatch(entry.c_str(), sym.c_str(), 0) == 0;
  return !Mangled(sym) && ::fnmatch(entry.c_str(), sym.c_str(), 0) == 0;
}

struct Rules {
  std::string lab, ns;
  std::vector<std::string> margin, forbidden_namespaces, forbidden_strings;
  std::map<std::string, std::string> forbidden;  // symbol glob -> why
};

Rules ReadRules(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  json j = json::parse(in);
  Rules r;
  r.lab = j.at("lab");
  r.ns = j.at("namespace");
  r.margin = j.at("margin").get<std::vector<std::string>>();
  r.forbidden_namespaces = j.at("forbidden_namespaces").get<std::vector<std::string>>();
  r.forbidden_strings = j.at("forbidden_strings").get<std::vector<std::string>>();
  for (auto& [why, names] : j.at("forbidden").items()) {
    for (auto& n : names) r.forbidden[n.get<std::string>()] = why;
  }
  return r;
}

struct Refusal {
  std::string file, symbol, rule, instead;
};

std::string Shown(const std::string& sym) {
  const std::string d = Demangle(sym);
  return d == sym ? sym : d + " [" + sym + "]";
}

bool InForbiddenNamespace(const Rules& r, const std::vector<std::string>& scope, std::string* which) {
  for (const auto& ns : r.forbidden_namespaces) {
    if (ScopeStartsWith(scope, ns)) {
      *which = ns;
      return true;
    }
  }
  return false;
}

void CheckObject(const Rules& r, const std::set<std::string>& reference, const std::string& file,
                 const std::string& path, std::vector<Refusal>* out) {
  const std::string lab_ns = r.ns;
  std::set<std::string> seen;
  for (const Symbol& s : ReadSymbols(path)) {
    if (!seen.insert(std::string(1, s.type) + s.name).second) continue;
    const std::vector<std::string> scope = Scope(s.name);
    std::string which;
    const bool undefined = s.type == 'U' || s.type == 'w' || s.type == 'v';
    if (undefined) {
      std::string why;
      for (const auto& [glob, reason] : r.forbidden) {
        if (!Mangled(s.name) && ::fnmatch(glob.c_str(), s.name.c_str(), 0) == 0) why = reason;
      }
      if (!why.empty()) {
        out->push_back({file, Shown(s.name), "references: " + why,
                        "compute it from the function's arguments and the lab's headers"});
        continue;
      }
      if (InForbiddenNamespace(r, scope, &which)) {
        out->push_back({file, Shown(s.name), "references: the test harness (" + which + "::)",
                        "student code never calls the tests' framework"});
        continue;
      }
      bool ok = reference.count(s.name) > 0 || ScopeStartsWith(scope, lab_ns);
      for (size_t i = 0; !ok && i < r.margin.size(); ++i) ok = MatchesEntry(s.name, scope, r.margin[i]);
      if (!ok) {
        out->push_back({file, Shown(s.name),
                        "references: a symbol neither the stubs nor the solution of lab " + r.lab +
                            " use, outside the lab's margin",
                        "use the standard library, the lab's headers and the runtime it builds on"});
      }
      continue;
    }
    if (std::islower(static_cast<unsigned char>(s.type)) && s.type != 'u' && s.type != 'i')
      continue;                                    // local
    if (s.type == 'N' || s.type == 'n') continue;  // debugging and read-only section markers
    if (s.type == 'i') {
      out->push_back({file, Shown(s.name), "defines: an indirect function (its resolver runs before main)",
                      "write an ordinary function"});
      continue;
    }
    const bool weak = s.type == 'W' || s.type == 'V' || s.type == 'u';
    if (InForbiddenNamespace(r, scope, &which)) {
      out->push_back({file, Shown(s.name), "defines: a symbol of the test harness (" + which + "::)",
                      "keep your code in namespace " + lab_ns + " or an anonymous namespace"});
      continue;
    }
    if (ScopeStartsWith(scope, lab_ns)) continue;
    const bool global = scope.size() == 1 && scope[0] != "?";
    if (weak && !global) continue;  // template instantiations and inline functions of library headers
    if (weak && s.name.rfind("DW.ref.", 0) == 0) continue;  // the compiler's personality-routine references
    out->push_back({file, Shown(s.name),
                    std::string("defines: ") +
                        (global ? "a symbol at global scope" : "a symbol outside the lab's namespace") +
                        " (it could replace a library's or the harness's own)",
                    "put it in namespace " + lab_ns +
                        ", or give it internal linkage (static or an anonymous namespace)"});
  }

  // Sections: prioritised initializers run before the harness takes its record channel.
  std::istringstream sections(Capture({"readelf", "-S", "-W", path}));
  std::string line;
  std::vector<std::string> data_sections;  // by index, for the string dump below
  while (std::getline(sections, line)) {
    size_t lb = line.find('['), rb = line.find("] ");
    if (lb == std::string::npos || rb == std::string::npos || rb < lb) continue;
    const std::string index = Trim(line.substr(lb + 1, rb - lb - 1));
    std::istringstream f(line.substr(rb + 2));
    std::string name;
    f >> name;
    if (index.empty() || !std::isdigit(static_cast<unsigned char>(index[0]))) continue;
    const bool prioritised = name.rfind(".init_array.", 0) == 0 || name.rfind(".fini_array.", 0) == 0 ||
                             name.rfind(".ctors", 0) == 0 || name.rfind(".dtors", 0) == 0 ||
                             name.rfind(".preinit_array", 0) == 0;
    if (prioritised) {
      out->push_back({file, "section " + name, "sections: a prioritised constructor or destructor",
                      "use ordinary static initialization (or none)"});
    }
    for (const char* kind : {".rodata", ".data", ".text", ".ldata", ".lrodata", ".tdata"}) {
      if (name.rfind(kind, 0) == 0) data_sections.push_back(index);
    }
  }
  // Code: raw system-call instructions.
  std::istringstream code(Capture({"objdump", "-d", "--no-show-raw-insn", path}));
  std::set<std::string> insns;
  while (std::getline(code, line)) {
    size_t tab = line.find(":\t");
    if (tab == std::string::npos) continue;
    std::istringstream f(line.substr(tab + 2));
    std::string op, arg;
    f >> op >> arg;
    if (op == "syscall" || op == "sysenter" || (op == "int" && arg == "$0x80")) insns.insert(op);
  }
  for (const auto& op : insns) {
    out->push_back(
        {file, "instruction " + op, "code: a raw system call", "call the C library or the standard library"});
  }
  // Strings in the object's code and data (not its debugging information, which names build paths).
  std::string strings;
  for (size_t i = 0; i < data_sections.size(); i += 64) {
    std::vector<std::string> argv = {"readelf", "-W"};
    for (size_t j = i; j < std::min(data_sections.size(), i + 64); ++j) {
      argv.push_back("-p");
      argv.push_back(data_sections[j]);
    }
    argv.push_back(path);
    strings += Capture(argv);
  }
  for (const auto& bad : r.forbidden_strings) {
    if (strings.find(bad) != std::string::npos) {
      out->push_back({file, "the string \"" + bad + "\"",
                      "strings: a path into the process's own /proc entries or the grader's channel",
                      "nothing a lab needs is found there"});
    }
  }
}

int Undefined(const std::string& out_path, const std::vector<std::string>& inputs) {
  std::set<std::string> names;
  for (const auto& p : inputs) {
    if (p.size() > 3 && p.compare(p.size() - 3, 3, ".so") == 0) continue;  // the archives hold the objects
    for (const Symbol& s : ReadSymbols(p)) {
      if (s.type == 'U' || s.type == 'w' || s.type == 'v') names.insert(s.name);
    }
  }
  std::ofstream out(out_path);
  for (const auto& n : names) out << n << "\n";
  if (!out) throw std::runtime_error("cannot write " + out_path);
  return 0;
}

// CheckObject on every NAME=PATH of `objects`, on as many threads as there are cores: nearly all the time is
// spent waiting for binutils (objdump -d is about 0.3 s an object, and a lab's gates check 20-40 objects).
// The refusals come back in the order of `objects`; the first object that cannot be read throws.
std::vector<Refusal> CheckObjects(const Rules& rules, const std::set<std::string>& reference,
                                  const std::vector<std::string>& objects) {
  std::vector<std::vector<Refusal>> found(objects.size());
  std::vector<std::string> errors(objects.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < objects.size(); i = next.fetch_add(1)) {
      const size_t eq = objects[i].find('=');
      try {
        CheckObject(rules, reference, objects[i].substr(0, eq), objects[i].substr(eq + 1), &found[i]);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    }
  };
  const size_t threads = std::min<size_t>(objects.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  std::vector<Refusal> refused;
  for (size_t i = 0; i < objects.size(); ++i) {
    if (!errors[i].empty()) throw std::runtime_error(errors[i]);
    refused.insert(refused.end(), found[i].begin(), found[i].end());
  }
  return refused;
}

}  // namespace

int main(int argc, char** argv) {
  distlab::cli::App app{"The grader's symbol rules for a submission's compiled objects."};
  app.require_subcommand(1);
  std::string out_path, rules_path, reference_path;
  std::vector<std::string> inputs, objects;
  auto* undef = app.add_subcommand("undefined", "list the undefined symbols of objects and archives");
  undef->add_option("--out", out_path, "where to write them")->required();
  undef->add_option("inputs", inputs, "objects and archives")->required();
  auto* check = app.add_subcommand("check", "check student objects against a lab's symbol rules");
  check->add_option("--rules", rules_path, "//labs/<lab>:symbol_rules")->required();
  check->add_option("--reference", reference_path, "//solutions/<lab>:reference_symbols")->required();
  check->add_option("--object", objects, "NAME=PATH of a student object (repeatable)")->required();
  DISTLAB_CLI_PARSE(app, argc, argv);
  try {
    if (*undef) return Undefined(out_path, inputs);
    const Rules rules = ReadRules(rules_path);
    std::set<std::string> reference;
    std::ifstream in(reference_path);
    if (!in) throw std::runtime_error("cannot read " + reference_path);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) reference.insert(line);
    }
    for (const auto& o : objects) {
      if (o.find('=') == std::string::npos) throw std::runtime_error("--object wants NAME=PATH, not " + o);
    }
    const std::vector<Refusal> refused = CheckObjects(rules, reference, objects);
    for (const auto& r : refused) {
      std::printf("%s: %s\n    rule: %s\n    instead: %s\n", r.file.c_str(), r.symbol.c_str(), r.rule.c_str(),
                  r.instead.c_str());
    }
    if (!refused.empty()) {
      std::printf("%zu symbol rule(s) broken (lab %s)\n", refused.size(), rules.lab.c_str());
      return 1;
    }
    std::printf("symbol rules of lab %s: %zu object(s) pass\n", rules.lab.c_str(), objects.size());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "symbols: %s\n", e.what());
    return 2;
  }
}
