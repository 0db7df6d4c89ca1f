#!/usr/bin/env python3
"""Round trip between Ember and PyTorch's `safetensors` package (run in the venv, not in CI):

  tools/python_env && bazel build //tools/golden:safetensors_roundtrip && \
    .venv/bin/python tools/golden/check_safetensors_interop.py .bazel/bin/tools/golden/safetensors_roundtrip

1. Ember writes a file; safetensors.torch.load_file reads it and every value is checked.
2. safetensors.torch.save_file writes a file; Ember reads it and checks every value.
"""
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from make_safetensors_reference import pattern  # noqa: E402

binary = sys.argv[1]
dtypes = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16, "f16": torch.float16,
          "i64": torch.int64, "i32": torch.int32, "u8": torch.uint8, "bool": torch.bool}
with tempfile.TemporaryDirectory() as tmp:
    ember_file = f"{tmp}/from_ember.safetensors"
    subprocess.run([binary, "write", ember_file], check=True)
    loaded = load_file(ember_file)
    for name, dtype in dtypes.items():
        t = loaded[name]
        assert t.dtype == dtype, (name, t.dtype)
        assert torch.equal(t, pattern(tuple(t.shape), dtype)), name
    print(f"PyTorch read Ember's file: {len(loaded)} tensors, all values equal")

    torch_file = f"{tmp}/from_torch.safetensors"
    save_file({name: pattern((2, 5), dtype) for name, dtype in dtypes.items()}, torch_file)
    subprocess.run([binary, "read", torch_file], check=True)
print("safetensors interop: OK")
