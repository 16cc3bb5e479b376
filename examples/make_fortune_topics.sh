#!/usr/bin/env bash
# Text classification on real text: fortunes from Debian's `fortunes`
# package, each labelled by the file it comes from (computers, literature,
# politics, science), classified by the built-in transformer_classifier on
# SentencePiece subwords. Every sixth fortune of each topic is held out for
# evaluation; the majority class (computers) is 40% of it.
#
#   bash examples/make_fortune_topics.sh OUT_DIR
#   trainctl submit OUT_DIR/job.yaml --follow
#
# Writes OUT_DIR/train.csv and eval.csv (columns text,topic; a fortune is
# several lines, so its cell is quoted across them, as RFC 4180 allows),
# OUT_DIR/job.yaml, and OUT_DIR/topics.model, a SentencePiece model of 2000
# pieces trained on the training texts by `trainctl tokenizer train --spec`
# (trainctl from $TRAINCTL, else PATH). The job's paths are relative, so
# `trainctl submit` uploads the files with it.
set -euo pipefail

out=${1:?usage: make_fortune_topics.sh OUT_DIR}
fortunes=/usr/share/games/fortunes
trainctl=${TRAINCTL:-trainctl}
[ -r "$fortunes/computers" ] || {
  echo "make_fortune_topics.sh: needs Debian's fortunes package (apt install fortunes)" >&2
  exit 1
}
mkdir -p "$out"

python3 - "$fortunes" "$out" <<'PY'
import csv, os, sys
fortunes, out = sys.argv[1], sys.argv[2]
sets = {"train": [], "eval": []}
for topic in ["computers", "literature", "politics", "science"]:
    with open(os.path.join(fortunes, topic), encoding="utf-8", errors="replace") as f:
        texts = [t.strip("\n") for t in f.read().split("\n%\n") if t.strip()]
    for i, text in enumerate(texts):
        sets["eval" if i % 6 == 5 else "train"].append((text, topic))
for name, rows in sets.items():
    with open(os.path.join(out, name + ".csv"), "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "topic"])
        writer.writerows(rows)
PY

cat > "$out/job.yaml" <<'YAML'
# Fortunes classified by topic (examples/make_fortune_topics.sh): the
# classes are the topic names in byte order, computers = 0, literature = 1,
# politics = 2, science = 3.
name: fortune-topics
ranks: 2
seed: 1
model: {type: transformer_classifier, d_model: 64, n_layers: 2, n_heads: 4, max_seq_len: 128}
data:
  format: csv
  header: true
  train_path: train.csv
  eval_path: eval.csv
  text_column: text
  label_column: topic
  tokenizer: topics.model
  seq_len: 128
optimizer: {type: adamw, lr: 0.002, weight_decay: 0.01}
scheduler: {type: cosine, warmup_steps: 20}
training: {epochs: 8, batch_size: 32, log_every_steps: 20, eval_every_steps: 100}
YAML

"$trainctl" tokenizer train --spec "$out/job.yaml" --vocab-size 2000 -o "$out/topics.model"
