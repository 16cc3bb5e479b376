"""Writes torchaudio_log_mel.f32, the reference data_audio_test compares the
audio front end (worker/train/data/audio_features.h) with: torchaudio's
resampling and mel spectrogram of a signal both sides compute from the same
formula. Run it with a torch and torchaudio of the same version:

    pip install torch torchaudio   # 2.11.0 made the checked-in file
    python tests/unit/testdata/make_torchaudio_reference.py OUT.f32

The file is float32 little-endian, [40 mels, 101 frames], row-major.
"""
import math
import struct
import sys

import torch
import torchaudio


def signal(rate: int) -> torch.Tensor:
    """1 s at `rate` Hz: a chirp from 100 Hz to 7 kHz plus a 440 Hz tone and
    a 9 kHz one (past 16 kHz's Nyquist, for the resampler to remove)."""
    t = torch.arange(rate, dtype=torch.float64) / rate
    chirp = torch.sin(2 * math.pi * (100 * t + 0.5 * 6900 * t * t))
    tones = 0.3 * torch.sin(2 * math.pi * 440 * t) + 0.2 * torch.sin(2 * math.pi * 9000 * t)
    return (0.4 * chirp + tones).to(torch.float32)


def main() -> None:
    wave = torchaudio.functional.resample(signal(22050), 22050, 16000)
    mel = torchaudio.transforms.MelSpectrogram(
        sample_rate=16000, n_fft=400, hop_length=160, f_min=0.0, f_max=8000.0,
        n_mels=40, mel_scale="htk")(wave)
    log_mel = torch.log(mel + 1e-6).contiguous()
    assert log_mel.shape == (40, 101), log_mel.shape
    with open(sys.argv[1], "wb") as out:
        out.write(struct.pack(f"<{log_mel.numel()}f", *log_mel.flatten().tolist()))


if __name__ == "__main__":
    main()
