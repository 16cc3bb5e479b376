#include "worker/support/audio_decode.h"

#include <fcntl.h>
#include <sndfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace trainctl::train {
namespace {

// More channels than any recording format holds: a corrupt header.
constexpr int kMaxChannels = 64;
constexpr sf_count_t kChunkFrames = 4096;

}  // namespace

int64_t FramesForSeconds(int file_rate, double seconds) {
  // The resampler's filter reaches 6 / 0.99 x (file rate / target rate)
  // input samples past a sample when downsampling, about 7 when
  // upsampling: under file_rate / 160 for any target of 1 kHz or more (the
  // spec's least), so a tenth of a second is plenty.
  return static_cast<int64_t>(std::ceil(file_rate * seconds)) + file_rate / 10 + 16;
}

absl::StatusOr<DecodedAudio> ReadAudioFile(const std::string& path, double max_seconds) {
  // O_NONBLOCK: a FIFO named by a manifest must not hang the rank at open.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot open it: ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError("it is not a regular file");
  }
  SF_INFO info;
  std::memset(&info, 0, sizeof(info));
  SNDFILE* file = sf_open_fd(fd, SFM_READ, &info, /*close_desc=*/SF_TRUE);
  if (file == nullptr) {
    // sf_open_fd does not close the descriptor when it fails.
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("not a sound file libsndfile reads (", sf_strerror(nullptr), ")"));
  }
  DecodedAudio out;
  out.sample_rate = info.samplerate;
  out.channels = info.channels;
  out.file_frames = info.frames;
  auto fail = [&](const std::string& why) {
    sf_close(file);
    return absl::InvalidArgumentError(why);
  };
  if (info.channels < 1 || info.channels > kMaxChannels) {
    return fail(absl::StrCat("its header gives ", info.channels, " channels"));
  }
  if (info.samplerate < 1) return fail("its header gives no sample rate");
  if (info.frames <= 0) return fail("it holds no sound (0 frames)");
  const int64_t wanted =
      max_seconds > 0 ? std::min<int64_t>(FramesForSeconds(info.samplerate, max_seconds), info.frames)
                      : info.frames;
  out.samples.reserve(static_cast<size_t>(wanted));
  std::vector<float> chunk(static_cast<size_t>(kChunkFrames * info.channels));
  while (static_cast<int64_t>(out.samples.size()) < wanted) {
    const sf_count_t ask = std::min<sf_count_t>(
        kChunkFrames, wanted - static_cast<int64_t>(out.samples.size()));
    const sf_count_t got = sf_readf_float(file, chunk.data(), ask);
    if (got <= 0) break;  // a header that promised more than the file holds
    for (sf_count_t f = 0; f < got; ++f) {
      float sum = 0;
      for (int c = 0; c < info.channels; ++c) sum += chunk[static_cast<size_t>(f * info.channels + c)];
      out.samples.push_back(sum / static_cast<float>(info.channels));
    }
  }
  sf_close(file);
  if (out.samples.empty()) return absl::InvalidArgumentError("its sound cannot be read");
  return out;
}

}  // namespace trainctl::train
