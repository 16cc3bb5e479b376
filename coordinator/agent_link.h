#pragma once

#include "trainctl/v1/workers.pb.h"

namespace trainctl::coordinator {

// The coordinator's way to talk down to one connected agent. The gRPC
// implementation writes to the agent's stream; tests use a recording fake.
// Send may be called from any thread and returns false once the link is gone.
class AgentLink {
 public:
  virtual ~AgentLink() = default;
  virtual bool Send(const v1::CoordinatorMessage& message) = 0;
  // Ends the link from the coordinator's side (a worker whose lease expired
  // while its stream still looked open).
  virtual void Disconnect() {}
};

}  // namespace trainctl::coordinator
