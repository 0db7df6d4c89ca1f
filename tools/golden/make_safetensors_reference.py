#!/usr/bin/env python3
"""Writes tests/golden/written_by_pytorch.safetensors with PyTorch's own `safetensors` package.

Run in the project's venv:  tools/python_env && .venv/bin/python tools/golden/make_safetensors_reference.py
The C++ test tests/golden/safetensors_interop_test.cc reads the committed file and checks every value:
element i of each tensor is (i * 7 % 23) - 11, converted to the tensor's dtype (booleans: i % 3 == 0).
"""
import os

import torch
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden",
                   "written_by_pytorch.safetensors")


def pattern(shape, dtype):
    n = 1
    for s in shape:
        n *= s
    i = torch.arange(n, dtype=torch.int64)
    if dtype == torch.bool:
        return (i % 3 == 0).reshape(shape)
    values = (i * 7 % 23 - 11).to(torch.float64)
    if dtype == torch.uint8:
        values = values + 11
    return values.to(dtype).reshape(shape)


def main():
    tensors = {
        "f32": pattern((3, 4), torch.float32),
        "f64": pattern((2, 3, 2), torch.float64),
        "bf16": pattern((5,), torch.bfloat16),
        "f16": pattern((2, 2), torch.float16),
        "i64": pattern((7,), torch.int64),
        "i32": pattern((1, 6), torch.int32),
        "u8": pattern((4,), torch.uint8),
        "bool": pattern((3, 2), torch.bool),
        "scalar": pattern((), torch.float32),
        "empty": pattern((0, 3), torch.float32),
    }
    save_file(tensors, OUT, metadata={"written_by": "safetensors.torch", "torch": torch.__version__})
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()
