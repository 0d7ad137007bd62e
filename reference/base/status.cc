#include "reference/base/status.h"

namespace distlab {
namespace {
std::string TodoText(std::string_view lab, std::string_view stage, std::string_view function) {
  // Debian's absl has its own absl::string_view (ABSL_OPTION_USE_STD_STRING_VIEW 0), so plain strings here.
  return "TODO(" + std::string(lab) + " stage " + std::string(stage) + "): " + std::string(function);
}
}  // namespace

absl::Status Unimplemented(std::string_view lab, std::string_view stage, std::string_view function) {
  return absl::UnimplementedError(TodoText(lab, stage, function));
}

NotImplementedError::NotImplementedError(std::string_view lab, std::string_view stage,
                                         std::string_view function)
    : std::logic_error(TodoText(lab, stage, function)) {}

}  // namespace distlab
