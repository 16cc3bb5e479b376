#pragma once

// The audio front end of data.format audio: resampling and log-mel
// spectrograms, on the CPU with LibTorch's FFT.

#include <torch/torch.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl::train {

// Mono float `samples` [n] at `from` Hz resampled to `to` Hz: band-limited
// (windowed-sinc) interpolation whose pass band ends at 99% of the lower
// rate's Nyquist frequency, so downsampling does not alias. The result has
// ceil(n * to / from) samples; `from == to` returns `samples`.
torch::Tensor Resample(const torch::Tensor& samples, int64_t from, int64_t to);

// Resample's filters for one pair of rates, made once: making them costs
// more than applying them to a one-second clip. Const calls are
// thread-safe.
class Resampler {
 public:
  Resampler(int64_t from, int64_t to);
  torch::Tensor operator()(const torch::Tensor& samples) const;

 private:
  int64_t from_, to_;
  int64_t orig_ = 1, next_ = 1, width_ = 0;  // reduced rates; taps each side
  torch::Tensor kernels_;                     // [next, 1, 2 * width + orig]
};

// Triangular filters [n_fft / 2 + 1, n_mels], equally spaced on the HTK mel
// scale (2595 log10(1 + f / 700)) from f_min to f_max Hz, peak 1.
// INVALID_ARGUMENT naming data.audio.n_mels when a filter covers no
// frequency bin.
absl::StatusOr<torch::Tensor> MelFilterbank(const v1::AudioSpec& audio);

// Clips [B, samples] to log(mel power + 1e-6) [B, n_mels, frames]: a
// centred, reflect-padded STFT with a periodic Hann window of n_fft samples
// every hop_length.
class LogMelSpectrogram {
 public:
  static absl::StatusOr<LogMelSpectrogram> Create(const v1::AudioSpec& audio);
  torch::Tensor operator()(const torch::Tensor& clips) const;

 private:
  LogMelSpectrogram(const v1::AudioSpec& audio, torch::Tensor filters);
  int64_t n_fft_, hop_length_;
  torch::Tensor window_;   // [n_fft]
  torch::Tensor filters_;  // [n_mels, n_fft / 2 + 1]
};

}  // namespace trainctl::train
