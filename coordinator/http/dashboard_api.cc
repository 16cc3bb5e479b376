#include "coordinator/http/dashboard_api.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "common/proto_json.h"

namespace trainctl::coordinator::http {
namespace {

std::string ToJson(const google::protobuf::Message& message) {
  std::string out;
  // Only invalid UTF-8 in a string field fails; say so instead of sending
  // broken JSON.
  if (!ProtoToJson(message, /*pretty=*/false, &out)) {
    return ErrorJson("a field is not valid UTF-8");
  }
  return out;
}

}  // namespace

std::string ErrorJson(const std::string& message) {
  google::protobuf::Value value;
  value.set_string_value(message);
  google::protobuf::Struct error;
  (*error.mutable_fields())["error"] = value;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(error, &out).ok()) {
    return R"({"error":"unprintable error"})";
  }
  return out;
}

std::string JobListJson(const std::vector<v1::Job>& jobs) {
  v1::ListJobsResponse list;
  for (const v1::Job& job : jobs) {
    v1::Job* summary = list.add_jobs();
    *summary = job;
    summary->clear_spec();
    summary->mutable_spec()->set_name(job.spec().name());
    summary->clear_ranks();
    summary->clear_transitions();
    summary->clear_progress();
  }
  return ToJson(list);
}

std::string JobJson(const v1::Job& job) { return ToJson(job); }

std::string WorkersJson(const std::vector<v1::WorkerInfo>& workers) {
  v1::ListWorkersResponse list;
  for (const v1::WorkerInfo& w : workers) *list.add_workers() = w;
  return ToJson(list);
}

std::string QueueJson(const v1::GetQueueResponse& queue) { return ToJson(queue); }

std::string EventsJson(const std::vector<v1::JobEvent>& events,
                       int64_t next_seq, bool closed) {
  std::string out = R"({"events":[)";
  for (size_t i = 0; i < events.size(); ++i) {
    absl::StrAppend(&out, i > 0 ? "," : "", ToJson(events[i]));
  }
  absl::StrAppend(&out, R"(],"next_seq":)", next_seq,
                  R"(,"closed":)", closed ? "true" : "false", "}");
  return out;
}

}  // namespace trainctl::coordinator::http
