#!/usr/bin/python3
"""Writes PyTorch reference data for Ember's parity tests (tests/golden/*.safetensors).

Run with Debian's PyTorch (python3-torch 1.13, CPU):  /usr/bin/python3 tools/golden/make_golden.py
Not part of CI: the files it writes are committed (each well under 1 MB) and read by normal tests.
Every case stores its inputs, parameters, outputs and all gradients in float32, computed by PyTorch
in float32 from the same float32 inputs Ember will use.
"""
import json
import os
import struct
import sys

import torch
import torch.nn.functional as F

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden")
DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}


def save_safetensors(path, tensors, metadata=None):
    """The safetensors layout, written by hand so no extra package is needed."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        data = t.numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def conv_bn_relu_pool():
    """conv2d(stride 1, pad 1, bias) -> batch_norm(training) -> relu -> max_pool2d(3, 2, pad 1)."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 3, 9, 11, generator=g, requires_grad=True)
    w = (torch.randn(6, 3, 3, 3, generator=g) * 0.3).requires_grad_()
    b = (torch.randn(6, generator=g) * 0.1).requires_grad_()
    gamma = (1 + 0.2 * torch.randn(6, generator=g)).requires_grad_()
    beta = (0.1 * torch.randn(6, generator=g)).requires_grad_()
    running_mean = 0.1 * torch.randn(6, generator=g)
    running_var = 1 + 0.1 * torch.rand(6, generator=g)
    rm, rv = running_mean.clone(), running_var.clone()
    h = F.conv2d(x, w, b, stride=1, padding=1)
    h = F.batch_norm(h, rm, rv, gamma, beta, training=True, momentum=0.1, eps=1e-5)
    h = F.relu(h)
    out = F.max_pool2d(h, kernel_size=3, stride=2, padding=1)
    upstream = torch.randn(out.shape, generator=g)
    (out * upstream).sum().backward()
    save_safetensors(os.path.join(OUT_DIR, "conv_bn_relu_pool.safetensors"), {
        "input": x, "weight": w, "bias": b, "gamma": gamma, "beta": beta,
        "running_mean_before": running_mean, "running_var_before": running_var,
        "running_mean_after": rm, "running_var_after": rv,
        "output": out, "upstream": upstream,
        "grad_input": x.grad, "grad_weight": w.grad, "grad_bias": b.grad, "grad_gamma": gamma.grad,
        "grad_beta": beta.grad,
    }, {"torch": torch.__version__, "case": "conv2d(s1,p1)+batch_norm(train,m0.1,eps1e-5)+relu+max_pool2d(3,2,p1)"})


def cross_entropy_label_smoothing():
    """cross_entropy with label smoothing 0.1: mean, with class weights and ignore_index, per-element."""
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(9, 5, generator=g, requires_grad=True)
    target = torch.randint(0, 5, (9,), generator=g)
    target[3] = -100
    weight = 0.5 + torch.rand(5, generator=g)
    loss_mean = F.cross_entropy(logits, target, label_smoothing=0.1)
    loss_weighted = F.cross_entropy(logits, target, weight=weight, label_smoothing=0.1)
    loss_none = F.cross_entropy(logits, target, label_smoothing=0.1, reduction="none")
    grad_mean, = torch.autograd.grad(loss_mean, logits)
    grad_weighted, = torch.autograd.grad(loss_weighted, logits)
    upstream = torch.randn(9, generator=g)
    grad_none, = torch.autograd.grad((loss_none * upstream).sum(), logits)
    spatial = torch.randn(2, 4, 3, 5, generator=g, requires_grad=True)
    spatial_target = torch.randint(0, 4, (2, 3, 5), generator=g)
    loss_spatial = F.cross_entropy(spatial, spatial_target, label_smoothing=0.2)
    grad_spatial, = torch.autograd.grad(loss_spatial, spatial)
    save_safetensors(os.path.join(OUT_DIR, "cross_entropy_label_smoothing.safetensors"), {
        "logits": logits, "target": target, "weight": weight, "upstream": upstream,
        "loss_mean": loss_mean, "grad_mean": grad_mean,
        "loss_weighted": loss_weighted, "grad_weighted": grad_weighted,
        "loss_none": loss_none, "grad_none": grad_none,
        "spatial": spatial, "spatial_target": spatial_target, "loss_spatial": loss_spatial,
        "grad_spatial": grad_spatial,
    }, {"torch": torch.__version__, "case": "cross_entropy(label_smoothing=0.1, ignore_index=-100), spatial 0.2"})


CASES = {"conv_bn_relu_pool": conv_bn_relu_pool, "cross_entropy_label_smoothing": cross_entropy_label_smoothing}

if __name__ == "__main__":
    torch.set_num_threads(1)
    os.makedirs(OUT_DIR, exist_ok=True)
    wanted = sys.argv[1:] or list(CASES)
    for name in wanted:
        CASES[name]()
