#!/usr/bin/env python3
"""PyTorch eager yardstick for //tools/bench:gpu, on the same GPU, in the same run.

The bench runs this script with its own settings and reads its stdout:
  - per convolution of --convs: forward and backward (cuDNN, NCHW as Ember's conv reads it) times;
  - ResNet-50 (ImageNet stem) and ResNet-18 (CIFAR stem, 1x1 projection shortcuts) as Ember's
    models/resnet.cc builds them: a training step (forward, cross-entropy, backward, SGD with
    momentum 0.9, weight decay 5e-4) on synthetic data, images/s over --steps steps after
    --warmup, best of NCHW and channels_last;
  - with --amp 1, ResNet-50's step again in mixed precision as PyTorch's AMP recipe writes it: the
    forward and the loss under torch.autocast("cuda", float16) with a GradScaler (scale, step,
    update), and under torch.autocast("cuda", bfloat16) without one; best of both layouts;
  - TF32 for matmuls and cuDNN convolutions both set from --tf32, as Ember's one switch covers both.
cudnn.benchmark is on: the yardstick is PyTorch at its usual training setting.

    python3 tools/bench/pytorch_gpu.py --tf32 0 --batch50 128 --steps 20
Protocol (one record per line):
    conv C:O:K:S:P:H:W:G fwd_ms=X bwd_ms=Y     (G = 1 when the input gradient is computed)
    model NAME layout=nchw|channels_last ips=X
    model resnet50 amp=fp16|bf16 layout=nchw|channels_last ips=X
    bench pytorch_gpu: torch=VERSION resnet50_ips=X resnet18_ips=Y resnet50_fp16_ips=F resnet50_bf16_ips=B
or, without torch or a CUDA device, `pytorch_gpu: unavailable: REASON` and exit status 3.
"""
import argparse
import os
import statistics
import sys

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError as error:
    print(f"pytorch_gpu: unavailable: cannot import torch ({error})")
    sys.exit(3)

# ResNet-18 with the CIFAR stem, written once for the CPU yardstick.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_train_step import ResNet as CifarResNet  # noqa: E402


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 with the stride (torchvision v1.5), 1x1 expand x4, projection on change."""

    def __init__(self, in_planes, planes, stride):
        super().__init__()
        out = planes * 4
        self.conv1 = nn.Conv2d(in_planes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.downsample = None
        if stride != 1 or in_planes != out:
            self.downsample = nn.Sequential(nn.Conv2d(in_planes, out, 1, stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.relu(self.bn2(self.conv2(h)))
        h = self.bn3(self.conv3(h))
        return F.relu(h + (x if self.downsample is None else self.downsample(x)))


class ResNet50(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        stages, in_planes = [], 64
        for stage, (count, planes) in enumerate(zip([3, 4, 6, 3], [64, 128, 256, 512])):
            blocks = []
            for b in range(count):
                blocks.append(Bottleneck(in_planes, planes, 2 if stage > 0 and b == 0 else 1))
                in_planes = planes * 4
            stages.append(nn.Sequential(*blocks))
        self.layers = nn.Sequential(*stages)
        self.fc = nn.Linear(in_planes, num_classes)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        h = self.layers(h)
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))


def median_ms(fn, min_seconds, trials=5):
    """Milliseconds per call: 2 warm-up calls, then `trials` timed runs of enough calls to fill
    min_seconds in all, the median (the bench times its side the same way)."""
    fn()
    fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    one = max(start.elapsed_time(end), 1e-3)
    reps = max(1, min(1000, int(min_seconds * 1000 / one / trials)))
    samples = []
    for _ in range(trials):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / reps)
    return statistics.median(samples)


def time_convs(specs, batch, min_seconds):
    for spec in specs:
        c, o, k, s, p, h, w, input_grad = (int(v) for v in spec.split(":"))
        x = torch.randn(batch, c, h, w, device="cuda")
        weight = torch.randn(o, c, k, k, device="cuda")
        dy = torch.randn_like(F.conv2d(x, weight, None, s, p))
        mask = [bool(input_grad), True, False]
        fwd = median_ms(lambda: F.conv2d(x, weight, None, s, p), min_seconds)
        bwd = median_ms(lambda: torch.ops.aten.convolution_backward(
            dy, x, weight, None, [s, s], [p, p], [1, 1], False, [0, 0], 1, mask), min_seconds)
        print(f"conv {spec} fwd_ms={fwd:.4f} bwd_ms={bwd:.4f}", flush=True)
        del x, weight, dy


def make_grad_scaler():
    """torch.amp.GradScaler("cuda") where it exists (2.3 and later), else torch.cuda.amp's."""
    try:
        return torch.amp.GradScaler("cuda")
    except (AttributeError, TypeError):
        return torch.cuda.amp.GradScaler()


def images_per_second(make_model, batch, size, classes, channels_last, warmup, steps, amp=None):
    """amp: None (float32), "fp16" (autocast and a GradScaler) or "bf16" (autocast alone)."""
    torch.manual_seed(0)
    model = make_model().cuda()
    images = torch.randn(batch, 3, size, size, device="cuda")
    labels = torch.randint(0, classes, (batch,), device="cuda")
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        images = images.contiguous(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(amp)
    scaler = make_grad_scaler() if amp == "fp16" else None

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
            loss = F.cross_entropy(model(images), labels)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()

    for _ in range(warmup):
        step()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        step()
    end.record()
    end.synchronize()
    return batch * steps / (start.elapsed_time(end) / 1000)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tf32", type=int, default=0)
    parser.add_argument("--convs", default="", help="C:O:K:S:P:H:W:G,... (the bench passes ResNet-50's)")
    parser.add_argument("--conv-batch", type=int, default=64)
    parser.add_argument("--min-seconds", type=float, default=0.25)
    parser.add_argument("--batch50", type=int, default=128)
    parser.add_argument("--batch18", type=int, default=128)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--cifar-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--no-models", action="store_true")
    parser.add_argument("--amp", type=int, default=0, help="also ResNet-50 under fp16 and bf16 autocast")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print(f"pytorch_gpu: unavailable: torch {torch.__version__} sees no CUDA device")
        sys.exit(3)
    torch.backends.cuda.matmul.allow_tf32 = bool(args.tf32)
    torch.backends.cudnn.allow_tf32 = bool(args.tf32)
    torch.backends.cudnn.benchmark = True
    print(f"PyTorch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}) on "
          f"{torch.cuda.get_device_name()}, tf32={args.tf32}", flush=True)

    specs = [s for s in args.convs.split(",") if s]
    time_convs(specs, args.conv_batch, args.min_seconds)

    best = {"resnet50": float("nan"), "resnet18": float("nan")}
    if not args.no_models:
        models = {
            "resnet50": (ResNet50, args.batch50, args.image_size, 1000),
            "resnet18": (lambda: CifarResNet([2, 2, 2, 2], [64, 128, 256, 512], option_a=False), args.batch18,
                         args.cifar_size, 10),
        }
        for name, (make, batch, size, classes) in models.items():
            rates = []
            for layout in ("nchw", "channels_last"):
                ips = images_per_second(make, batch, size, classes, layout == "channels_last", args.warmup,
                                        args.steps)
                print(f"model {name} layout={layout} ips={ips:.1f}", flush=True)
                rates.append(ips)
                torch.cuda.empty_cache()
            best[name] = max(rates)
        if args.amp:
            for amp in ("fp16", "bf16"):
                rates = []
                for layout in ("nchw", "channels_last"):
                    ips = images_per_second(ResNet50, args.batch50, args.image_size, 1000, layout == "channels_last",
                                            args.warmup, args.steps, amp)
                    print(f"model resnet50 amp={amp} layout={layout} ips={ips:.1f}", flush=True)
                    rates.append(ips)
                    torch.cuda.empty_cache()
                best["resnet50_" + amp] = max(rates)
    print(f"bench pytorch_gpu: torch={torch.__version__} resnet50_ips={best['resnet50']:.1f} "
          f"resnet18_ips={best['resnet18']:.1f} resnet50_fp16_ips={best.get('resnet50_fp16', float('nan')):.1f} "
          f"resnet50_bf16_ips={best.get('resnet50_bf16', float('nan')):.1f}")


if __name__ == "__main__":
    main()
