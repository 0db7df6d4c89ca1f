"""Writes tests/autograd/autocast_policy.txt: what PyTorch's autocast does to each op Ember has.

CUDA's policies are read from the lists in the installed PyTorch's ATen/autocast_mode.h (no GPU is
needed). The CPU's are registered in autocast_mode.cpp, which wheels do not ship, so they are
observed instead: each op runs under torch.autocast("cpu", torch.bfloat16) on float32 inputs
(lower_precision_fp when the result is bfloat16) and on bfloat16 inputs (fp32 when the result is
float32). Run with the newest PyTorch from PyPI: .venv-torch/bin/python tools/golden/make_autocast_golden.py
"""
import os
import re
import sys

import torch
import torch.nn.functional as F

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
OUT = os.path.join(ROOT, "tests", "autograd", "autocast_policy.txt")

# PyTorch's macro list -> the policy name Ember's table uses.
MACROS = {
    "AT_FORALL_LOWER_PRECISION_FP": "lower_precision_fp",
    "AT_FORALL_FP32": "fp32",
    "AT_FORALL_FP32_SET_OPT_DTYPE": "fp32",  # no dtype given: computed and returned in float32
    "AT_FORALL_PROMOTE": "promote",
}


def cuda_policies():
    header = os.path.join(os.path.dirname(torch.__file__), "include", "ATen", "autocast_mode.h")
    text = open(header).read()
    policies = {}
    for macro, policy in MACROS.items():
        body = re.search(r"#define %s\(_\)(.*?)\n\n" % macro, text, re.S)
        if body is None:
            sys.exit("make_autocast_golden: %s not found in %s" % (macro, header))
        for name in re.findall(r"_\((\w+)", body.group(1)):
            policies[name] = policy
    # norm's overloads are registered apart (fp32_append_dtype: float32 out).
    if re.search(r"ADD_NS\(norm\).*?fp32_append_dtype", text, re.S):
        policies["norm"] = "fp32"
    # cross_entropy is a composite in PyTorch: log_softmax (fp32) then nll_loss (fp32).
    if policies.get("log_softmax") == "fp32" and policies.get("nll_loss") == "fp32":
        policies["cross_entropy"] = "fp32"
    return policies


def t(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


# Ember's ops under PyTorch's names, each a function of the floating dtype of its inputs.
PROBES = {
    "conv2d": lambda d: F.conv2d(t(1, 2, 5, 5, dtype=d), t(3, 2, 3, 3, dtype=d)),
    "linear": lambda d: F.linear(t(2, 3, dtype=d), t(4, 3, dtype=d)),
    "matmul": lambda d: torch.matmul(t(2, 3, dtype=d), t(3, 4, dtype=d)),
    "mm": lambda d: torch.mm(t(2, 3, dtype=d), t(3, 4, dtype=d)),
    "bmm": lambda d: torch.bmm(t(2, 2, 3, dtype=d), t(2, 3, 4, dtype=d)),
    "cross_entropy": lambda d: F.cross_entropy(t(2, 3, dtype=d), torch.tensor([0, 2])),
    "nll_loss": lambda d: F.nll_loss(t(2, 3, dtype=d), torch.tensor([0, 2])),
    "mse_loss": lambda d: F.mse_loss(t(3, dtype=d), t(3, dtype=d)),
    "binary_cross_entropy_with_logits": lambda d: F.binary_cross_entropy_with_logits(t(3, dtype=d), t(3, dtype=d).sigmoid()),
    "prod": lambda d: t(3, dtype=d).prod(),
    "exp": lambda d: t(3, dtype=d).exp(),
    "expm1": lambda d: t(3, dtype=d).expm1(),
    "log": lambda d: t(3, dtype=d).abs().log(),
    "log1p": lambda d: t(3, dtype=d).abs().log1p(),
    "reciprocal": lambda d: t(3, dtype=d).reciprocal(),
    "rsqrt": lambda d: t(3, dtype=d).abs().rsqrt(),
    "pow": lambda d: t(3, dtype=d).pow(2.0),
    "softmax": lambda d: F.softmax(t(2, 3, dtype=d), 1),
    "log_softmax": lambda d: F.log_softmax(t(2, 3, dtype=d), 1),
    "layer_norm": lambda d: F.layer_norm(t(2, 3, dtype=d), (3,)),
    "logsumexp": lambda d: t(3, dtype=d).logsumexp(0),
    "sum": lambda d: t(3, dtype=d).sum(),
    "norm": lambda d: t(3, dtype=d).norm(),
    "scatter_add": lambda d: t(4, dtype=d).scatter_add(0, torch.tensor([0, 1]), t(2, dtype=d)),
    "mean": lambda d: t(3, dtype=d).mean(),
    "var": lambda d: t(3, dtype=d).var(0),
    "sqrt": lambda d: t(3, dtype=d).abs().sqrt(),
    "add": lambda d: t(3, dtype=d) + t(3, dtype=d),
    "mul": lambda d: t(3, dtype=d) * t(3, dtype=d),
    "cat": lambda d: torch.cat([t(3, dtype=d), t(3, dtype=d)]),
    "stack": lambda d: torch.stack([t(3, dtype=d), t(3, dtype=d)]),
    "relu": lambda d: F.relu(t(3, dtype=d)),
    "gelu": lambda d: F.gelu(t(3, dtype=d)),
    "sigmoid": lambda d: torch.sigmoid(t(3, dtype=d)),
    "tanh": lambda d: torch.tanh(t(3, dtype=d)),
    "max_pool2d": lambda d: F.max_pool2d(t(1, 1, 4, 4, dtype=d), 2),
    "avg_pool2d": lambda d: F.avg_pool2d(t(1, 1, 4, 4, dtype=d), 2),
    "adaptive_avg_pool2d": lambda d: F.adaptive_avg_pool2d(t(1, 1, 4, 4, dtype=d), 1),
    "batch_norm": lambda d: F.batch_norm(t(2, 3, 4, dtype=d), torch.zeros(3), torch.ones(3), torch.ones(3), torch.zeros(3), True),
    "dropout": lambda d: F.dropout(t(3, dtype=d), 0.5),
    "gather": lambda d: t(4, dtype=d).gather(0, torch.tensor([0, 1])),
    "embedding": lambda d: F.embedding(torch.tensor([0, 1]), t(3, 2, dtype=d)),
}


def cpu_policy(probe):
    with torch.autocast("cpu", torch.bfloat16):
        if probe(torch.float32).dtype == torch.bfloat16:
            return "lower_precision_fp"
        if probe(torch.bfloat16).dtype == torch.float32:
            return "fp32"
    return "none"


def main():
    torch.manual_seed(0)
    cuda = cuda_policies()
    lines = [
        "# What PyTorch's autocast does to the ops Ember has: <device type> <op> <policy>.",
        "# Written by tools/golden/make_autocast_golden.py from torch %s:" % torch.__version__,
        "# cuda from its ATen/autocast_mode.h lists, cpu observed under torch.autocast('cpu', torch.bfloat16).",
    ]
    for name in PROBES:
        lines.append("cuda %s %s" % (name, cuda.get(name, "none")))
    for name, probe in PROBES.items():
        lines.append("cpu %s %s" % (name, cpu_policy(probe)))
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("make_autocast_golden: wrote %s (%d ops, torch %s)" % (OUT, len(PROBES), torch.__version__))


if __name__ == "__main__":
    main()
