#!/usr/bin/python3
"""Prints the PyTorch learning-rate sequences that tests/nn/lr_scheduler_test.cc checks against.

Run with Debian's PyTorch (python3-torch 1.13):  /usr/bin/python3 tools/golden/make_lr_golden.py
Not part of CI: its output is pasted into the test as C++ arrays. Each sequence lists
get_last_lr() right after construction (epoch 0) and after every scheduler.step(); OneCycleLR cases
also list the momentum (SGD) or beta1 (Adam) the schedule set in the first group.
"""
import textwrap
import warnings

import torch
from torch.optim import SGD, Adam
from torch.optim.lr_scheduler import (CosineAnnealingLR, LinearLR, MultiStepLR, OneCycleLR, SequentialLR,
                                      StepLR)

warnings.filterwarnings("ignore")


def optimizer(kind, lrs, **kwargs):
    groups = [{"params": [torch.zeros(2, requires_grad=True)], "lr": lr} for lr in lrs]
    return kind(groups, lr=lrs[0], **kwargs)


def momentum_of(opt):
    group = opt.param_groups[0]
    return group["betas"][0] if "betas" in group else group["momentum"]


def emit(name, opt, schedule, steps, with_momentum=False):
    lrs, momenta = [list(schedule.get_last_lr())], [momentum_of(opt)]
    for _ in range(steps):
        opt.step()
        schedule.step()
        lrs.append(list(schedule.get_last_lr()))
        momenta.append(momentum_of(opt))
    print(f"// {name}")
    for g in range(len(lrs[0])):
        print_array(f"k{name}Group{g}", [row[g] for row in lrs])
    if with_momentum:
        print_array(f"k{name}Momentum", momenta)
    print()


def print_array(name, values):
    body = textwrap.fill(", ".join(repr(v) for v in values), width=110, initial_indent="    ",
                         subsequent_indent="    ")
    print(f"const std::vector<double> {name} = {{\n{body}}};")


def main():
    opt = optimizer(SGD, [0.1, 0.02])
    emit("StepLR", opt, StepLR(opt, step_size=3, gamma=0.5), 11)

    opt = optimizer(SGD, [0.1])
    emit("MultiStepLR", opt, MultiStepLR(opt, milestones=[2, 5, 5, 9], gamma=0.1), 11)

    opt = optimizer(SGD, [0.1, 0.05])
    emit("CosineAnnealingLR", opt, CosineAnnealingLR(opt, T_max=10, eta_min=0.001), 24)

    opt = optimizer(SGD, [0.5], momentum=0.9)
    emit("OneCycleCosSGD", opt, OneCycleLR(opt, max_lr=1.0, total_steps=20), 20, with_momentum=True)

    opt = optimizer(Adam, [0.001, 0.001])
    schedule = OneCycleLR(opt, max_lr=[0.01, 0.02], total_steps=16, pct_start=0.25, anneal_strategy="linear",
                          div_factor=10.0, final_div_factor=100.0, three_phase=True, base_momentum=0.8,
                          max_momentum=0.9)
    emit("OneCycleLinearThreePhaseAdam", opt, schedule, 16, with_momentum=True)

    opt = optimizer(SGD, [0.5])
    warmup = LinearLR(opt, start_factor=0.1, end_factor=1.0, total_iters=4)
    cosine = CosineAnnealingLR(opt, T_max=8, eta_min=0.0)
    emit("WarmupCosine", opt, SequentialLR(opt, [warmup, cosine], milestones=[4]), 15)

    opt = optimizer(SGD, [0.2])
    warmup = LinearLR(opt, start_factor=0.25, end_factor=1.0, total_iters=3)
    multistep = MultiStepLR(opt, milestones=[3, 6], gamma=0.5)
    emit("WarmupMultiStep", opt, SequentialLR(opt, [warmup, multistep], milestones=[3]), 12)


if __name__ == "__main__":
    main()
