#!/usr/bin/python3
"""Writes tests/nn/layer_reference.json: PyTorch's view of every nn layer that tests/nn/layers_test.cc checks.

Run with Debian's PyTorch (python3-torch 1.13, CPU):  /usr/bin/python3 tools/golden/make_layer_reference.py
Not part of CI: the JSON it writes is committed. Per layer config: output shape, parameter/buffer names,
shapes and counts, state_dict keys and repr; per init config: the default-initialisation distribution
of each tensor (formula-derived, and asserted here against a draw from PyTorch itself).
"""
import json
import math
import os

import torch
from torch import nn

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "nn", "layer_reference.json")
DTYPES = {torch.float32: "float32", torch.int64: "int64"}


class BasicBlock(nn.Module):
    """A ResNet basic block without downsampling: names read layer1.0.conv1.weight."""

    def __init__(self, planes):
        super().__init__()
        self.conv1 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(h)) + x)


class Net(nn.Module):
    """Nested modules, a persistent buffer and a non-persistent one (absent from state_dict)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.ones(3))
        self.register_buffer("mask", torch.ones(3), persistent=False)
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.layer1 = nn.Sequential(BasicBlock(4), BasicBlock(4))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(4, 10)

    def forward(self, x):
        x = x * self.scale.view(1, 3, 1, 1) * self.mask.view(1, 3, 1, 1)
        return self.fc(self.flatten(self.pool(self.layer1(self.stem(x)))))


# id -> (constructor source, input shape or None, index input bound or None). The C++ test builds
# the same configuration under the same id.
LAYERS = [
    ("linear", "nn.Linear(20, 30)", [5, 20], None),
    ("linear_nobias", "nn.Linear(20, 30, bias=False)", [2, 3, 20], None),
    ("conv2d", "nn.Conv2d(3, 16, 3)", [2, 3, 10, 12], None),
    ("conv2d_options", "nn.Conv2d(4, 8, (3, 5), stride=2, padding=(1, 2), dilation=(2, 1), groups=2, bias=False)",
     [2, 4, 11, 13], None),
    ("batchnorm1d", "nn.BatchNorm1d(10)", [4, 10], None),
    ("batchnorm1d_3d", "nn.BatchNorm1d(6, eps=0.001, momentum=0.01)", [4, 6, 7], None),
    ("batchnorm2d", "nn.BatchNorm2d(8)", [2, 8, 5, 5], None),
    ("batchnorm2d_plain", "nn.BatchNorm2d(4, momentum=None, affine=False, track_running_stats=False)",
     [2, 4, 3, 3], None),
    ("layernorm", "nn.LayerNorm([4, 5])", [3, 4, 5], None),
    ("layernorm_plain", "nn.LayerNorm(6, elementwise_affine=False)", [2, 6], None),
    ("dropout", "nn.Dropout(0.25)", [4, 5], None),
    ("relu", "nn.ReLU()", [2, 3], None),
    ("leaky_relu", "nn.LeakyReLU(0.2)", [2, 3], None),
    ("gelu", "nn.GELU()", [2, 3], None),
    ("gelu_tanh", "nn.GELU(approximate='tanh')", [2, 3], None),
    ("silu", "nn.SiLU()", [2, 3], None),
    ("sigmoid", "nn.Sigmoid()", [2, 3], None),
    ("tanh", "nn.Tanh()", [2, 3], None),
    ("softmax", "nn.Softmax(dim=1)", [2, 3, 4], None),
    ("maxpool2d", "nn.MaxPool2d(2)", [2, 3, 9, 8], None),
    ("maxpool2d_options", "nn.MaxPool2d((3, 2), stride=(2, 1), padding=1, dilation=1, ceil_mode=True)",
     [1, 2, 8, 7], None),
    ("avgpool2d", "nn.AvgPool2d(3, stride=2, padding=1)", [2, 3, 9, 8], None),
    ("adaptive_avgpool2d", "nn.AdaptiveAvgPool2d(1)", [2, 3, 7, 5], None),
    ("adaptive_avgpool2d_rect", "nn.AdaptiveAvgPool2d((2, 3))", [2, 3, 7, 5], None),
    ("flatten", "nn.Flatten()", [2, 3, 4, 5], None),
    ("flatten_range", "nn.Flatten(0, 2)", [2, 3, 4, 5], None),
    ("identity", "nn.Identity()", [2, 3], None),
    ("embedding", "nn.Embedding(10, 4)", [2, 3], 10),
    ("embedding_padding", "nn.Embedding(10, 4, padding_idx=-1)", [5], 10),
    ("sequential", "nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2))", [3, 4], None),
    ("module_list", "nn.ModuleList([nn.Linear(3, 3), nn.BatchNorm1d(3), nn.ModuleList([nn.Tanh()])])", None, None),
    ("module_dict", "nn.ModuleDict({'conv': nn.Conv2d(2, 2, 1), 'act': nn.ReLU(), "
                    "'head': nn.Sequential(nn.Flatten(), nn.Linear(8, 2))})", None, None),
    ("cross_entropy_loss", "nn.CrossEntropyLoss(weight=torch.ones(5), label_smoothing=0.1)", None, None),
    ("bce_with_logits_loss", "nn.BCEWithLogitsLoss(pos_weight=torch.ones(3))", None, None),
    ("nested", "Net()", [2, 3, 6, 6], None),
]


def layer_entry(layer_id, source, input_shape, index_bound):
    torch.manual_seed(0)
    module = eval(source)  # noqa: S307 (our own table)
    entry = {"id": layer_id, "torch": source}
    if input_shape is not None:
        module.eval()
        x = torch.randint(0, index_bound, input_shape) if index_bound else torch.randn(input_shape)
        entry["input"] = {"shape": input_shape, "index_bound": index_bound}
        entry["output_shape"] = list(module(x).shape)
        module.train()
    entry["parameters"] = [{"name": n, "shape": list(p.shape)} for n, p in module.named_parameters()]
    entry["parameter_count"] = sum(p.numel() for p in module.parameters())
    entry["buffers"] = [{"name": n, "shape": list(b.shape), "dtype": DTYPES[b.dtype]}
                        for n, b in module.named_buffers()]
    entry["state_dict"] = list(module.state_dict().keys())
    entry["repr"] = repr(module)
    return entry


def uniform(bound):
    return {"dist": "uniform", "low": -bound, "high": bound}


# id -> (constructor, {tensor name: expected distribution}). Large enough for tight statistics; fans
# chosen so a wrong fan (fan_out, or in_channels ignoring groups) or a wrong gain is far off.
def init_cases():
    return [
        ("linear", "nn.Linear(256, 512)", {"weight": uniform(1 / math.sqrt(256)), "bias": uniform(1 / math.sqrt(256))}),
        ("conv2d", "nn.Conv2d(16, 64, (3, 5))",
         {"weight": uniform(1 / math.sqrt(16 * 15)), "bias": uniform(1 / math.sqrt(16 * 15))}),
        ("conv2d_groups", "nn.Conv2d(64, 256, 3, groups=16)",
         {"weight": uniform(1 / math.sqrt(4 * 9)), "bias": uniform(1 / math.sqrt(4 * 9))}),
        ("batchnorm2d", "nn.BatchNorm2d(64)",
         {"weight": {"dist": "constant", "value": 1.0}, "bias": {"dist": "constant", "value": 0.0},
          "running_mean": {"dist": "constant", "value": 0.0}, "running_var": {"dist": "constant", "value": 1.0},
          "num_batches_tracked": {"dist": "constant", "value": 0.0}}),
        ("layernorm", "nn.LayerNorm([8, 16])",
         {"weight": {"dist": "constant", "value": 1.0}, "bias": {"dist": "constant", "value": 0.0}}),
        ("embedding", "nn.Embedding(1000, 64)", {"weight": {"dist": "normal", "mean": 0.0, "std": 1.0}}),
        ("embedding_padding", "nn.Embedding(1000, 64, padding_idx=3)",
         {"weight": {"dist": "normal", "mean": 0.0, "std": 1.0, "zero_row": 3}}),
    ]


def check_draw(name, t, spec):
    """The formula must describe PyTorch's own draw: same statistics tests/nn/layers_test.cc applies."""
    t = t.detach().double().flatten()
    if spec.get("zero_row") is not None:
        assert torch.all(t.view(1000, -1)[spec["zero_row"]] == 0), name
        t = torch.cat([t.view(1000, -1)[:spec["zero_row"]], t.view(1000, -1)[spec["zero_row"] + 1:]]).flatten()
    n = t.numel()
    if spec["dist"] == "constant":
        assert torch.all(t == spec["value"]), name
        return
    if spec["dist"] == "uniform":
        low, high = spec["low"], spec["high"]
        assert t.min() >= low and t.max() <= high, name
        assert t.max() > high - (high - low) * 10 / n and t.min() < low + (high - low) * 10 / n, name
        mean, std = (low + high) / 2, (high - low) / math.sqrt(12)
        std_rel_err = math.sqrt(0.8 / (4 * n))  # uniform: kurtosis 1.8
    else:
        mean, std = spec["mean"], spec["std"]
        std_rel_err = math.sqrt(2.0 / (4 * n))  # normal: kurtosis 3
        kurtosis = (((t - t.mean()) / t.std()) ** 4).mean()
        assert abs(kurtosis - 3) < 5 * math.sqrt(24 / n), (name, kurtosis)
    assert abs(t.mean() - mean) < 5 * std / math.sqrt(n), (name, t.mean())
    assert abs(t.std() / std - 1) < 5 * std_rel_err, (name, t.std(), std)


def init_entry(init_id, source, specs):
    torch.manual_seed(1)
    module = eval(source)  # noqa: S307
    tensors = dict(module.named_parameters())
    tensors.update(dict(module.named_buffers()))
    assert set(tensors) == set(specs), (init_id, set(tensors))
    out = []
    for name, t in tensors.items():
        check_draw(f"{init_id}.{name}", t, specs[name])
        out.append(dict(name=name, shape=list(t.shape), **specs[name]))
    return {"id": init_id, "torch": source, "tensors": out}


def main():
    reference = {
        "generated_by": "tools/golden/make_layer_reference.py",
        "torch_version": torch.__version__,
        "layers": [layer_entry(*case) for case in LAYERS],
        "init": [init_entry(*case) for case in init_cases()],
    }
    with open(OUT, "w") as f:
        json.dump(reference, f, indent=1)
        f.write("\n")
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()
