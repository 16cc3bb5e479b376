#!/usr/bin/env python3
"""Export a PyTorch model for trainctl's `model: {type: torchscript}`.

trainctl trains the saved module in place from C++. The forward contract:
`forward(x)` takes one input tensor (a batch, first dimension B) and returns
  * classification:  logits [B, num_classes] (task: classification)
  * language_model:  logits [B, T, vocab] for int64 token ids [B, T]
  * regression:      predictions [B] or [B, k] (task: regression)
Every parameter with requires_grad=True is trained.

Usage (Debian: apt install python3-torch):
  /usr/bin/python3 examples/export_torchscript.py model.pt
then in the job spec:
  model: {type: torchscript, path: /shared/models/model.pt}
"""
import sys

import torch
from torch import nn


class SmallConvNet(nn.Module):
    """A Fashion-MNIST classifier: inputs [B, 1, 28, 28], logits [B, 10]."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(32 * 7 * 7, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "model.pt"
    torch.manual_seed(0)
    scripted = torch.jit.script(SmallConvNet())
    scripted.save(path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
