// The one file that includes CLI11 (see cli.h).
#include "tools/base/cli.h"

#include <cstdint>

#include "CLI/CLI.hpp"

namespace distlab::cli {

Validator::Validator(const CLI::Validator& v) : v_(std::make_unique<CLI::Validator>(v)) {}
Validator::Validator(const Validator& other) : v_(std::make_unique<CLI::Validator>(*other.v_)) {}
Validator& Validator::operator=(const Validator& other) {
  v_ = std::make_unique<CLI::Validator>(*other.v_);
  return *this;
}
Validator::~Validator() = default;

Validator IsMember(std::vector<std::string> choices) { return Validator(CLI::IsMember(std::move(choices))); }
Validator Range(int min, int max) { return Validator(CLI::Range(min, max)); }
Validator Range(double min, double max) { return Validator(CLI::Range(min, max)); }
Validator PositiveNumber() { return Validator(CLI::PositiveNumber); }
Validator ExistingDirectory() { return Validator(CLI::ExistingDirectory); }

Option* Option::required() {
  o_->required();
  return this;
}
Option* Option::check(const Validator& v) {
  o_->check(v.get());
  return this;
}
Option* Option::capture_default_str() {
  o_->capture_default_str();
  return this;
}

App::App(const std::string& description, const std::string& name)
    : owned_(std::make_unique<CLI::App>(description, name)) {
  app_ = owned_.get();
}
App::App(CLI::App* borrowed) : app_(borrowed) {}
App::~App() = default;

template <typename T>
Option* App::add_option(const std::string& name, T& variable, const std::string& description) {
  options_.push_back(std::unique_ptr<Option>(new Option(app_->add_option(name, variable, description))));
  return options_.back().get();
}

Option* App::add_flag(const std::string& name, bool& variable, const std::string& description) {
  options_.push_back(std::unique_ptr<Option>(new Option(app_->add_flag(name, variable, description))));
  return options_.back().get();
}

App* App::add_subcommand(const std::string& name, const std::string& description) {
  subcommands_.push_back(std::unique_ptr<App>(new App(app_->add_subcommand(name, description))));
  return subcommands_.back().get();
}

App* App::require_subcommand(int how_many) {
  app_->require_subcommand(how_many);
  return this;
}

size_t App::count(const std::string& name) const { return app_->count(name); }

App::operator bool() const { return static_cast<bool>(*app_); }

bool App::Parse(int argc, char** argv, int* exit_code) {
  try {
    app_->parse(argc, argv);
    return true;
  } catch (const CLI::ParseError& e) {
    *exit_code = app_->exit(e);
    return false;
  }
}

// The types the project binds (add another here when a tool needs it).
template Option* App::add_option(const std::string&, std::string&, const std::string&);
template Option* App::add_option(const std::string&, int&, const std::string&);
template Option* App::add_option(const std::string&, long&, const std::string&);
template Option* App::add_option(const std::string&, long long&, const std::string&);
template Option* App::add_option(const std::string&, unsigned&, const std::string&);
template Option* App::add_option(const std::string&, unsigned long&, const std::string&);
template Option* App::add_option(const std::string&, unsigned long long&, const std::string&);
template Option* App::add_option(const std::string&, double&, const std::string&);
template Option* App::add_option(const std::string&, float&, const std::string&);
template Option* App::add_option(const std::string&, std::vector<std::string>&, const std::string&);
template Option* App::add_option(const std::string&, std::vector<int>&, const std::string&);
template Option* App::add_option(const std::string&, std::vector<long>&, const std::string&);
template Option* App::add_option(const std::string&, std::vector<double>&, const std::string&);

}  // namespace distlab::cli
