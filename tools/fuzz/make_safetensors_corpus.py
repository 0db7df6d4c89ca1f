#!/usr/bin/env python3
"""Writes the safetensors fuzzer's seed corpus (tools/fuzz/corpus/safetensors/): a few tiny
valid files (every dtype, scalar, empty and metadata-only), one written by PyTorch's
safetensors package (tests/golden/written_by_pytorch.safetensors, 944 bytes) and a few malformed
ones. Standard library only; rerun it to regenerate the committed files."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "safetensors")
WRITTEN_BY_PYTORCH = os.path.join(HERE, "..", "..", "tests", "golden", "written_by_pytorch.safetensors")

ELEMENT_SIZE = {"F32": 4, "F64": 8, "BF16": 2, "F16": 2, "I64": 8, "I32": 4, "U8": 1, "BOOL": 1}


def header_bytes(header):
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)  # 8-byte aligned data, as the reference writer does
    return struct.pack("<Q", len(text)) + text


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape)], filled with a simple valid byte pattern (0/1 for BOOL)."""
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        numel = 1
        for d in shape:
            numel *= d
        n = numel * ELEMENT_SIZE[dtype]
        payload = bytes(i % 2 if dtype == "BOOL" else (i * 37) % 256 for i in range(n))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + n]}
        data += payload
    return header_bytes(header) + data


def raw(header_text, data=b""):
    return struct.pack("<Q", len(header_text)) + header_text + data


SEEDS = {
    # valid
    "f32_2x3": safetensors([("w", "F32", [2, 3])]),
    "every_dtype": safetensors([("f32", "F32", [2]), ("f64", "F64", [1, 2]), ("bf16", "BF16", [3]),
                                ("f16", "F16", [2, 1]), ("i64", "I64", [2]), ("i32", "I32", [1]),
                                ("u8", "U8", [4]), ("bool", "BOOL", [2, 2])]),
    "scalar_f64": safetensors([("s", "F64", [])]),
    "empty_tensor": safetensors([("e", "F32", [0, 3]), ("x", "I32", [1])]),
    "metadata_only": safetensors([], {"format": "pt", "epoch": "3"}),
    "metadata_and_tensor": safetensors([("b", "U8", [1, 1, 2])], {"note": "x\"y\\z \u00e9"}),
    "empty_header": raw(b"{}      "),
    # malformed
    "too_short": b"\x08\x00\x00",
    "header_past_end": struct.pack("<Q", 4096) + b"{}",
    "not_json": raw(b"{\"a\":[1,2,}"),
    "offsets_gap": raw(b'{"a":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}', b"xyz"),
    "offsets_overlap": raw(b'{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
                           b'"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}', b"xyz"),
    "bad_dtype": raw(b'{"a":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}}', b"z"),
    "bool_not_0_1": raw(b'{"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}}', b"\x01\x07"),
    "negative_shape": raw(b'{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}'),
    # numel x element size wraps to 0 (2^62 x 4 = 2^64): once accepted with empty storage
    "numel_wraps": raw(b'{"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}}'),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    with open(WRITTEN_BY_PYTORCH, "rb") as f:
        SEEDS["written_by_pytorch"] = f.read()
    for name, blob in SEEDS.items():
        with open(os.path.join(OUT, name + ".safetensors"), "wb") as f:
            f.write(blob)
    print(f"wrote {len(SEEDS)} seeds to {OUT}")


if __name__ == "__main__":
    main()
