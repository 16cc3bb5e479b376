"""Scores a trainctl audio_cnn in Python, on features made with torchaudio
as docs/job-spec.md ("Audio") describes trainctl's own:

    trainctl export JOB -o words.safetensors
    python examples/score_audio_cnn.py words.safetensors OUT/eval.csv \\
        --train-manifest OUT/train.csv

Prints the accuracy over the manifest's files. Pass the job's data.audio
values when they are not the defaults. --train-manifest gives the class
names' numbering when the labels are names (byte order over the training
set's labels). The model's normalisation comes from the file's metadata
(trainctl_models.eval_inputs). Files are read with Python's wave module:
PCM WAV, as examples/make_spoken_words.sh writes. Needs torch, torchaudio
of the same version, and safetensors.
"""
import argparse
import csv
import os
import re
import sys
import wave

import torch
import torchaudio

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trainctl_models  # noqa: E402


def read_rows(manifest, path_column, label_column):
    with open(manifest, newline="") as f:
        return [(os.path.join(os.path.dirname(manifest), r[path_column].strip()),
                 r[label_column].strip()) for r in csv.DictReader(f)]


def read_wav(path):
    """Mono float samples in [-1, 1] and the rate, as libsndfile reads them."""
    with wave.open(path) as w:
        width, channels = w.getsampwidth(), w.getnchannels()
        frames = w.readframes(w.getnframes())
        rate = w.getframerate()
    dtype = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[width]
    x = torch.frombuffer(bytearray(frames), dtype=dtype).float()
    x = (x - 128) / 128 if width == 1 else x / float(2 ** (8 * width - 1))
    return x.view(-1, channels).mean(1), rate


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("manifest")
    p.add_argument("--train-manifest", help="the training manifest (for class names)")
    p.add_argument("--sample-rate", type=int, default=16000)
    p.add_argument("--clip-seconds", type=float, default=1.0)
    p.add_argument("--n-fft", type=int)
    p.add_argument("--hop-length", type=int)
    p.add_argument("--n-mels", type=int, default=40)
    p.add_argument("--f-min", type=float, default=0.0)
    p.add_argument("--f-max", type=float)
    p.add_argument("--path-column", default="path")
    p.add_argument("--label-column", default="label")
    a = p.parse_args()
    rate = a.sample_rate
    samples = round(rate * a.clip_seconds)
    log_mel = torchaudio.transforms.MelSpectrogram(
        sample_rate=rate, n_fft=a.n_fft or round(rate * 0.025),
        hop_length=a.hop_length or round(rate * 0.010), f_min=a.f_min,
        f_max=a.f_max if a.f_max is not None else rate / 2, n_mels=a.n_mels,
        mel_scale="htk")

    rows = read_rows(a.manifest, a.path_column, a.label_column)
    training = read_rows(a.train_manifest, a.path_column, a.label_column) \
        if a.train_manifest else rows
    # As the ranks decide: ids when every training label is an integer in
    # [0, 2^24), names otherwise.
    by_id = all(re.fullmatch(r"[+-]?[0-9]+", label) and 0 <= int(label) < 2 ** 24
                for _, label in training)
    names = [] if by_id else sorted({label for _, label in training},
                                    key=lambda s: s.encode())
    features, labels = [], []
    for path, label in rows:
        x, file_rate = read_wav(path)
        x = torchaudio.functional.resample(x, file_rate, rate)[:samples]
        x = torch.nn.functional.pad(x, (0, samples - x.numel()))
        features.append(torch.log(log_mel(x) + 1e-6))
        labels.append(int(label) if by_id else names.index(label))

    model = trainctl_models.load(a.model)
    x = trainctl_models.eval_inputs(torch.stack(features).unsqueeze(1), model.trainctl)
    with torch.no_grad():
        predicted = model(x).argmax(1)
    correct = (predicted == torch.tensor(labels)).sum().item()
    print(f"accuracy {correct / len(rows):.4f} ({correct} of {len(rows)})")


if __name__ == "__main__":
    main()
