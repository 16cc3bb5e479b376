#pragma once

#include <string>

#include "client/render.h"
#include "trainctl/v1/jobs.pb.h"

namespace trainctl::client {

// `trainctl queue`: the policy in one line, the pending jobs in the order
// they will be considered (priority, fair-share standing, estimated start,
// what each waits for), then each user's standing against their quota.
std::string RenderQueue(const v1::GetQueueResponse& queue,
                        const RenderContext& ctx);

}  // namespace trainctl::client
