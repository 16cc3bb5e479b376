"""What `trainctl export` wrote, loaded in Python as a user would, and
scored on the job's evaluation set: prints one JSON line with the accuracy,
the mean cross-entropy, the file's own trainctl.eval (safetensors) and
whether the module loaded in training mode.

usage: export_check.py safetensors|torchscript FILE EVAL_IMAGES EVAL_LABELS LIMIT
       export_check.py text FILE EVAL_TEXT SEQ_LEN LIMIT   (a gpt on bytes)
       export_check.py csv_text FILE EVAL_CSV 0 0   (a classifier: text,label)
"""
import csv
import gzip
import json
import sys

import torch
from torch.nn import functional as F

import trainctl_models


def read_idx(path, limit):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    body = torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8)
    return body.view(shape)[:limit]


def score_text(path, text_path, seq_len, limit):
    """A language model on bytes, as trainctl's text format windows them:
    sample i is tokens [i*T, i*T + T + 1), inputs the first T, targets the
    last T. Token accuracy and mean loss per token."""
    model = trainctl_models.load(path)
    with open(text_path, "rb") as f:
        data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).long()
    windows = min(limit, (data.numel() - 1) // seq_len)
    x = torch.stack([data[i * seq_len:i * seq_len + seq_len] for i in range(windows)])
    y = torch.stack([data[i * seq_len + 1:i * seq_len + seq_len + 1] for i in range(windows)])
    with torch.no_grad():
        logits = model(x)
        loss = float(F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1),
                                     reduction="sum"))
        correct = int((logits.argmax(-1) == y).sum())
    n = y.numel()
    print(json.dumps({"accuracy": correct / n, "loss": loss / n, "samples": windows,
                      "recorded": model.trainctl["trainctl.eval"],
                      "loaded_in_training_mode": False, "torch": torch.__version__}))


def score_csv_text(path, csv_path):
    """A classifier on a CSV's text column (bytes, no tokenizer), through
    trainctl_models.text_inputs: accuracy and mean loss, and how many texts
    were padded (the attention mask's work)."""
    model = trainctl_models.load(path)
    with open(csv_path, newline="", encoding="ascii") as f:
        rows = list(csv.DictReader(f))
    texts = [r["text"] for r in rows]
    labels = torch.tensor([int(r["label"]) for r in rows])
    ids, mask = trainctl_models.text_inputs(texts, model.trainctl)
    with torch.no_grad():
        logits = model(ids, mask)
    n = len(rows)
    print(json.dumps({"accuracy": int((logits.argmax(1) == labels).sum()) / n,
                      "loss": float(F.cross_entropy(logits, labels, reduction="sum")) / n,
                      "samples": n, "padded": int((mask[:, -1] == 0).sum()),
                      "text": model.trainctl["trainctl.text"],
                      "loaded_in_training_mode": False, "torch": torch.__version__}))


def main():
    kind, path, images_path, labels_path, limit = sys.argv[1:6]
    if kind == "csv_text":
        return score_csv_text(path, images_path)
    if kind == "text":
        return score_text(path, images_path, int(labels_path), int(limit))
    images = read_idx(images_path, int(limit))
    labels = read_idx(labels_path, int(limit)).long()
    # As trainctl reads IDX images: [N, 1, H, W], uint8 * (1/255) in float32.
    pixels = images.unsqueeze(1).to(torch.float32).mul_(1.0 / 255)
    if kind == "safetensors":
        model = trainctl_models.load(path)
        meta = model.trainctl
        inputs = trainctl_models.eval_inputs(pixels, meta)
        recorded = meta["trainctl.eval"]
    else:
        model = torch.jit.load(path)
        inputs, recorded = pixels, {}
    training = model.training  # as loaded: an export is ready to infer
    model.eval()
    correct, loss_sum = 0, 0.0
    with torch.no_grad():
        for start in range(0, inputs.shape[0], 250):
            logits = model(inputs[start:start + 250])
            target = labels[start:start + 250]
            correct += int((logits.argmax(1) == target).sum())
            loss_sum += float(F.cross_entropy(logits, target, reduction="sum"))
    n = inputs.shape[0]
    print(json.dumps({"accuracy": correct / n, "loss": loss_sum / n, "samples": n,
                      "recorded": recorded, "loaded_in_training_mode": training,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
