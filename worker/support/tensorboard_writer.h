#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace trainctl::train {

// CRC-32C (Castagnoli polynomial), the checksum of TFRecord framing.
uint32_t Crc32c(absl::string_view data);

// TFRecord stores each CRC masked (rotated right by 15 bits, plus a
// constant) so that the CRC of bytes that hold CRCs stays well distributed.
uint32_t MaskCrc32c(uint32_t crc);

// One TFRecord: the length of `data` as uint64 little-endian, the masked
// CRC-32C of those 8 bytes, `data`, and the masked CRC-32C of `data` (both
// CRCs uint32 little-endian).
std::string FrameRecord(absl::string_view data);

// The file name TensorBoard looks for: "events.out.tfevents.<seconds>.<host>".
std::string EventFileName(int64_t unix_seconds, const std::string& host);

// Writes scalars as a TensorBoard event file: a sequence of TFRecords, each
// an Event protobuf (proto/trainctl/tensorboard/event.proto), the first one
// carrying file_version "brain.Event:2". Every WriteScalars call is one
// Event appended with one write(2), so a TensorBoard watching the directory
// sees whole records as soon as they are reported; nothing is buffered.
// A process that starts again (a new generation of a job) opens a new file
// next to the old ones, as TensorBoard expects of a resumed run.
// Not thread-safe; one per rank 0 of a job.
class TensorBoardWriter {
 public:
  // Creates `dir` (mkdir -p) and a new event file in it named
  // EventFileName(unix_seconds, host); if that name is taken (a restart in
  // the same second) ".1", ".2", ... is appended. Writes the file_version
  // record. Errors name the directory or file and the failing call.
  static absl::StatusOr<std::unique_ptr<TensorBoardWriter>> Create(
      const std::string& dir, int64_t unix_seconds, const std::string& host);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // Appends one Event at `step` holding one scalar per entry of `values`
  // (tag = key). TensorBoard keeps scalars as float32.
  absl::Status WriteScalars(int64_t step, double wall_time_seconds,
                            const std::map<std::string, double>& values);

  const std::string& path() const { return path_; }

 private:
  TensorBoardWriter(int fd, std::string path)
      : fd_(fd), path_(std::move(path)) {}
  absl::Status Append(const std::string& event_bytes);

  int fd_;
  std::string path_;
};

// This machine's host name ("localhost" when it cannot be read).
std::string HostName();

}  // namespace trainctl::train
