// format audio: a CSV manifest of sound files and class ids, each file
// decoded, resampled and turned into a log-mel spectrogram when the set is
// loaded (docs/job-spec.md, "Audio").

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/audio_manifest.h"
#include "common/data_shards.h"
#include "common/spec_audio.h"
#include "common/status_macros.h"
#include "common/vocabulary.h"
#include "worker/support/audio_decode.h"
#include "worker/train/data/audio_features.h"
#include "worker/train/data/in_memory.h"
#include "worker/train/data/readers.h"

namespace trainctl::train {
namespace {

// Clips decoded at once: their waveforms are held until the chunk's
// spectrograms are taken (256 clips of 1 s at 16 kHz: 16 MiB).
constexpr int64_t kClipsPerChunk = 256;

// A set's resamplers, one per file rate met, shared by the loading threads.
class Resamplers {
 public:
  explicit Resamplers(int64_t to) : to_(to) {}
  const Resampler& From(int64_t from) {
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<Resampler>& r = by_rate_[from];
    if (!r) r = std::make_unique<Resampler>(from, to_);
    return *r;
  }

 private:
  const int64_t to_;
  std::mutex mu_;
  std::map<int64_t, std::unique_ptr<Resampler>> by_rate_;
};

// Row r's clip: mono at the spec's rate, cut or zero-padded to `out`'s
// length. The error names the manifest line, never the file's path or bytes.
absl::Status DecodeClip(const ReadRequest& req, const v1::AudioSpec& audio,
                        const AudioManifestRow& row, Resamplers& resamplers,
                        torch::Tensor out) {
  const std::string path = ResolveManifestPath(req.path, row.path);
  absl::StatusOr<DecodedAudio> decoded = ReadAudioFile(path, audio.clip_seconds());
  if (!decoded.ok()) {
    // A relative path that cannot be opened may be one a shipped manifest
    // brought without its file.
    const bool unopened_relative =
        row.path.front() != '/' && absl::StartsWith(decoded.status().message(), "cannot open");
    return absl::InvalidArgumentError(absl::StrCat(
        req.field, ": ", req.path, ": line ", row.line, ": its sound file: ",
        decoded.status().message(),
        unopened_relative ? " (a relative path is taken from the manifest's directory; a manifest "
                   "shipped from the submitter comes without its sound files: list "
                   "paths the workers can read)"
                 : ""));
  }
  torch::Tensor wave = torch::from_blob(decoded->samples.data(),
                                        {static_cast<int64_t>(decoded->samples.size())},
                                        torch::kFloat32);
  wave = resamplers.From(decoded->sample_rate)(wave);
  const int64_t n = std::min(wave.size(0), out.size(0));
  out.zero_();
  out.slice(0, 0, n).copy_(wave.slice(0, 0, n));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LoadedSet> ReadAudio(const ReadRequest& req, const v1::DataSpec& data) {
  if (req.task != Task::kClassification) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task: data.format audio holds labelled sounds; task ", TaskName(req.task),
        " needs another format"));
  }
  const v1::AudioSpec& audio = data.audio();
  ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(req.path, req.field));
  ASSIGN_OR_RETURN(const std::vector<AudioManifestRow> rows,
                   ParseAudioManifest(text, audio, req.field, req.path, req.limit));
  ASSIGN_OR_RETURN(const std::vector<int64_t> ids,
                   AudioClassIds(rows, req.class_names, req.field, req.path));
  ASSIGN_OR_RETURN(const LogMelSpectrogram log_mel, LogMelSpectrogram::Create(audio));
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t samples = AudioClipSamples(audio);
  const int64_t frames = AudioFrames(audio);
  torch::Tensor features = torch::empty({n, 1, audio.n_mels(), frames});
  torch::Tensor labels = torch::empty({n}, torch::kInt64);
  std::copy(ids.begin(), ids.end(), labels.data_ptr<int64_t>());
  const int64_t max_label = *std::max_element(ids.begin(), ids.end());
  torch::Tensor clips = torch::empty({std::min(n, kClipsPerChunk), samples});
  Resamplers resamplers(audio.sample_rate());
  for (int64_t first = 0; first < n; first += kClipsPerChunk) {
    const int64_t count = std::min(kClipsPerChunk, n - first);
    // Decoding is most of the cost: the rank's intra-op threads share it.
    std::vector<absl::Status> status(static_cast<size_t>(count));
    at::parallel_for(0, count, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        status[static_cast<size_t>(i)] =
            DecodeClip(req, audio, rows[static_cast<size_t>(first + i)], resamplers, clips[i]);
      }
    });
    for (const absl::Status& s : status) RETURN_IF_ERROR(s);
    features.slice(0, first, first + count)
        .copy_(log_mel(clips.slice(0, 0, count)).unsqueeze(1));
  }
  LoadedSet out;
  out.info.input_shape = {1, audio.n_mels(), frames};
  // Named classes are as many as the training set names, whichever of them
  // this set (or shard) holds.
  out.info.num_classes = req.class_names.empty()
                             ? max_label + 1
                             : static_cast<int64_t>(req.class_names.size());
  out.data = std::make_shared<TensorDataset>(std::move(features), std::move(labels));
  return out;
}

absl::StatusOr<std::vector<std::string>> AudioTrainingClasses(const v1::DataSpec& data) {
  const std::string field = "data.train_path";
  ASSIGN_OR_RETURN(const std::vector<std::string> manifests,
                   ResolveShards(field, data.train_path()));
  std::vector<AudioManifestRow> rows;
  for (const std::string& manifest : manifests) {
    ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(manifest, field));
    ASSIGN_OR_RETURN(std::vector<AudioManifestRow> part,
                     ParseAudioManifest(text, data.audio(), field, manifest));
    for (AudioManifestRow& row : part) rows.push_back({"", std::move(row.label), row.line});
  }
  return AudioClassNames(rows, field);
}

}  // namespace trainctl::train
