// format audio: a CSV manifest of sound files and class ids, each file
// decoded, resampled and turned into a log-mel spectrogram when the set is
// loaded (docs/job-spec.md, "Audio").

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/audio_manifest.h"
#include "common/spec_audio.h"
#include "common/status_macros.h"
#include "worker/support/audio_decode.h"
#include "worker/train/data/audio_features.h"
#include "worker/train/data/in_memory.h"
#include "worker/train/data/readers.h"

namespace trainctl::train {
namespace {

// Clips decoded at once: their waveforms are held until the chunk's
// spectrograms are taken (256 clips of 1 s at 16 kHz: 16 MiB).
constexpr int64_t kClipsPerChunk = 256;

// Row r's clip: mono at the spec's rate, cut or zero-padded to `out`'s
// length. The error names the manifest line, never the file's path or bytes.
absl::Status DecodeClip(const ReadRequest& req, const v1::AudioSpec& audio,
                        const AudioManifestRow& row, torch::Tensor out) {
  const std::string path = ResolveManifestPath(req.path, row.path);
  absl::StatusOr<DecodedAudio> decoded = ReadAudioFile(path, audio.clip_seconds());
  if (!decoded.ok()) {
    const bool relative = row.path.front() != '/';
    return absl::InvalidArgumentError(absl::StrCat(
        req.field, ": ", req.path, ": line ", row.line, ": its sound file: ",
        decoded.status().message(),
        relative ? " (a relative path is taken from the manifest's directory; a manifest "
                   "shipped from the submitter comes without its sound files: list "
                   "paths the workers can read)"
                 : ""));
  }
  torch::Tensor wave = torch::from_blob(decoded->samples.data(),
                                        {static_cast<int64_t>(decoded->samples.size())},
                                        torch::kFloat32);
  wave = Resample(wave, decoded->sample_rate, audio.sample_rate());
  const int64_t n = std::min(wave.size(0), out.size(0));
  out.zero_();
  out.slice(0, 0, n).copy_(wave.slice(0, 0, n));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LoadedSet> ReadAudio(const ReadRequest& req, const v1::DataSpec& data) {
  if (req.task != "classification") {
    return absl::InvalidArgumentError(absl::StrCat(
        "task: data.format audio holds labelled sounds; task ", req.task,
        " needs another format"));
  }
  const v1::AudioSpec& audio = data.audio();
  ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(req.path, req.field));
  ASSIGN_OR_RETURN(const std::vector<AudioManifestRow> rows,
                   ParseAudioManifest(text, audio, req.field, req.path, req.limit));
  ASSIGN_OR_RETURN(const LogMelSpectrogram log_mel, LogMelSpectrogram::Create(audio));
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t samples = AudioClipSamples(audio);
  const int64_t frames = AudioFrames(audio);
  torch::Tensor features = torch::empty({n, 1, audio.n_mels(), frames});
  torch::Tensor labels = torch::empty({n}, torch::kInt64);
  int64_t* label = labels.data_ptr<int64_t>();
  int64_t max_label = 0;
  for (int64_t r = 0; r < n; ++r) {
    label[r] = rows[static_cast<size_t>(r)].label;
    max_label = std::max(max_label, label[r]);
  }
  torch::Tensor clips = torch::empty({std::min(n, kClipsPerChunk), samples});
  for (int64_t first = 0; first < n; first += kClipsPerChunk) {
    const int64_t count = std::min(kClipsPerChunk, n - first);
    // Decoding is most of the cost: the rank's intra-op threads share it.
    std::vector<absl::Status> status(static_cast<size_t>(count));
    at::parallel_for(0, count, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        status[static_cast<size_t>(i)] =
            DecodeClip(req, audio, rows[static_cast<size_t>(first + i)], clips[i]);
      }
    });
    for (const absl::Status& s : status) RETURN_IF_ERROR(s);
    features.slice(0, first, first + count)
        .copy_(log_mel(clips.slice(0, 0, count)).unsqueeze(1));
  }
  LoadedSet out;
  out.info.input_shape = {1, audio.n_mels(), frames};
  out.info.num_classes = max_label + 1;
  out.data = std::make_shared<TensorDataset>(std::move(features), std::move(labels));
  return out;
}

}  // namespace trainctl::train
