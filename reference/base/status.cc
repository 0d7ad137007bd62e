#include "reference/base/status.h"

#include "absl/strings/str_cat.h"

namespace distlab {
namespace {
std::string TodoText(std::string_view lab, std::string_view stage, std::string_view function) {
  return absl::StrCat("TODO(", lab, " stage ", stage, "): ", function);
}
}  // namespace

absl::Status Unimplemented(std::string_view lab, std::string_view stage, std::string_view function) {
  return absl::UnimplementedError(TodoText(lab, stage, function));
}

NotImplementedError::NotImplementedError(std::string_view lab, std::string_view stage,
                                         std::string_view function)
    : std::logic_error(TodoText(lab, stage, function)) {}

}  // namespace distlab
