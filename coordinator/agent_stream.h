#pragma once

#include <grpcpp/grpcpp.h>

#include "coordinator/auth/authenticator.h"
#include "coordinator/auth/worker_enrollment.h"
#include "coordinator/job_manager.h"
#include "trainctl/v1/workers.grpc.pb.h"

namespace trainctl::coordinator {

// One agent's Workers.Connect stream on gRPC's callback API, so that no
// server thread is held per connected node: with the synchronous API each
// of 1,000 agents held one, and unary calls such as SubmitJob waited
// behind them (p99 60-150 ms at 1,000 agents against 10 ms at 100;
// docs/performance.md). Each message read goes straight to the
// JobManager; messages down, from any thread, queue behind the write in
// flight. The stream deletes itself when gRPC is done with it.
grpc::ServerBidiReactor<v1::AgentMessage, v1::CoordinatorMessage>*
NewAgentStream(grpc::CallbackServerContext* ctx, JobManager& jobs,
               const auth::Authenticator& auth,
               auth::WorkerEnrollment& enrollment);

}  // namespace trainctl::coordinator
