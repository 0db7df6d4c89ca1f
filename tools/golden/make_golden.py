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


# max_pool2d geometries of max_pool_nans: (kernel, stride, padding, dilation, ceil_mode).
MAX_POOL_NAN_GEOMETRIES = [
    ((2, 2), (2, 2), (0, 0), (1, 1), False),
    ((3, 3), (1, 1), (1, 1), (1, 1), False),
    ((2, 3), (1, 2), (1, 1), (2, 1), True),
    ((3, 2), (2, 1), (1, 1), (2, 3), False),
]


def max_pool_nans():
    """max_pool2d over whole numbers in [-2, 2] (ties) with ~35% NaNs (several per window): values,
    indices, and the input gradient for an integer upstream gradient, per geometry."""
    g = torch.Generator().manual_seed(4)
    x = torch.randint(-2, 3, (2, 2, 5, 6), generator=g).to(torch.float32)
    x[torch.rand(x.shape, generator=g) < 0.35] = float("nan")
    tensors = {"input": x}
    for k, (kernel, stride, padding, dilation, ceil_mode) in enumerate(MAX_POOL_NAN_GEOMETRIES):
        leaf = x.clone().requires_grad_()
        out, indices = F.max_pool2d(leaf, kernel, stride, padding, dilation, ceil_mode, return_indices=True)
        upstream = torch.randint(1, 4, out.shape, generator=g).to(torch.float32)
        out.backward(upstream)
        tensors.update({f"output.{k}": out, f"indices.{k}": indices, f"upstream.{k}": upstream,
                        f"grad_input.{k}": leaf.grad})
    save_safetensors(os.path.join(OUT_DIR, "max_pool_nans.safetensors"), tensors,
                     {"torch": torch.__version__, "case": f"max_pool2d with NaNs and ties: {MAX_POOL_NAN_GEOMETRIES}"})


def hashed_uniform(count, key):
    """Values in [-0.5, 0.5) from integer hashing: bit-identical in Ember's test (no libm involved)."""
    i = torch.arange(count, dtype=torch.int64)
    h = (i * 2654435761 + key * 40503 + 12345) % 4294967296
    h = (h * 1103515245 + 12345) % 4294967296
    return (h.to(torch.float64) / 4294967296.0 - 0.5)


class BasicBlock(torch.nn.Module):
    """Ember's models/resnet.cc BasicBlock with an option-A shortcut (torchvision names)."""

    def __init__(self, in_planes, planes, stride):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(planes)
        self.conv2 = torch.nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(planes)
        self.stride, self.in_planes, self.planes = stride, in_planes, planes

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x
        if self.stride != 1 or self.in_planes != self.planes:
            sub = x[:, :, ::self.stride, ::self.stride]
            extra = self.planes - self.in_planes
            identity = F.pad(sub, (0, 0, 0, 0, extra // 2, extra - extra // 2))
        return F.relu(out + identity)


class ResNet20(torch.nn.Module):
    def __init__(self, in_channels=3, num_classes=10):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(16)
        in_planes, layers = 16, []
        for stage, width in enumerate([16, 32, 64]):
            blocks = []
            for b in range(3):
                blocks.append(BasicBlock(in_planes, width, 2 if stage > 0 and b == 0 else 1))
                in_planes = width
            layers.append(torch.nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3 = layers
        self.fc = torch.nn.Linear(64, num_classes)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.layer3(self.layer2(self.layer1(h)))
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))


PROJECTIONS = 8
FULL_LIMIT = 4096  # gradients up to this many elements are stored whole; larger ones as projections


RESNET_BATCH, RESNET_SIZE = 8, 16
RELU_MARGIN = 1e-5  # every ReLU input of the chosen batch is at least this far from the kink


def init_resnet20(model):
    with torch.no_grad():
        for k, (name, p) in enumerate(model.named_parameters()):
            u = hashed_uniform(p.numel(), k).view(p.shape)
            if "bn" in name or "downsample.1" in name:
                p.copy_(1.0 + 0.2 * u if name.endswith("weight") else 0.2 * u)
            else:
                fan_in = p[0].numel() if p.dim() > 1 else p.numel()
                p.copy_(u * (12.0 / fan_in) ** 0.5)  # uniform with variance 1 / fan_in


def resnet20_input(key):
    shape = (RESNET_BATCH, 3, RESNET_SIZE, RESNET_SIZE)
    return (2.0 * hashed_uniform(RESNET_BATCH * 3 * RESNET_SIZE ** 2, key)).to(torch.float32).view(shape)


def well_conditioned_input_key():
    """The first input key whose ReLU inputs (computed in float64) all lie RELU_MARGIN or more from zero.
    A ReLU input within float32 rounding of zero makes the gradient depend on summation order, so a
    correct implementation could disagree with PyTorch there; such a batch cannot be a reference."""
    model = ResNet20().double()
    init_resnet20(model)
    nearest = []
    original_relu = F.relu

    def recording_relu(x, inplace=False):
        nearest.append(x.detach().abs().min().item())
        return original_relu(x)

    F.relu = recording_relu
    try:
        for key in range(1000, 1200):
            nearest.clear()
            with torch.no_grad():
                model(resnet20_input(key).double())
            if min(nearest) >= RELU_MARGIN:
                return key
    finally:
        F.relu = original_relu
    raise RuntimeError("no input key in [1000, 1200) keeps every ReLU input away from zero")


def resnet20_forward_backward():
    """ResNet-20 (option A) forward + backward on a fixed batch, training mode. Weights and inputs come
    from hashed_uniform (recomputed by the C++ test, which reads the input key from the file), so only
    outputs and gradients are stored; large gradients are stored as PROJECTIONS dot products with hashed
    +-1 vectors, keeping the file small."""
    key = well_conditioned_input_key()
    model = ResNet20()
    init_resnet20(model)
    x = resnet20_input(key)
    labels = torch.arange(RESNET_BATCH, dtype=torch.int64) % 10
    logits = model(x)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    tensors = {"input": x, "input_key": torch.tensor([key], dtype=torch.int64), "labels": labels, "logits": logits,
               "loss": loss, "running_mean_bn1": model.bn1.running_mean, "running_var_bn1": model.bn1.running_var}
    for k, (name, p) in enumerate(model.named_parameters()):
        g = p.grad.detach().to(torch.float64).flatten()
        if g.numel() <= FULL_LIMIT:
            tensors["grad." + name] = p.grad
        else:
            signs = torch.stack([torch.sign(hashed_uniform(g.numel(), 5000 + 100 * k + j)) for j in range(PROJECTIONS)])
            tensors["proj." + name] = signs @ g
            tensors["absproj." + name] = signs.abs() @ g.abs()
    save_safetensors(os.path.join(OUT_DIR, "resnet20.safetensors"), tensors,
                     {"torch": torch.__version__, "case": f"ResNet-20 option A, batch {tuple(x.shape)}, train mode, mean CE, ReLU margin {RELU_MARGIN}"})


CASES = {"conv_bn_relu_pool": conv_bn_relu_pool, "cross_entropy_label_smoothing": cross_entropy_label_smoothing,
         "max_pool_nans": max_pool_nans,
         "resnet20": resnet20_forward_backward}

if __name__ == "__main__":
    torch.set_num_threads(1)
    os.makedirs(OUT_DIR, exist_ok=True)
    wanted = sys.argv[1:] or list(CASES)
    for name in wanted:
        CASES[name]()
