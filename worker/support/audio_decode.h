#pragma once

// Sound files (WAV, FLAC, Ogg Vorbis, AIFF, ... whatever libsndfile reads)
// decoded to mono float samples. Torch-free.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trainctl::train {

struct DecodedAudio {
  int sample_rate = 0;         // Hz, as the file gives it
  int channels = 0;            // the file's; `samples` is their average
  int64_t file_frames = 0;     // the file's length in frames
  std::vector<float> samples;  // mono, in [-1, 1]
};

// Reads the first `max_seconds` of the regular file at `path` (0: all of
// it), and FramesForSeconds' margin past them, and averages its channels. INVALID_ARGUMENT when it is no regular file,
// cannot be opened, is in no format libsndfile knows, or has no frames; the
// message says why without naming the file (the caller does, by the spec
// field and manifest line that named it).
absl::StatusOr<DecodedAudio> ReadAudioFile(const std::string& path, double max_seconds);

// The frames ReadAudioFile needs of a file at `file_rate` Hz for `seconds`
// of sound at any resampled rate: the seconds, and the resampling filter's
// reach past them.
int64_t FramesForSeconds(int file_rate, double seconds);

}  // namespace trainctl::train
