#!/usr/bin/python3
"""PyTorch CPU yardstick for //tools/bench:train_step: the same step on the same models and shapes.

ResNet-20 (option-A shortcuts) and ResNet-18 (CIFAR stem, 1x1 projection shortcuts) as Ember's
models/resnet.cc builds them, batch 128 of 3x32x32, cross-entropy, SGD (lr 0.1, momentum 0.9,
weight decay 5e-4), 2 threads; median of at least 10 steps after 3 warm-up steps; best of NCHW and
channels_last memory formats. Each model runs in float32 and under `torch.autocast("cpu",
torch.bfloat16)` (forward and loss inside the autocast region, backward and step outside it, as
PyTorch's AMP recipe has it; bf16 needs no GradScaler).

    /usr/bin/python3 tools/bench/pytorch_train_step.py [steps]     # Debian's PyTorch 1.13
    .venv-torch/bin/python tools/bench/pytorch_train_step.py       # PyPI's, if installed
Last line: `bench pytorch_train_step: torch=VERSION resnet20_ips=X resnet18_ips=Y resnet20_bf16_ips=X
resnet18_bf16_ips=Y native_bf16=0|1` (native_bf16: the CPU has AVX512_BF16 or AMX-BF16, which
oneDNN's bf16 kernels need to be fast).
"""
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

THREADS, BATCH = 2, 128


class BasicBlock(nn.Module):
    def __init__(self, in_planes, planes, stride, option_a):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.option_a = option_a
        self.stride, self.in_planes, self.planes = stride, in_planes, planes
        self.downsample = None
        if not option_a and (stride != 1 or in_planes != planes):
            self.downsample = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x
        if self.downsample is not None:
            identity = self.downsample(x)
        elif self.stride != 1 or self.in_planes != self.planes:
            extra = self.planes - self.in_planes
            identity = F.pad(x[:, :, ::self.stride, ::self.stride], (0, 0, 0, 0, extra // 2, extra - extra // 2))
        return F.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, blocks, widths, option_a, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        layers, in_planes = [], widths[0]
        for stage, (count, width) in enumerate(zip(blocks, widths)):
            stage_blocks = []
            for b in range(count):
                stage_blocks.append(BasicBlock(in_planes, width, 2 if stage > 0 and b == 0 else 1, option_a))
                in_planes = width
            layers.append(nn.Sequential(*stage_blocks))
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(in_planes, num_classes)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.layers(h)
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))


MODELS = {
    "resnet20": lambda: ResNet([3, 3, 3], [16, 32, 64], option_a=True),
    "resnet18": lambda: ResNet([2, 2, 2, 2], [64, 128, 256, 512], option_a=False),
}


def images_per_second(name, channels_last, steps, bf16=False):
    torch.manual_seed(0)
    model = MODELS[name]()
    images, labels = torch.randn(BATCH, 3, 32, 32), torch.randint(0, 10, (BATCH,))
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        images = images.contiguous(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    times = []
    for step in range(steps + 3):
        start = time.perf_counter()
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        if step >= 3:
            times.append(time.perf_counter() - start)
    return BATCH / statistics.median(times), BATCH / max(times), BATCH / min(times)


def native_bf16():
    try:
        flags = open("/proc/cpuinfo").read().split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def main():
    steps = max(10, int(sys.argv[1]) if len(sys.argv) > 1 else 10)
    torch.set_num_threads(THREADS)
    print(f"PyTorch {torch.__version__} train step: batch {BATCH}, 3x32x32, fp32 and bf16 autocast, {THREADS} threads, "
          f"median of {steps} steps (spread: slowest-fastest step)"
          + "".join(f", {v}={os.environ[v]}" for v in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")
                    if v in os.environ))
    best = {}
    for name in MODELS:
        params = sum(p.numel() for p in MODELS[name]().parameters())
        for precision in ("fp32", "bf16"):
            rates = {fmt: images_per_second(name, fmt == "channels_last", steps, precision == "bf16")
                     for fmt in ("nchw", "channels_last")}
            best[name, precision] = max(r[0] for r in rates.values())
            print(f"{name:10s} {params / 1e6:6.3f}M params {precision}" + "".join(
                f"  {fmt} {r[0]:8.1f} img/s ({r[1]:.1f}-{r[2]:.1f})" for fmt, r in rates.items()))
    print(f"bench pytorch_train_step: torch={torch.__version__} resnet20_ips={best['resnet20', 'fp32']:.1f} "
          f"resnet18_ips={best['resnet18', 'fp32']:.1f} resnet20_bf16_ips={best['resnet20', 'bf16']:.1f} "
          f"resnet18_bf16_ips={best['resnet18', 'bf16']:.1f} native_bf16={int(native_bf16())}")


if __name__ == "__main__":
    main()
