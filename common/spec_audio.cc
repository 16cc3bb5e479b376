#include "common/spec_audio.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace trainctl {
namespace {

// A spectrogram is held per sample in memory: 4 MiB of floats is far past
// any clip a classifier reads (1 s at 16 kHz with 40 mels is 16 KiB).
constexpr int64_t kMaxFeatureValues = int64_t{1} << 20;

}  // namespace

int64_t AudioClipSamples(const v1::AudioSpec& audio) {
  return std::llround(audio.sample_rate() * audio.clip_seconds());
}

int64_t AudioFrames(const v1::AudioSpec& audio) {
  return audio.hop_length() <= 0 ? 0 : 1 + AudioClipSamples(audio) / audio.hop_length();
}

void ReadAudioSpec(SpecReader& data, v1::DataSpec* d, std::vector<std::string>* errors) {
  if (d->format() != "audio") {
    if (data.Has("audio")) {
      data.Error(data.Path("audio"),
                 absl::StrCat("is for data.format audio (data.format is ", d->format(), ")"));
    }
    return;
  }
  SpecReader s(data.Child("audio"), data.Path("audio"), errors);
  v1::AudioSpec* a = d->mutable_audio();
  a->set_sample_rate(static_cast<int32_t>(s.Int("sample_rate", 16000, 1000, 384000)));
  const double rate = a->sample_rate();
  a->set_clip_seconds(s.Double("clip_seconds", 1.0, 0.001, 600));
  // 25 ms windows every 10 ms: the usual speech front end at any rate.
  a->set_n_fft(static_cast<int32_t>(s.Int("n_fft", std::lround(rate * 0.025), 8, 1 << 16)));
  a->set_hop_length(
      static_cast<int32_t>(s.Int("hop_length", std::lround(rate * 0.010), 1, 1 << 16)));
  a->set_n_mels(static_cast<int32_t>(s.Int("n_mels", 40, 1, 512)));
  const double nyquist = rate / 2;
  a->set_f_min(s.Double("f_min", 0.0, 0.0, nyquist));
  a->set_f_max(s.Double("f_max", nyquist, 0.0, nyquist));
  a->set_path_column(s.String("path_column", "path"));
  a->set_label_column(s.String("label_column", "label"));
  s.RejectUnknown();

  if (a->f_min() >= a->f_max()) {
    s.Error(s.Path("f_max"), absl::StrCat(a->f_max(), " Hz is not above f_min ",
                                          a->f_min(), " Hz"));
  }
  const int64_t samples = AudioClipSamples(*a);
  if (samples <= a->n_fft() / 2) {
    // The centred STFT pads n_fft / 2 samples by reflection on each side.
    s.Error(s.Path("clip_seconds"),
            absl::StrCat("a clip of ", samples, " samples is too short for n_fft ",
                         a->n_fft(), " (it needs more than n_fft / 2 samples)"));
  }
  const int64_t bins = a->n_fft() / 2 + 1;
  if (a->n_mels() > bins) {
    s.Error(s.Path("n_mels"), absl::StrCat(a->n_mels(), " mel filters over the ", bins,
                                           " frequency bins of n_fft ", a->n_fft(),
                                           " leave some empty (at most ", bins, ")"));
  }
  if (a->n_mels() * AudioFrames(*a) > kMaxFeatureValues) {
    s.Error(s.Path("clip_seconds"),
            absl::StrCat("spectrograms of ", a->n_mels(), " x ", AudioFrames(*a),
                         " values exceed ", kMaxFeatureValues,
                         " per sample (shorten the clip or raise hop_length)"));
  }
  if (a->path_column().empty() || a->label_column().empty()) {
    s.Error(s.Path(a->path_column().empty() ? "path_column" : "label_column"),
            "must name a manifest column");
  } else if (a->path_column() == a->label_column()) {
    s.Error(s.Path("label_column"), "must differ from path_column");
  }
}

}  // namespace trainctl
