#pragma once

// The JSON the dashboard reads (/api/...), built from protos with
// protobuf's JSON printer (proto3 JSON mapping: int64 fields are strings,
// field names camelCase), so strings are escaped by the library.

#include <cstdint>
#include <string>
#include <vector>

#include "trainctl/v1/jobs.pb.h"

namespace trainctl::coordinator::http {

// Most events one /events response carries; the dashboard pages on with
// next_seq, so a long history arrives in bounded pieces.
inline constexpr int64_t kMaxEventsPerResponse = 2000;

// {"jobs":[...]}: each job without its spec (except the name), ranks,
// transitions and progress, which only the job page needs.
std::string JobListJson(const std::vector<v1::Job>& jobs);
// The whole job.
std::string JobJson(const v1::Job& job);
// {"workers":[...]}
std::string WorkersJson(const std::vector<v1::WorkerInfo>& workers);
// GetQueueResponse as JSON: the pending jobs in policy order, the classes
// and each user's standing.
std::string QueueJson(const v1::GetQueueResponse& queue);
// {"events":[...],"nextSeq":N,"closed":bool}: `events` in seq order;
// nextSeq is the seq to ask for next; closed once the job's history is
// complete and all of it was returned.
std::string EventsJson(const std::vector<v1::JobEvent>& events,
                       int64_t next_seq, bool closed);
// {"error":"..."}
std::string ErrorJson(const std::string& message);

}  // namespace trainctl::coordinator::http
