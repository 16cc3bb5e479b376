"""trainctl's built-in models as PyTorch modules, to load what
`trainctl export JOB -o model.safetensors` writes.

    import trainctl_models
    model = trainctl_models.load("model.safetensors")   # eval mode, CPU
    logits = model(trainctl_models.eval_inputs(images, model.trainctl))

Each class computes what the C++ network of the same name computes
(worker/train/models/networks.cc), with the same parameter names, so the
safetensors file loads with strict=True. Sizes come from the tensors'
shapes; what shapes cannot tell (the attention heads, the task) comes from
the file's metadata, which `load` keeps as `model.trainctl`:

    trainctl.model       the job spec's model section (JSON)
    trainctl.task        classification | language_model | regression
    trainctl.transforms  the job's data.transforms (JSON), when it has any
    trainctl.eval        the evaluation at the checkpoint's step (JSON)
    trainctl.text        for text a tokenizer or a CSV text column reads
                         (JSON): tokenizer (the spec's path, and its
                         tokenizer_sha256 when shipped), seq_len, text_column
    trainctl.job_id, trainctl.job_name, trainctl.step, trainctl.epoch

Inputs are what the job trained on: IDX and WebDataset images as float32
in [0, 1] (uint8 / 255), [B, C, H, W] or [B, H, W]; token ids as int64;
for audio_cnn, log-mel spectrograms [B, 1, n_mels, frames] as
docs/job-spec.md ("Audio") says how to compute them with torchaudio.
`eval_inputs` applies the job's evaluation transforms (resize, centre crop,
normalisation) to such images. `text_inputs` turns texts into the
`input_ids` and `attention_mask` a CSV-text classifier trained on:

    ids, mask = trainctl_models.text_inputs(["some text"], model.trainctl)
    logits = model(ids, mask)

Works with torch 1.13 and 2.x; needs the `safetensors` package (pip
install safetensors), and `sentencepiece` for text under a tokenizer.
"""
import json
import math
import re

import torch
from torch import nn
from torch.nn import functional as F


class Mlp(nn.Module):
    """Linear+ReLU blocks, then a linear head; inputs are flattened."""

    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        widths = [in_features] + list(hidden)
        for i in range(len(hidden)):
            self.add_module(f"fc{i}", nn.Linear(widths[i], widths[i + 1]))
        self.hidden = len(hidden)
        self.head = nn.Linear(widths[-1], out_features)

    def forward(self, x):
        x = x.flatten(1)
        for i in range(self.hidden):
            x = torch.relu(getattr(self, f"fc{i}")(x))
        return self.head(x)


class Cnn(nn.Module):
    """Two conv(3x3, same)+ReLU+maxpool(2) blocks, dense ReLU layers, a head.
    average_over_width (audio_cnn): the blocks' output is averaged over its
    last axis, a spectrogram's time, before the dense layers."""

    def __init__(self, in_channels, channels, flat_features, hidden, out_features,
                 average_over_width=False):
        super().__init__()
        self.average_over_width = average_over_width
        self.conv1 = nn.Conv2d(in_channels, channels[0], 3, padding=1)
        self.conv2 = nn.Conv2d(channels[0], channels[1], 3, padding=1)
        widths = [flat_features] + list(hidden)
        for i in range(len(hidden)):
            self.add_module(f"fc{i}", nn.Linear(widths[i], widths[i + 1]))
        self.hidden = len(hidden)
        self.head = nn.Linear(widths[-1], out_features)

    def forward(self, x):
        if x.dim() == 3:
            x = x.unsqueeze(1)
        x = F.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = F.max_pool2d(torch.relu(self.conv2(x)), 2)
        if self.average_over_width:
            x = x.mean(3)
        x = x.flatten(1)
        for i in range(self.hidden):
            x = torch.relu(getattr(self, f"fc{i}")(x))
        return self.head(x)


def _attention(q, k, v, causal, keep=None):
    """keep: bool [B, 1, 1, T], true for the keys a query may attend to."""
    if hasattr(F, "scaled_dot_product_attention"):  # torch 2.x, as trainctl's
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, is_causal=causal)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if causal:
        t = q.size(-2)
        mask = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    if keep is not None:
        scores = scores.masked_fill(keep.logical_not(), float("-inf"))
    return torch.softmax(scores, -1) @ v


class TransformerBlock(nn.Module):
    """Pre-norm: x + attn(ln1(x)), then x + mlp(ln2(x)), GELU in the mlp."""

    def __init__(self, d_model, n_heads, d_ff, causal):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.heads = n_heads
        self.causal = causal

    def forward(self, x, keep=None):
        b, t, c = x.shape
        qkv = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, c // self.heads)
        q, k, v = (qkv.select(2, i).transpose(1, 2) for i in range(3))
        y = _attention(q, k, v, self.causal, keep).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Transformer(nn.Module):
    """Token + learned position embeddings, blocks, a final norm. The
    classifier (causal_lm False) mean-pools positions into its head (only
    the tokens', given an attention_mask: padding is neither attended to nor
    pooled); the GPT maps every position to next-token logits."""

    def __init__(self, vocab_size, d_model, n_layers, n_heads, d_ff, max_seq_len,
                 out_features, causal_lm):
        super().__init__()
        self.token = nn.Embedding(vocab_size, d_model)
        self.position = nn.Embedding(max_seq_len, d_model)
        for i in range(n_layers):
            self.add_module(f"block{i}",
                            TransformerBlock(d_model, n_heads, d_ff, causal_lm))
        self.layers = n_layers
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, out_features)
        self.causal_lm = causal_lm

    def forward(self, tokens, attention_mask=None):
        b, t = tokens.shape
        positions = torch.arange(t, device=tokens.device)
        x = self.token(tokens) + self.position(positions)
        keep = None if attention_mask is None else attention_mask.ne(0).view(b, 1, 1, t)
        for i in range(self.layers):
            x = getattr(self, f"block{i}")(x, keep)
        x = self.norm(x)
        if self.causal_lm:
            return self.head(x)
        if attention_mask is None:
            return self.head(x.mean(1))
        weights = attention_mask.to(x.dtype).unsqueeze(-1)
        return self.head((x * weights).sum(1) / weights.sum(1))


def _count(state, pattern):
    return len({m.group(1) for k in state for m in [re.match(pattern, k)] if m})


def build(model_spec, state):
    """The module for a trainctl model spec (a dict, as in the job spec),
    sized from the shapes in `state` (name -> tensor)."""
    kind = model_spec["type"]
    out_features = state["head.weight"].shape[0]
    hidden = [state[f"fc{i}.weight"].shape[0]
              for i in range(_count(state, r"^fc(\d+)\.weight$"))]
    if kind == "mlp":
        in_features = (state["fc0.weight"] if hidden else state["head.weight"]).shape[1]
        return Mlp(in_features, hidden, out_features)
    if kind in ("cnn", "audio_cnn"):
        conv1, conv2 = state["conv1.weight"], state["conv2.weight"]
        flat = (state["fc0.weight"] if hidden else state["head.weight"]).shape[1]
        return Cnn(conv1.shape[1], [conv1.shape[0], conv2.shape[0]], flat, hidden,
                   out_features, average_over_width=kind == "audio_cnn")
    if kind in ("gpt", "transformer_classifier"):
        vocab_size, d_model = state["token.weight"].shape
        return Transformer(vocab_size, d_model,
                           _count(state, r"^block(\d+)\."), int(model_spec["n_heads"]),
                           state["block0.fc1.weight"].shape[0],
                           state["position.weight"].shape[0], out_features,
                           causal_lm=kind == "gpt")
    raise ValueError(f"model.type {kind!r} is not a built-in trainctl model "
                     "(a TorchScript job exports with -o FILE.pt)")


def load(path, device="cpu"):
    """The model in a `trainctl export` safetensors file, in eval mode, with
    the file's metadata (trainctl.* keys, JSON values decoded) as
    `.trainctl`."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    with safe_open(path, framework="pt") as f:
        raw = f.metadata() or {}
    meta = {}
    for key, value in raw.items():
        try:
            meta[key] = json.loads(value)
        except ValueError:
            meta[key] = value
    state = load_file(path, device=device)
    model = build(meta["trainctl.model"], state)
    model.load_state_dict(state, strict=True)
    model.to(device).eval()
    model.trainctl = meta
    return model


def eval_inputs(images, meta):
    """Images as the job's evaluation saw them: float [B, C, H, W] in [0, 1]
    through data.transforms' resize, centre crop and normalisation (training's
    random crop and flip do not apply to evaluation)."""
    spec = meta.get("trainctl.transforms") or {}
    x = images.float()
    if not spec:
        return x
    if x.dim() == 3:
        x = x.unsqueeze(1)
    resize = spec.get("resize") or []
    if len(resize) == 2 and list(x.shape[2:]) != resize:
        shrinks = resize[0] < x.shape[2] or resize[1] < x.shape[3]
        x = F.interpolate(x, size=resize, mode="bilinear", align_corners=False,
                          antialias=shrinks)
    crop = (spec.get("random_crop") or {}).get("size") or []
    if len(crop) == 2:
        x = _centre_crop(x, crop)
    norm = spec.get("normalize") or {}
    if norm.get("mean"):
        shape = (1, -1, 1, 1) if len(norm["mean"]) > 1 else (1, 1, 1, 1)
        mean = torch.tensor(norm["mean"], dtype=torch.float32).view(shape)
        inv_std = (1.0 / torch.tensor(norm["std"], dtype=torch.float64)).float().view(shape)
        x = (x - mean) * inv_std
    return x


def text_inputs(texts, meta, tokenizer=None):
    """Texts as a CSV-text job read them: ids of the job's tokenizer (its
    SentencePiece model; `tokenizer` names the file where the recorded path
    does not reach it), else UTF-8 bytes; cut at data.seq_len or padded
    with <pad>; int64 `input_ids` and `attention_mask` [B, seq_len]. An
    empty text keeps one position, as the ranks' does."""
    text = meta.get("trainctl.text") or {}
    seq_len = int(text.get("seq_len") or 0)
    if seq_len < 1:
        raise ValueError("the file's metadata has no trainctl.text.seq_len: "
                         "it is not a model of text")
    path = tokenizer or text.get("tokenizer")
    if path:
        import sentencepiece
        processor = sentencepiece.SentencePieceProcessor(model_file=path)
        rows = [processor.encode(t) for t in texts]
        pad = processor.pad_id() if processor.pad_id() >= 0 else 0
    else:
        rows = [list(t.encode("utf-8")) for t in texts]
        pad = 0
    ids = torch.full((len(rows), seq_len), pad, dtype=torch.int64)
    mask = torch.zeros((len(rows), seq_len), dtype=torch.int64)
    for i, row in enumerate(rows):
        row = row[:seq_len]
        if row:
            ids[i, :len(row)] = torch.tensor(row, dtype=torch.int64)
        mask[i, :max(1, len(row))] = 1
    return ids, mask


def _centre_crop(x, crop):
    out = torch.zeros(x.shape[0], x.shape[1], crop[0], crop[1], dtype=x.dtype)
    h, w = x.shape[2], x.shape[3]

    def offset(size, want):
        return round((size - want) / 2) if size >= want else -((want - size) // 2)

    top, left = offset(h, crop[0]), offset(w, crop[1])
    ys, yd = max(top, 0), max(-top, 0)
    xs, xd = max(left, 0), max(-left, 0)
    rows = min(h - ys, crop[0] - yd)
    cols = min(w - xs, crop[1] - xd)
    out[:, :, yd:yd + rows, xd:xd + cols] = x[:, :, ys:ys + rows, xs:xs + cols]
    return out
