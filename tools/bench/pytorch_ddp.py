#!/usr/bin/python3
"""PyTorch DDP yardstick for //tools/bench:ddp: the same ResNet-20 training step under PyTorch's
DistributedDataParallel, gloo backend, 2 processes on 127.0.0.1 with 1 thread each, each
process pinned to its own core.

ResNet-20 is pytorch_train_step.py's (option-A shortcuts, as Ember's models/resnet.cc builds it);
batch 128 of synthetic 3x32x32 per rank, cross-entropy, SGD (lr 0.1, momentum 0.9, weight decay
5e-4), float32, default DDP buckets (first 1 MB, then 25 MB). NCHW and channels_last are measured
in alternating rounds after warm-up; the faster counts. step_ms is a rank's median step; images/s
is global: sum over ranks of 128 / that rank's median step (as //tools/bench:ddp defines them).

    /usr/bin/python3 tools/bench/pytorch_ddp.py [--ranks N] [--rounds R] [--steps S]
Last line: `bench pytorch_ddp: torch=VERSION images_per_second=X`.
"""
import argparse
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_train_step import MODELS  # noqa: E402  (the ResNet-20 definition, shared)

BATCH = 128
FORMATS = ("nchw", "channels_last")


def make_run(channels_last, rank):
    torch.manual_seed(0)
    model = MODELS["resnet20"]()
    generator = torch.Generator().manual_seed(1000 + rank)
    images = torch.randn(BATCH, 3, 32, 32, generator=generator)
    labels = torch.randint(0, 10, (BATCH,), generator=generator)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        images = images.contiguous(memory_format=torch.channels_last)
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    return ddp, optimizer, images, labels


def train_step(ddp, optimizer, images, labels):
    start = time.perf_counter()
    optimizer.zero_grad()
    F.cross_entropy(ddp(images), labels).backward()
    optimizer.step()
    return time.perf_counter() - start


def worker(rank, ranks, port, args, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    os.sched_setaffinity(0, {rank % os.cpu_count()})  # one core per rank, as mpirun --bind-to core
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    runs = {fmt: make_run(fmt == "channels_last", rank) for fmt in FORMATS}
    times = {fmt: [] for fmt in FORMATS}
    for fmt in FORMATS:
        for _ in range(args.warmup):
            train_step(*runs[fmt])
    for r in range(args.rounds):
        for k in range(len(FORMATS)):
            fmt = FORMATS[(r + k) % len(FORMATS)]
            dist.barrier()
            times[fmt].extend(train_step(*runs[fmt]) for _ in range(args.steps))
    queue.put((rank, {fmt: statistics.median(times[fmt]) for fmt in FORMATS}))
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    context = mp.get_context("spawn")
    queue = context.SimpleQueue()
    mp.spawn(worker, args=(args.ranks, free_port(), args, queue), nprocs=args.ranks)
    medians = dict(queue.get() for _ in range(args.ranks))
    print(f"PyTorch {torch.__version__} DDP (gloo): ResNet-20, {args.ranks} ranks x batch {BATCH}, 3x32x32, fp32, "
          f"1 thread per rank, SGD momentum 0.9; {args.rounds} rounds x {args.steps} steps per format, alternating")
    print(f"{'format':14s} {'step_ms per rank':20s} {'images/s':>10s}")
    rates = {}
    for fmt in FORMATS:
        per_rank = [medians[r][fmt] for r in range(args.ranks)]
        rates[fmt] = sum(BATCH / t for t in per_rank)
        cells = " ".join(f"{1e3 * t:.1f}" for t in per_rank)
        print(f"{fmt:14s} {cells:20s} {rates[fmt]:10.1f}")
    print(f"bench pytorch_ddp: torch={torch.__version__} images_per_second={max(rates.values()):.1f}")


if __name__ == "__main__":
    main()
