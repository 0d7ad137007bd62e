// Status helpers for the whole course.
//
// APIs return absl::Status / absl::StatusOr<T>. RETURN_IF_ERROR and ASSIGN_OR_RETURN propagate errors;
// Unimplemented() is what every starter stub returns: "TODO(<lab> stage <X>): <Function>". Functions that
// return a plain value throw NotImplementedError with the same text instead.
#ifndef DISTLAB_REFERENCE_BASE_STATUS_H_
#define DISTLAB_REFERENCE_BASE_STATUS_H_

#include <stdexcept>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tools/base/macros.h"

namespace distlab {

// "TODO(collectives stage B): RingAllReduce" as an absl::UnimplementedError.
absl::Status Unimplemented(std::string_view lab, std::string_view stage, std::string_view function);

// Thrown by stubs whose function returns a plain value; what() is the same text as Unimplemented().
class NotImplementedError : public std::logic_error {
 public:
  NotImplementedError(std::string_view lab, std::string_view stage, std::string_view function);
};

}  // namespace distlab

// Returns the status from the enclosing function when `expr` is not OK.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::absl::Status distlab_status_ = (expr);           \
    if (!distlab_status_.ok()) return distlab_status_; \
  } while (0)

// ASSIGN_OR_RETURN(auto x, MakeX()); returns the error when MakeX() fails.
#define ASSIGN_OR_RETURN(lhs, expr) \
  DISTLAB_ASSIGN_OR_RETURN_IMPL_(DISTLAB_CONCAT(distlab_statusor_, __LINE__), lhs, expr)
#define DISTLAB_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()

#endif  // DISTLAB_REFERENCE_BASE_STATUS_H_
