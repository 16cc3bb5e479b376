#include "worker/train/data/audio_features.h"

#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace trainctl::train {
namespace {

namespace F = torch::nn::functional;

// Zero crossings of the sinc on each side of a tap: the filter's length
// against its transition band.
constexpr double kZeroCrossings = 6;
// The pass band ends a little below Nyquist, leaving the filter room to
// fall off before it.
constexpr double kRolloff = 0.99;
constexpr double kLogFloor = 1e-6;

double HzToMel(double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); }
torch::Tensor MelToHz(const torch::Tensor& mel) {
  return 700.0 * (torch::pow(10.0, mel / 2595.0) - 1.0);
}
}  // namespace

Resampler::Resampler(int64_t from, int64_t to) : from_(from), to_(to) {
  if (from == to) return;
  // From `from` to `to` is, reduced, `orig` input samples for every `next`
  // output samples: `next` filters (one per output phase), each applied
  // with a stride of `orig`.
  const int64_t g = std::gcd(from, to);
  orig_ = from / g;
  next_ = to / g;
  const double cutoff = static_cast<double>(std::min(orig_, next_)) * kRolloff;
  width_ = static_cast<int64_t>(std::ceil(kZeroCrossings * orig_ / cutoff));
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  // Tap positions in input periods, relative to each output phase.
  const torch::Tensor taps = torch::arange(-width_, width_ + orig_, f64) / orig_;
  const torch::Tensor phase = -torch::arange(next_, f64).unsqueeze(1) / next_;
  torch::Tensor t =
      ((taps.unsqueeze(0) + phase) * cutoff).clamp(-kZeroCrossings, kZeroCrossings);
  // A raised-cosine (Hann) window over the sinc's zero crossings.
  const torch::Tensor window = torch::cos(t * (M_PI / kZeroCrossings / 2)).pow(2);
  t = t * M_PI;
  const torch::Tensor sinc = torch::where(t == 0, torch::ones_like(t), torch::sin(t) / t);
  kernels_ = (sinc * window * (cutoff / orig_)).to(torch::kFloat32).unsqueeze(1);
}

torch::Tensor Resampler::operator()(const torch::Tensor& samples) const {
  if (from_ == to_) return samples;
  const int64_t n = samples.size(0);
  const torch::Tensor padded =
      F::pad(samples.reshape({1, 1, n}), F::PadFuncOptions({width_, width_ + orig_}));
  const torch::Tensor out = F::conv1d(padded, kernels_, F::Conv1dFuncOptions().stride(orig_));
  const int64_t length = (n * next_ + orig_ - 1) / orig_;  // ceil(n * to / from)
  return out.squeeze(0).transpose(0, 1).reshape({-1}).slice(0, 0, length).contiguous();
}

torch::Tensor Resample(const torch::Tensor& samples, int64_t from, int64_t to) {
  return Resampler(from, to)(samples);
}

absl::StatusOr<torch::Tensor> MelFilterbank(const v1::AudioSpec& audio) {
  const int64_t bins = audio.n_fft() / 2 + 1;
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const torch::Tensor freqs = torch::linspace(0, audio.sample_rate() / 2.0, bins, f64);
  const torch::Tensor edges = MelToHz(torch::linspace(
      HzToMel(audio.f_min()), HzToMel(audio.f_max()), audio.n_mels() + 2, f64));
  const torch::Tensor spacing = edges.slice(0, 1) - edges.slice(0, 0, -1);  // [n_mels + 1]
  const torch::Tensor slopes = edges.unsqueeze(0) - freqs.unsqueeze(1);   // [bins, n_mels + 2]
  const torch::Tensor rising = -slopes.slice(1, 0, -2) / spacing.slice(0, 0, -1);
  const torch::Tensor falling = slopes.slice(1, 2) / spacing.slice(0, 1);
  const torch::Tensor filters = torch::clamp_min(torch::min(rising, falling), 0);
  const torch::Tensor empty = (filters.amax(0) <= 0).nonzero();
  if (empty.numel() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.audio.n_mels: mel filter ", empty[0].item<int64_t>() + 1, " of ", audio.n_mels(),
        " covers none of the ", bins, " frequency bins of n_fft ", audio.n_fft(),
        " between f_min and f_max (use fewer mels or a larger n_fft)"));
  }
  return filters.to(torch::kFloat32);
}

absl::StatusOr<LogMelSpectrogram> LogMelSpectrogram::Create(const v1::AudioSpec& audio) {
  absl::StatusOr<torch::Tensor> filters = MelFilterbank(audio);
  if (!filters.ok()) return filters.status();
  return LogMelSpectrogram(audio, filters->t().contiguous());
}

LogMelSpectrogram::LogMelSpectrogram(const v1::AudioSpec& audio, torch::Tensor filters)
    : n_fft_(audio.n_fft()),
      hop_length_(audio.hop_length()),
      window_(torch::hann_window(audio.n_fft(), /*periodic=*/true)),
      filters_(std::move(filters)) {}

torch::Tensor LogMelSpectrogram::operator()(const torch::Tensor& clips) const {
  const torch::Tensor spectrum =
      torch::stft(clips, n_fft_, hop_length_, n_fft_, window_, /*center=*/true, "reflect",
                  /*normalized=*/false, /*onesided=*/true, /*return_complex=*/true);
  const torch::Tensor power = torch::view_as_real(spectrum).pow(2).sum(-1);  // [B, bins, T]
  return torch::log(torch::matmul(filters_, power) + kLogFloor);
}

}  // namespace trainctl::train
