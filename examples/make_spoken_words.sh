#!/usr/bin/env bash
# Spoken-word clips for the audio example, synthesised offline by Debian's
# espeak-ng: eight words, each said by many voices at several speeds and
# pitches, as 22.05 kHz WAV files. The eval set's voices are not among the
# training set's, so its accuracy is on speakers the model never heard.
#
#   bash examples/make_spoken_words.sh OUT_DIR
#   trainctl submit OUT_DIR/job.yaml --follow
#
# Writes OUT_DIR/wav/*.wav, the manifests OUT_DIR/train.csv and eval.csv
# (path,label: the file relative to the manifest, the word; the classes are
# the words in byte order, down = 0 ... yes = 7), and OUT_DIR/job.yaml, whose
# manifest paths are absolute: the workers read the sound files where they
# lie, so OUT_DIR must be on a disk every worker sees.
set -euo pipefail

out=${1:?usage: make_spoken_words.sh OUT_DIR}
command -v espeak-ng >/dev/null || {
  echo "make_spoken_words.sh: needs espeak-ng (apt install espeak-ng)" >&2
  exit 1
}
mkdir -p "$out/wav"
out=$(cd "$out" && pwd)

words=(yes no up down left right stop go)
# espeak-ng's voice variants (espeak-ng --voices=variant).
train_voices=(m1 m2 m3 m4 m5 m6 f1 f2 f3 f4 klatt klatt2 Andy Annie Michael steph)
eval_voices=(m7 f5 klatt3 paul)
speeds=(140 170 200)
pitches=(35 65)

# One manifest: every word by every voice, speed and pitch.
write_set() {
  local manifest=$1
  shift
  echo "path,label" > "$manifest"
  local word voice speed pitch file
  for word in "${words[@]}"; do
    for voice in "$@"; do
      for speed in "${speeds[@]}"; do
        for pitch in "${pitches[@]}"; do
          file="wav/$word-$voice-$speed-$pitch.wav"
          espeak-ng -v "en-us+$voice" -s "$speed" -p "$pitch" -w "$out/$file" "$word"
          echo "$file,$word" >> "$manifest"
        done
      done
    done
  done
}

write_set "$out/train.csv" "${train_voices[@]}"
write_set "$out/eval.csv" "${eval_voices[@]}"

cat > "$out/job.yaml" <<YAML
# Eight spoken words (espeak-ng, examples/make_spoken_words.sh) classified
# from log-mel spectrograms by the built-in audio_cnn; evaluated on voices
# the training set does not have.
name: spoken-words
ranks: 2
seed: 1
model:
  type: audio_cnn
  channels: [16, 32]
  hidden: [64]
data:
  format: audio
  train_path: $out/train.csv
  eval_path: $out/eval.csv
  audio:
    sample_rate: 16000
    clip_seconds: 1.0
    n_mels: 40
  transforms:
    normalize: {from_data: true}
optimizer:
  type: adamw
  lr: 0.003
training:
  epochs: 15
  batch_size: 32
  log_every_steps: 20
YAML
echo "make_spoken_words.sh: $(($(wc -l < "$out/train.csv") - 1)) training and" \
  "$(($(wc -l < "$out/eval.csv") - 1)) eval clips in $out; submit $out/job.yaml"
