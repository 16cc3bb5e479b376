"""Reads the event files tensorboard_sample_writer wrote with the real
`tensorboard` package (its EventAccumulator, the loader behind the
TensorBoard UI) and checks every scalar: tag, step, value (as float32) and
wall time, across both files of the run."""
import glob
import os
import sys

from tensorboard.backend.event_processing import event_accumulator

run = sys.argv[1]
files = sorted(glob.glob(os.path.join(run, "events.out.tfevents.*")))
assert len(files) == 2, f"expected two event files (two generations), found {files}"

acc = event_accumulator.EventAccumulator(run, size_guidance={"scalars": 0})
acc.Reload()
expected = {
    "loss": [(10, 0.75, 1_700_000_001.5), (20, 0.5, 1_700_000_002.5),
             (30, 0.25, 1_700_000_004.25), (40, 0.125, 1_700_000_005.0)],
    "lr": [(10, 0.001, 1_700_000_001.5), (30, 0.0005, 1_700_000_004.25)],
    "eval_accuracy": [(20, 0.8125, 1_700_000_002.5), (40, 0.875, 1_700_000_005.0)],
}
tags = sorted(acc.Tags()["scalars"])
assert tags == sorted(expected), f"scalar tags {tags}, expected {sorted(expected)}"
for tag, points in expected.items():
    got = [(e.step, e.value, e.wall_time) for e in acc.Scalars(tag)]
    assert len(got) == len(points), f"{tag}: {got}"
    for (step, value, wall), (gstep, gvalue, gwall) in zip(points, got):
        assert gstep == step, f"{tag}: step {gstep}, expected {step}"
        # TensorBoard keeps scalars as float32.
        assert abs(gvalue - value) <= 1e-7 * max(1.0, abs(value)), f"{tag}@{step}: {gvalue} != {value}"
        assert abs(gwall - wall) < 1e-6, f"{tag}@{step}: wall time {gwall} != {wall}"
print(f"tensorboard read {sum(len(p) for p in expected.values())} scalars of "
      f"{len(expected)} tags from {len(files)} files")
