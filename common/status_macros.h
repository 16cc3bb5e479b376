#pragma once

// Abseil 20220623 ships no RETURN_IF_ERROR / ASSIGN_OR_RETURN; these are ours.

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TRAINCTL_CONCAT_INNER(a, b) a##b
#define TRAINCTL_CONCAT(a, b) TRAINCTL_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                         \
  do {                                                \
    ::absl::Status trainctl_status_ = (expr);         \
    if (!trainctl_status_.ok()) return trainctl_status_; \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(TRAINCTL_CONCAT(statusor_, __LINE__), lhs, expr)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
