#pragma once

// The agent's link to the coordinator: a channel that may be up or down, and
// on it one Workers.Connect stream per session. An interface, so the agent's
// unit tests play the coordinator (tests/unit/agent_test.cc); the real one
// is gRPC (GrpcCoordinatorConnection).

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "trainctl/v1/workers.pb.h"

namespace grpc {
class ChannelCredentials;
}

namespace trainctl::agent {

// One session. Read and Write may run at once on two threads (one each);
// Cancel from any thread.
class CoordinatorStream {
 public:
  virtual ~CoordinatorStream() = default;
  // False once the stream is broken.
  virtual bool Write(const v1::AgentMessage& message) = 0;
  // Blocks for the next message; false once the stream has ended.
  virtual bool Read(v1::CoordinatorMessage* message) = 0;
  // Ends the session: a blocked Read returns false.
  virtual void Cancel() = 0;
  // After Read returned false: why the stream ended.
  virtual absl::Status Finish() = 0;
};

class CoordinatorConnection {
 public:
  virtual ~CoordinatorConnection() = default;
  // Waits up to `timeout` for the coordinator to be reachable. A stream
  // opened before would fail at once (and over TLS abort the handshake).
  virtual bool WaitForConnected(std::chrono::milliseconds timeout) = 0;
  virtual std::unique_ptr<CoordinatorStream> Connect() = 0;
};

// Over one gRPC channel to `address`; null credentials = plaintext.
std::unique_ptr<CoordinatorConnection> GrpcCoordinatorConnection(
    const std::string& address,
    std::shared_ptr<grpc::ChannelCredentials> credentials);

}  // namespace trainctl::agent
