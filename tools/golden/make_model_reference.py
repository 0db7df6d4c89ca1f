#!/usr/bin/python3
"""Prints PyTorch's parameter counts for the models of models/zoo.h, and writes the state_dict names
and shapes of ResNet-18 (CIFAR stem) and ResNet-20 to tests/models/*_state_dict.txt.

Run with Debian's PyTorch (python3-torch 1.13, CPU):  /usr/bin/python3 tools/golden/make_model_reference.py
Not part of CI: tests/models/models_test.cc keeps the printed counts and reads the written files.
torchvision is not packaged here, so its ResNet is restated below (same module names and shapes:
its resnet18/34/50 give the published 11,689,512 / 21,797,672 / 25,557,032 parameters); the CIFAR
stem swaps the 7x7/2 conv and max-pool for one 3x3/1 conv, as Ember's models/resnet.cc does.
"""
import os

import torch
import torch.nn.functional as F
from torch import nn

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "models")


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride, shortcut):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        if (stride != 1 or in_planes != planes) and shortcut == "B":
            self.downsample = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_planes, planes, stride, shortcut):
        super().__init__()
        out = planes * 4
        self.conv1 = nn.Conv2d(in_planes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        if stride != 1 or in_planes != out:
            self.downsample = nn.Sequential(nn.Conv2d(in_planes, out, 1, stride, bias=False), nn.BatchNorm2d(out))


class ResNet(nn.Module):
    """Parameters only (no forward): the counts and names are what is compared."""

    def __init__(self, block, blocks, widths, stem_width, stem, shortcut, in_channels, num_classes):
        super().__init__()
        if stem == "imagenet":
            self.conv1 = nn.Conv2d(in_channels, stem_width, 7, 2, 3, bias=False)
        else:
            self.conv1 = nn.Conv2d(in_channels, stem_width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(stem_width)
        in_planes = stem_width
        for stage, (n, width) in enumerate(zip(blocks, widths)):
            layer = []
            for b in range(n):
                layer.append(block(in_planes, width, 2 if stage > 0 and b == 0 else 1, shortcut))
                in_planes = width * block.expansion
            setattr(self, f"layer{stage + 1}", nn.Sequential(*layer))
        self.fc = nn.Linear(in_planes, num_classes)


def cifar_resnet(depth, shortcut, c, k):
    n = (depth - 2) // 6
    return ResNet(BasicBlock, [n] * 3, [16, 32, 64], 16, "cifar", shortcut, c, k)


def wide_resnet(block, blocks, stem, c, k):
    return ResNet(block, blocks, [64, 128, 256, 512], 64, stem, "B", c, k)


def conv_bn(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout))


def resnet9(c, k):
    """Page's DAWNBench ResNet-9 (the Myrtle net), as models/small.h builds it."""
    return nn.Sequential(conv_bn(c, 64), conv_bn(64, 128), conv_bn(128, 128), conv_bn(128, 128), conv_bn(128, 256),
                         conv_bn(256, 512), conv_bn(512, 512), conv_bn(512, 512), nn.Linear(512, k, bias=False))


def mlp(c, h, w, k):
    return nn.Sequential(nn.Flatten(), nn.Linear(c * h * w, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                         nn.Linear(256, k))


def lenet(c, h, w, k):
    side_h, side_w = ((h - 4) // 2 - 4) // 2, ((w - 4) // 2 - 4) // 2
    return nn.Sequential(nn.Conv2d(c, 6, 5), nn.Conv2d(6, 16, 5), nn.Linear(16 * side_h * side_w, 120),
                         nn.Linear(120, 84), nn.Linear(84, k))


# zoo name -> PyTorch model of (in_channels, height, width, classes)
ZOO = {}
for depth in (20, 32, 44, 56, 110):
    for suffix, shortcut in (("", "A"), ("-b", "B")):
        ZOO[f"resnet{depth}{suffix}"] = lambda c, h, w, k, d=depth, s=shortcut: cifar_resnet(d, s, c, k)
ZOO["resnet18"] = lambda c, h, w, k: wide_resnet(BasicBlock, [2, 2, 2, 2], "cifar", c, k)
ZOO["resnet34"] = lambda c, h, w, k: wide_resnet(BasicBlock, [3, 4, 6, 3], "cifar", c, k)
ZOO["resnet18-imagenet"] = lambda c, h, w, k: wide_resnet(BasicBlock, [2, 2, 2, 2], "imagenet", c, k)
ZOO["resnet34-imagenet"] = lambda c, h, w, k: wide_resnet(BasicBlock, [3, 4, 6, 3], "imagenet", c, k)
ZOO["resnet50"] = lambda c, h, w, k: wide_resnet(Bottleneck, [3, 4, 6, 3], "imagenet", c, k)
ZOO["resnet9"] = lambda c, h, w, k: resnet9(c, k)
ZOO["mlp"] = mlp
ZOO["lenet"] = lenet
IMAGENET_STEM = ("resnet18-imagenet", "resnet34-imagenet", "resnet50")

# The configurations tests/models/models_test.cc builds: every model for CIFAR (3x32x32; 1000
# classes for the ImageNet-stem ones, as published) and Fashion-MNIST (1x28x28), plus the
# size-dependent MLP and LeNet at an odd 3x20x24.
CASES = [(name, 3, 32, 32, 1000 if name in IMAGENET_STEM else 10) for name in ZOO]
CASES += [(name, 1, 28, 28, 10) for name in ZOO]
CASES += [("mlp", 3, 20, 24, 10), ("lenet", 3, 20, 24, 10)]


def write_state_dict(model, name):
    path = os.path.join(OUT_DIR, name + "_state_dict.txt")
    with open(path, "w") as f:
        f.write(f"# {name}: PyTorch state_dict names and shapes, written by tools/golden/make_model_reference.py\n")
        for key, t in model.state_dict().items():
            f.write(f"{key} {list(t.shape)}\n")
    print(f"wrote {os.path.relpath(path)} ({len(model.state_dict())} entries)")


if __name__ == "__main__":
    print(f"torch {torch.__version__}: parameters of each (model, in_channels, height, width, classes)")
    for name, c, h, w, k in CASES:
        count = sum(p.numel() for p in ZOO[name](c, h, w, k).parameters())
        print(f'    {{"{name}", {c}, {h}, {w}, {k}, {count}}},')
    os.makedirs(OUT_DIR, exist_ok=True)
    write_state_dict(ZOO["resnet18"](3, 32, 32, 10), "resnet18")
    write_state_dict(ZOO["resnet20"](3, 32, 32, 10), "resnet20")
