// Command-line flags for the project's tools, demos and mains: a thin face over CLI11, compiled once.
//
// CLI11 is header-only, and including it costs about 4.5 s of compile time per file (measured with g++ 12
// at -Og; the project has 22 command-line mains). This header declares the part of CLI11's App that the
// project uses, with the same names and meanings, and tools/base/cli.cc is the only file that includes
// CLI11. Parsing, --help, error messages and exit codes are CLI11's own.
//
//   distlab::cli::App app{"what the program does"};
//   std::string out;
//   app.add_option("--out", out, "where to write")->required();
//   auto* sub = app.add_subcommand("check", "check something");
//   DISTLAB_CLI_PARSE(app, argc, argv);   // returns from main on --help or a bad command line
//   if (*sub) ...
//
// add_option binds a variable of one of the types instantiated in cli.cc (strings, integers, doubles and
// vectors of them); another type is a link error naming add_option<T>.
#ifndef DISTLAB_TOOLS_BASE_CLI_H_
#define DISTLAB_TOOLS_BASE_CLI_H_

#include <memory>
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
class Validator;
}  // namespace CLI

namespace distlab::cli {

// A check on an option's value (CLI11's validators of the same names).
class Validator {
 public:
  Validator(const Validator&);
  Validator& operator=(const Validator&);
  ~Validator();
  const CLI::Validator& get() const { return *v_; }

 private:
  friend Validator IsMember(std::vector<std::string>);
  friend Validator Range(int, int);
  friend Validator Range(double, double);
  friend Validator PositiveNumber();
  friend Validator ExistingDirectory();
  explicit Validator(const CLI::Validator& v);
  std::unique_ptr<CLI::Validator> v_;
};

Validator IsMember(std::vector<std::string> choices);  // the value is one of `choices`
Validator Range(int min, int max);                     // min <= value <= max (shown as integers)
Validator Range(double min, double max);               // min <= value <= max
Validator PositiveNumber();                            // value > 0
Validator ExistingDirectory();                         // a folder that exists

// One option of an App; the methods chain as CLI11's do.
class Option {
 public:
  Option* required();  // the command line must give it
  Option* check(const Validator&);
  Option* capture_default_str();  // --help shows the bound variable's value as the default

 private:
  friend class App;
  explicit Option(CLI::Option* o) : o_(o) {}
  CLI::Option* o_;
};

class App {
 public:
  explicit App(const std::string& description, const std::string& name = "");
  ~App();
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  // name: "--long", "-s,--long", or a positional "name". The App keeps the returned Option.
  template <typename T>
  Option* add_option(const std::string& name, T& variable, const std::string& description = "");
  Option* add_flag(const std::string& name, bool& variable, const std::string& description = "");
  App* add_subcommand(const std::string& name, const std::string& description = "");
  App* require_subcommand(int how_many);

  // How many times `name` ("--long") was given.
  size_t count(const std::string& name) const;
  // For a subcommand: whether the command line chose it.
  explicit operator bool() const;

  // Parses argv. False when main should return *exit_code: --help printed, or a bad command line
  // reported on stderr (CLI11's message and code).
  bool Parse(int argc, char** argv, int* exit_code);

 private:
  explicit App(CLI::App* borrowed);  // a subcommand, owned by its parent's CLI::App
  CLI::App* app_;
  std::unique_ptr<CLI::App> owned_;
  std::vector<std::unique_ptr<Option>> options_;
  std::vector<std::unique_ptr<App>> subcommands_;
};

}  // namespace distlab::cli

// In main: parse, and return from main on --help or a bad command line.
#define DISTLAB_CLI_PARSE(app, argc, argv)                                                    \
  do {                                                                                        \
    int distlab_cli_exit_code_ = 0;                                                           \
    if (!(app).Parse((argc), (argv), &distlab_cli_exit_code_)) return distlab_cli_exit_code_; \
  } while (0)

#endif  // DISTLAB_TOOLS_BASE_CLI_H_
