#pragma once

// The one JSON dialect of trainctl's answers, for the CLI's -o json and the
// coordinator's HTTP API alike: proto JSON with the proto field names
// (`job_id`, not `jobId`), every field printed, zero values included, so a
// reader never guesses a default.

#include <string>

#include <google/protobuf/message.h>

namespace trainctl {

// False only when a string field is not valid UTF-8 (`out` is then unset).
bool ProtoToJson(const google::protobuf::Message& message, bool pretty,
                 std::string* out);

}  // namespace trainctl
