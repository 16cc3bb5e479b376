#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace trainctl {

// The one place where absl::Status and grpc::Status meet; codes map 1:1.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace trainctl
