#!/usr/bin/env python3
"""Checks that TensorBoard reads the event files of an Ember training run (not part of CI).

    tools/python_env                                   # creates .venv with tensorboard from PyPI
    .bazel/bin/tools/train --data synthetic --max-steps 20 --log-every 5 --log-dir /tmp/run
    .venv/bin/python tools/train/check_tensorboard.py /tmp/run

Loads LOG_DIR with TensorBoard's own EventAccumulator, prints every scalar tag with its number of
points, step range and last value, and compares the counts with metrics.jsonl (the same scalars,
written by the same run). Exits 1 when no scalar is read, a step has two values (a resumed run
whose restart marker did not take), or a count disagrees.
"""
import collections
import json
import os
import sys

from tensorboard.backend.event_processing import event_accumulator


def jsonl_counts(path):
    """Points per "<kind>/<name>" tag in metrics.jsonl; None values (NaN, inf) are points too."""
    counts = collections.Counter()
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if record["kind"] == "resume":  # marks where a resumed run starts; no scalars
                continue
            for name in record:
                if name not in ("kind", "step", "time"):
                    counts[record["kind"] + "/" + name] += 1
    return counts


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print(__doc__.strip().splitlines()[0] + "\nusage: check_tensorboard.py LOG_DIR", file=sys.stderr)
        return 2
    log_dir = sys.argv[1]
    files = sorted(f for f in os.listdir(log_dir) if "tfevents" in f)
    print(f"check_tensorboard: {log_dir}: {len(files)} event file(s): {', '.join(files)}")
    accumulator = event_accumulator.EventAccumulator(log_dir, size_guidance={event_accumulator.SCALARS: 0})
    accumulator.Reload()
    tags = accumulator.Tags()["scalars"]
    for tag in sorted(tags):
        events = accumulator.Scalars(tag)
        print(f"  {tag}: {len(events)} points, steps {events[0].step}..{events[-1].step}, last {events[-1].value:.6g}")
    if not tags:
        print("check_tensorboard: FAILED: TensorBoard read no scalars", file=sys.stderr)
        return 1
    # A resumed run's restart marker must have dropped what a crashed run logged past its checkpoint.
    repeated = {tag: len(steps) - len(set(steps))
                for tag in tags for steps in [[e.step for e in accumulator.Scalars(tag)]] if len(set(steps)) != len(steps)}
    if repeated:
        print(f"check_tensorboard: FAILED: steps with more than one value: {repeated}", file=sys.stderr)
        return 1
    jsonl = os.path.join(log_dir, "metrics.jsonl")
    if os.path.exists(jsonl):
        expected = jsonl_counts(jsonl)
        read = {tag: len(accumulator.Scalars(tag)) for tag in tags}
        if read != dict(expected):
            print(f"check_tensorboard: FAILED: metrics.jsonl has {dict(expected)}, TensorBoard read {read}",
                  file=sys.stderr)
            return 1
        print(f"check_tensorboard: {len(tags)} scalar tags, {sum(read.values())} points, the same as metrics.jsonl")
    else:
        print(f"check_tensorboard: {len(tags)} scalar tags (no metrics.jsonl to compare with)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
