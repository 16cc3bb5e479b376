#pragma once

#include <google/protobuf/message_lite.h>

#include <string>

#include "absl/status/status.h"

namespace trainctl {

// Length-prefixed protobuf frames over a pipe: a 4-byte little-endian length,
// then the serialized message. The rank process reports metrics to its agent
// this way on a dedicated file descriptor, apart from its stdout/stderr.

constexpr uint32_t kMaxFrameBytes = 1 << 20;

// The frame's bytes: length prefix then the serialized message.
std::string EncodeFrame(const google::protobuf::MessageLite& message);

// Writes the whole frame (retrying short writes and EINTR).
absl::Status WriteFrame(int fd, const google::protobuf::MessageLite& message);

// Reads one frame into `message`. OUT_OF_RANGE at a clean end of stream;
// DATA_LOSS on a truncated or oversized frame.
absl::Status ReadFrame(int fd, google::protobuf::MessageLite* message);

}  // namespace trainctl
