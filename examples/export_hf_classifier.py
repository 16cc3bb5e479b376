#!/usr/bin/env python3
"""Export a Hugging Face sequence classifier and its tokenized data for trainctl.

What a course student does in Python before fine-tuning, made into files a
trainctl job reads (docs/job-spec.md, "Hugging Face models"):

  OUT/model.pt    the model traced with torch.jit.trace: forward(input_ids,
                  attention_mask[, token_type_ids]) -> (logits,)
  OUT/train.pt    torch.save({"x": {"input_ids": I, "attention_mask": M, ...},
  OUT/eval.pt                 "y": labels}), padded to --max-length; with
                  --format npy, one NumPy array per input and split instead
                  (OUT/train_input_ids.npy, OUT/train_labels.npy, ...)
  OUT/labels.txt  the class names in id order
  OUT/hf/         the model's config and tokenizer (save_pretrained)
  OUT/job.yaml    a job spec that fine-tunes it (edit, then trainctl submit);
                  its checkpoints go to OUT/checkpoints

And back, once the job has trained it:

  trainctl export JOB -o OUT/fine-tuned.safetensors
  export_hf_classifier.py --import-trained OUT/fine-tuned.safetensors --out OUT

loads the job's weights into the Hugging Face model of OUT/hf and saves it
with its tokenizer to OUT/fine-tuned/ (from_pretrained reads it), scoring
it on OUT's eval set first.

Two kinds of model:

  --model NAME_OR_DIR   a pre-trained checkpoint and its tokenizer, through
                        AutoTokenizer and AutoModelForSequenceClassification
                        (a name needs the Hugging Face Hub; a directory from
                        save_pretrained does not)
  --random-bert         a small BertConfig model, randomly initialised, with
                        a word-level vocabulary built from the training text
                        (offline; what the tests train)

Run it with the Python whose torch matches the workers' LibTorch (Debian's
python3 with python3-torch for 1.13, the venv of the torch wheel for 2.x):
a traced module is read by that LibTorch or a newer one only.

The model is traced in evaluation mode, so its dropout is traced out: the
job fine-tunes without dropout (torch.jit.trace records one mode).
"""

import argparse
import csv
import os
import sys

import torch

MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def read_csv(path, text_column, label_column):
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        for column in (text_column, label_column):
            if column not in (reader.fieldnames or []):
                sys.exit(f"{path}: no column {column!r} in its header "
                         f"(--text-column, --label-column)")
        rows = [(row[text_column], row[label_column]) for row in reader]
    if not rows:
        sys.exit(f"{path}: no rows after the header")
    return [t for t, _ in rows], [l for _, l in rows]


def label_ids(train_labels, eval_labels):
    """Integer labels as they are; other labels numbered in sorted order."""
    every = set(train_labels) | set(eval_labels)
    if all(l.strip().lstrip("-").isdigit() for l in every):
        names = [str(i) for i in range(max(int(l) for l in every) + 1)]
        return names, lambda l: int(l)
    names = sorted(every)
    index = {name: i for i, name in enumerate(names)}
    return names, lambda l: index[l]


def word_vocab(texts, out_dir, max_words):
    """A BERT WordPiece vocabulary of whole words: the training text's most
    frequent words after BERT's basic tokenization, lower-cased."""
    from transformers.models.bert.tokenization_bert import BasicTokenizer
    basic = BasicTokenizer(do_lower_case=True)
    counts = {}
    for text in texts:
        for word in basic.tokenize(text):
            counts[word] = counts.get(word, 0) + 1
    words = sorted(counts, key=lambda w: (-counts[w], w))[:max_words]
    path = os.path.join(out_dir, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(SPECIAL_TOKENS + words) + "\n")
    return path


def build(args, train_texts, num_labels):
    import transformers
    transformers.logging.set_verbosity_error()
    if args.model:
        tokenizer = transformers.AutoTokenizer.from_pretrained(args.model)
        model = transformers.AutoModelForSequenceClassification.from_pretrained(
            args.model, num_labels=num_labels, torchscript=True)
        return tokenizer, model
    vocab = word_vocab(train_texts, args.out, args.vocab_size)
    tokenizer = transformers.BertTokenizer(vocab, do_lower_case=True)
    config = transformers.BertConfig(
        vocab_size=len(tokenizer), hidden_size=args.hidden_size,
        num_hidden_layers=args.layers, num_attention_heads=args.heads,
        intermediate_size=4 * args.hidden_size,
        max_position_embeddings=args.max_length, num_labels=num_labels,
        torchscript=True)
    return tokenizer, transformers.BertForSequenceClassification(config)


def encode(tokenizer, texts, max_length, names):
    enc = tokenizer(texts, padding="max_length", truncation=True,
                    max_length=max_length, return_tensors="pt")
    return {name: enc[name].to(torch.int64) for name in names}


def save_split(out, split, x, y, fmt):
    """Writes one split; returns the job spec's data lines for it."""
    path = lambda name: os.path.abspath(os.path.join(out, name))
    if fmt == "tensors":
        torch.save({"x": x, "y": y}, path(f"{split}.pt"))
        return [f"  {split}_path: {path(split + '.pt')}"]
    import numpy
    for name, values in list(x.items()) + [("labels", y)]:
        numpy.save(path(f"{split}_{name}.npy"), values.numpy())
    first, *more = x
    lines = [f"  {split}_path: {path(f'{split}_{first}.npy')}",
             f"  {split}_labels: {path(f'{split}_labels.npy')}",
             f"  {split}_inputs:"]
    lines += [f"    {name}: {path(f'{split}_{name}.npy')}" for name in more]
    return lines


def accuracy(model, x, y, batch=256):
    correct = 0
    with torch.no_grad():
        for begin in range(0, len(y), batch):
            logits = model(*(t[begin:begin + batch] for t in x.values()))[0]
            correct += (logits.argmax(1) == y[begin:begin + batch]).sum().item()
    return correct / len(y)


def load_eval(out):
    """OUT's eval set, as save_split wrote it."""
    if os.path.exists(os.path.join(out, "eval.pt")):
        saved = torch.load(os.path.join(out, "eval.pt"))
        return saved["x"], saved["y"]
    import numpy
    names = [n for n in MODEL_INPUTS
             if os.path.exists(os.path.join(out, f"eval_{n}.npy"))]
    load = lambda name: torch.from_numpy(numpy.load(os.path.join(out, f"eval_{name}.npy")))
    return {n: load(n) for n in names}, load("labels")


def import_trained(args):
    import transformers
    import safetensors.torch
    transformers.logging.set_verbosity_error()
    hf = os.path.join(args.out, "hf")
    config = transformers.AutoConfig.from_pretrained(hf)
    model = transformers.AutoModelForSequenceClassification.from_config(config)
    state = safetensors.torch.load_file(args.import_trained)
    missing, _ = model.load_state_dict(state, strict=False)
    if missing:
        sys.exit(f"{args.import_trained}: lacks {len(missing)} of the model's tensors "
                 f"(the first: {missing[0]}); was it exported from this model's job?")
    model.eval()
    x, y = load_eval(args.out)
    score = accuracy(model, x, y)
    out = os.path.join(args.out, "fine-tuned")
    model.config.torchscript = False
    model.save_pretrained(out)
    transformers.AutoTokenizer.from_pretrained(hf).save_pretrained(out)
    print(f"wrote {out}: the job's weights in {type(model).__name__}")
    print(f"fine-tuned eval accuracy {score:.4f}")


def export(args):
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)
    train_texts, train_labels = read_csv(args.train_csv, args.text_column, args.label_column)
    eval_texts, eval_labels = read_csv(args.eval_csv, args.text_column, args.label_column)
    names, to_id = label_ids(train_labels, eval_labels)
    tokenizer, model = build(args, train_texts, len(names))
    model.eval()
    tokenizer.save_pretrained(os.path.join(args.out, "hf"))
    model.config.save_pretrained(os.path.join(args.out, "hf"))

    probe = tokenizer(train_texts[:1], return_tensors="pt")
    inputs = [n for n in MODEL_INPUTS if n in probe]
    data, data_lines = {}, [f"  format: {args.format}"]
    for split, texts, labels in (("train", train_texts, train_labels),
                                 ("eval", eval_texts, eval_labels)):
        x = encode(tokenizer, texts, args.max_length, inputs)
        y = torch.tensor([to_id(l) for l in labels], dtype=torch.int64)
        data_lines += save_split(args.out, split, x, y, args.format)
        data[split] = (x, y)
    data_section = "\n".join(data_lines)

    example = tuple(t[:2] for t in data["train"][0].values())
    traced = torch.jit.trace(model, example, strict=False)
    with torch.no_grad():
        if not torch.allclose(traced(*example)[0], model(*example)[0], atol=1e-5):
            sys.exit("the traced model does not reproduce the model's logits")
    model_path = os.path.join(args.out, "model.pt")
    torch.jit.save(traced, model_path)
    with open(os.path.join(args.out, "labels.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(names) + "\n")
    with open(os.path.join(args.out, "job.yaml"), "w", encoding="utf-8") as f:
        f.write(f"""name: {os.path.basename(os.path.abspath(args.out))}
ranks: {args.ranks}
task: classification
model: {{type: torchscript, path: {os.path.abspath(model_path)}}}
data:
{data_section}
optimizer: {{type: adamw, lr: {5e-5 if args.model else 1e-3}, weight_decay: 0.01}}
scheduler: {{type: linear, warmup_steps: 10}}
training: {{epochs: 3, batch_size: 32}}
checkpoint: {{dir: {os.path.abspath(os.path.join(args.out, "checkpoints"))}}}
""")
    print(f"wrote {model_path}: forward({', '.join(inputs)}) -> logits of "
          f"{len(names)} classes; {len(train_labels)} training and "
          f"{len(eval_labels)} eval samples of {args.max_length} tokens")
    print(f"eval accuracy before training {accuracy(traced, *data['eval']):.4f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    kind = p.add_mutually_exclusive_group(required=True)
    kind.add_argument("--model", help="pre-trained model name or directory")
    kind.add_argument("--random-bert", action="store_true",
                      help="a small randomly initialised BERT (offline)")
    kind.add_argument("--import-trained", metavar="SAFETENSORS",
                      help="the job's weights (trainctl export) into OUT/fine-tuned")
    p.add_argument("--train-csv")
    p.add_argument("--eval-csv")
    p.add_argument("--text-column", default="text")
    p.add_argument("--label-column", default="label")
    p.add_argument("--max-length", type=int, default=64,
                   help="tokens per sample, padded or truncated to it")
    p.add_argument("--out", required=True, help="directory for the files")
    p.add_argument("--format", choices=("tensors", "npy"), default="tensors",
                   help="data files: one torch.save dict, or NumPy arrays")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ranks", type=int, default=2, help="job.yaml's ranks")
    small = p.add_argument_group("--random-bert's size")
    small.add_argument("--vocab-size", type=int, default=8000)
    small.add_argument("--hidden-size", type=int, default=64)
    small.add_argument("--layers", type=int, default=2)
    small.add_argument("--heads", type=int, default=2)
    args = p.parse_args()
    if args.import_trained:
        import_trained(args)
    elif not (args.train_csv and args.eval_csv):
        p.error("--train-csv and --eval-csv are required to export")
    else:
        export(args)


if __name__ == "__main__":
    main()
