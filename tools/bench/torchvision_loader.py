#!/usr/bin/python3
"""torchvision yardstick for //tools/bench:image_loader: the same folder of JPEGs through
torchvision.datasets.ImageFolder and torch.utils.data.DataLoader with the same transforms
(RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(), Normalize(ImageNet mean and std)), the
same batch size and the same worker counts. num_workers=1 is one worker process, as Ember's
workers(1) is one worker thread; the main process only takes batches. Workers are persistent, so
that process start-up is paid in the warm-up epoch only; each figure is the median of --repeats
samples after it, each of --epochs-per-sample epochs.

images/CPU-s counts the CPU time of the main process and of its workers (read from /proc).
With --phase-images N, one process's CPU time per image of each stage on the first N images.

    .venv-torch/bin/python tools/bench/torchvision_loader.py --root DIR [--workers 1,2] [--batch 64]
        [--repeats 5] [--epochs-per-sample 1] [--phase-images 200]

Lines: `torchvision_loader: workers=W images_per_s=X images_per_cpu_s=Y slowest=X fastest=X` per
worker count, and last
`bench torchvision_loader: torchvision=V torch=V pillow=V libjpeg_turbo=V`.
"""
import argparse
import os
import statistics
import time

import PIL
import torch
import torchvision
from PIL import features
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
TICKS = os.sysconf("SC_CLK_TCK")


def worker_cpu_seconds(pids):
    """utime + stime of the given processes (fields 14 and 15 of /proc/PID/stat)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            # The command name (field 2) may hold spaces; the fields after its ')' are fixed.
            fields = stat.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / TICKS


def rates(dataset, workers, batch, repeats, epochs_per_sample):
    """Median images/s and images/CPU-s over `repeats` samples of whole epochs, and the spread."""
    loader = DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=workers, persistent_workers=True)
    for _ in loader:  # warm-up: the workers start, the files enter the page cache
        pass
    # Private, but the only way to the workers' CPU time; persistent workers keep their pids.
    pids = [w.pid for w in loader._iterator._workers]
    wall, cpu = [], []
    for _ in range(repeats):
        start, cpu_start = time.perf_counter(), time.process_time() + worker_cpu_seconds(pids)
        images = 0
        for _ in range(epochs_per_sample):
            for data, _ in loader:
                images += data.shape[0]
        wall.append(images / (time.perf_counter() - start))
        cpu.append(images / (time.process_time() + worker_cpu_seconds(pids) - cpu_start))
    return statistics.median(wall), statistics.median(cpu), min(wall), max(wall)


def phases(root, count):
    """CPU microseconds per image of each stage, in this process, as a worker runs them."""
    plain = datasets.ImageFolder(root)  # no transform: the stages are timed one by one
    count = min(count, len(plain))
    crop = transforms.RandomResizedCrop(224)
    flip = transforms.RandomHorizontalFlip(p=1.0)
    to_tensor, normalize = transforms.ToTensor(), transforms.Normalize(MEAN, STD)

    def timed(stage, inputs):
        start = time.process_time()
        outputs = [stage(x) for x in inputs]
        return outputs, (time.process_time() - start) * 1e6 / count

    paths = [plain.samples[i][0] for i in range(count)]
    print(f"torchvision_loader: one process's CPU time per image, by stage ({count} images):")
    images, t = timed(lambda p: datasets.folder.pil_loader(p), paths)
    print(f"  {'open + decode (pil_loader)':30s} {t:8.0f} us")
    crops, t = timed(crop, images)
    print(f"  {'RandomResizedCrop':30s} {t:8.0f} us")
    flipped, t = timed(flip, crops)
    print(f"  {'RandomHorizontalFlip (p=1)':30s} {t:8.0f} us")
    tensors, t = timed(to_tensor, flipped)
    print(f"  {'ToTensor':30s} {t:8.0f} us")
    _, t = timed(normalize, tensors)
    print(f"  {'Normalize':30s} {t:8.0f} us")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--workers", default="1")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--epochs-per-sample", type=int, default=1)
    parser.add_argument("--phase-images", type=int, default=0)
    args = parser.parse_args()

    # The main process only receives batches; one thread each, as the workers have.
    torch.set_num_threads(1)
    transform = transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(MEAN, STD),
    ])
    dataset = datasets.ImageFolder(args.root, transform)
    if args.phase_images > 0:
        phases(args.root, args.phase_images)
    for workers in [int(w) for w in args.workers.split(",")]:
        per_second, per_cpu_second, slowest, fastest = rates(dataset, workers, args.batch, args.repeats,
                                                             args.epochs_per_sample)
        print(f"torchvision_loader: workers={workers} images_per_s={per_second:.1f} "
              f"images_per_cpu_s={per_cpu_second:.1f} slowest={slowest:.1f} fastest={fastest:.1f}", flush=True)
    print(f"bench torchvision_loader: torchvision={torchvision.__version__} torch={torch.__version__} "
          f"pillow={PIL.__version__} libjpeg_turbo={features.version('libjpeg_turbo')}")


if __name__ == "__main__":
    main()
