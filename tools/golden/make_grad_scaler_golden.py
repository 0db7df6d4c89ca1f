#!/usr/bin/env python3
"""Writes tests/nn/grad_scaler_golden.json: PyTorch's GradScaler on scripted runs, for
tests/nn/grad_scaler_test.cc, which runs the same scripts with Ember's amp::GradScaler.

Run with the newest PyTorch from PyPI (the project's venv):
    /work/main/.venv-torch/bin/python tools/golden/make_grad_scaler_golden.py
Not part of CI. Each scenario trains a tiny two-layer MLP (weights and batches from closed-form
formulas, every value exact in float32, so both sides start from the same bits) with SGD under
torch.amp.GradScaler("cpu"), injects infs and NaNs into chosen gradient elements at chosen steps
(or overflows the scaled loss), and records after every update() the scale, whether the step was
skipped and the growth tracker, plus the final parameters and state_dict().
"""
import json
import math
import os

import torch

SHAPES = [[5, 4], [5], [2, 5], [2]]  # w1, b1, w2, b2
BATCH = 3


def initial_parameters():
    params = []
    for p, shape in enumerate(SHAPES):
        n = math.prod(shape)
        values = [((i * 7 + p * 3) % 13 - 6) / 8.0 for i in range(n)]
        params.append(torch.tensor(values, dtype=torch.float32).reshape(shape).requires_grad_())
    return params


def batch(step):
    x = [((step * 11 + k * 5) % 9 - 4) / 4.0 for k in range(BATCH * 4)]
    y = [((step * 3 + k) % 5 - 2) / 2.0 for k in range(BATCH * 2)]
    return torch.tensor(x).reshape(BATCH, 4), torch.tensor(y).reshape(BATCH, 2)


def loss_of(params, x, y):
    w1, b1, w2, b2 = params
    out = torch.relu(x @ w1.t() + b1) @ w2.t() + b2
    diff = out - y
    return (diff * diff).mean()


INJECTED = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}

# options: GradScaler's; inject: step -> what (a gradient element set after backward, or
# "overflow": the loss times 3e38 before scale(), so the scaled gradients overflow float32).
SCENARIOS = [
    {
        "name": "growth_interval_3",
        "options": {"growth_interval": 3},
        "sgd": {"lr": 0.05, "momentum": 0.9},
        "steps": 16,
        "inject": {
            "1": {"kind": "inf", "param": 0, "index": 3},
            "2": {"kind": "nan", "param": 3, "index": 1},  # the last element of the last grad
            "6": {"kind": "-inf", "param": 2, "index": 9},
            "11": {"kind": "overflow"},
        },
    },
    {
        "name": "defaults_unscale_and_clip",
        "options": {},
        "sgd": {"lr": 0.1},
        "steps": 8,
        "unscale_and_clip": 0.5,
        "inject": {
            "0": {"kind": "nan", "param": 1, "index": 0},
            "3": {"kind": "inf", "param": 3, "index": 1},
            "4": {"kind": "overflow"},
        },
    },
    {
        "name": "defaults_resumed_near_growth",
        "options": {},
        "sgd": {"lr": 0.1},
        "steps": 8,
        "load_state": {"scale": 1024.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000,
                       "_growth_tracker": 1996},
        "inject": {"6": {"kind": "inf", "param": 2, "index": 0}},
    },
    {
        "name": "odd_factors_and_new_scale",
        "options": {"init_scale": 3.3, "growth_factor": 1.7, "backoff_factor": 0.3, "growth_interval": 2},
        "sgd": {"lr": 0.05, "momentum": 0.5},
        "steps": 14,
        "new_scale": {"7": 40.7},
        "inject": {
            "3": {"kind": "inf", "param": 1, "index": 4},
            "4": {"kind": "nan", "param": 0, "index": 19},
            "10": {"kind": "overflow"},
        },
    },
    {
        "name": "growth_stops_at_float32_max",
        "options": {"init_scale": 1e38, "growth_interval": 1},
        "sgd": {"lr": 0.1},
        "steps": 5,
        "loss_factor": 0.0,  # zero gradients: nothing overflows but the scale
        "inject": {"3": {"kind": "inf", "param": 0, "index": 0}},
    },
]


def run(scenario):
    torch.manual_seed(0)
    params = initial_parameters()
    sgd = scenario["sgd"]
    optimizer = torch.optim.SGD(params, lr=sgd["lr"], momentum=sgd.get("momentum", 0.0))
    scaler = torch.amp.GradScaler("cpu", **scenario["options"])
    if "load_state" in scenario:
        scaler.load_state_dict(scenario["load_state"])
    records = []
    for step in range(scenario["steps"]):
        injection = scenario["inject"].get(str(step))
        optimizer.zero_grad()
        x, y = batch(step)
        loss = loss_of(params, x, y) * scenario.get("loss_factor", 1.0)
        if injection and injection["kind"] == "overflow":
            loss = loss * 3e38
        scaler.scale(loss).backward()
        if injection and injection["kind"] in INJECTED:
            with torch.no_grad():
                params[injection["param"]].grad.view(-1)[injection["index"]] = INJECTED[injection["kind"]]
        if "unscale_and_clip" in scenario:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(params, scenario["unscale_and_clip"])
        scaler.step(optimizer)
        skipped = sum(v.item() for v in scaler._found_inf_per_device(optimizer).values()) > 0
        new_scale = scenario.get("new_scale", {}).get(str(step))
        scaler.update(new_scale)
        records.append({"scale": scaler.get_scale(), "skipped": skipped, "growth_tracker": scaler._get_growth_tracker()})
    out = dict(scenario)
    out["records"] = records
    out["final_params"] = [p.detach().reshape(-1).tolist() for p in params]
    out["state_dict"] = scaler.state_dict()
    return out


def main():
    golden = {
        "torch_version": torch.__version__,
        "script": "tools/golden/make_grad_scaler_golden.py",
        "scenarios": [run(s) for s in SCENARIOS],
    }
    path = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "nn", "grad_scaler_golden.json")
    with open(path, "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print("wrote", os.path.normpath(path))


if __name__ == "__main__":
    main()
