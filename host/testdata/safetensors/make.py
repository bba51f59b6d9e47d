# Remakes this folder's .safetensors files with the safetensors library
# itself (pip install torch safetensors; python3 make.py), to check that
# they are byte for byte what it writes: `git diff --exit-code .` after it.
#
# The committed files were written by hand, since neither torch nor
# safetensors is installed where hir is developed: those named after a
# test of huggingface/safetensors hold the exact bytes that test asserts
# its serializer writes (bindings/python/tests/test_pt_comparison.py and
# test_simple.py, safetensors/src/tensor.rs; the Python functions call the
# Rust serializer, save and save_file alike); all_dtypes.safetensors
# follows that serializer's code (tensor.rs, prepare and Metadata's
# Serialize): tensors by descending dtype, then by name; compact JSON,
# "__metadata__" first; padded with spaces to a multiple of 8 bytes.
# unpadded.safetensors is not remade: the library reads such a header
# (its test_deserialization does) but never writes one.

import torch
from safetensors.torch import save_file

# test_pt_comparison.py, test_serialization: torch.int32 zeros with a 1 at
# [1, 1], and torch.bfloat16 ones with 2.25 at [0, 0].
i32 = torch.zeros((2, 2), dtype=torch.int32)
i32[1, 1] = 1
save_file({"test": i32}, "pt_i32.safetensors")
bf16 = torch.ones((2, 2), dtype=torch.bfloat16)
bf16[0, 0] = 2.25
save_file({"test": bf16}, "pt_bf16.safetensors")

# test_simple.py, test_serialization_forces_alignment and
# test_serialization_metadata.
save_file(
    {
        "test2": torch.zeros((2, 2), dtype=torch.float16),
        "test1": torch.zeros((2, 2), dtype=torch.int32),
    },
    "forces_alignment.safetensors",
)
save_file(
    {"test1": torch.zeros((2, 2), dtype=torch.int32)},
    "metadata.safetensors",
    metadata={"framework": "pt"},
)

# tensor.rs, test_serialization_forced_alignement.
save_file(
    {"attn0": torch.arange(6, dtype=torch.float32).reshape(1, 1, 2, 3)},
    "rust_forced_alignment.safetensors",
)

# Every dtype hir has, with values each dtype holds exactly, a scalar and
# an empty tensor.
save_file(
    {
        "b": torch.tensor([[True, False, True], [False, False, True]]),
        "bf": torch.tensor([2.25, -1.0, 0.0078125], dtype=torch.bfloat16),
        "d": torch.tensor([0.1, -2.5, 1e300], dtype=torch.float64),
        "empty": torch.zeros((0, 3), dtype=torch.float32),
        "h": torch.tensor([[0.5, -2.0], [65504.0, 2.0**-14]], dtype=torch.float16),
        "i": torch.tensor([-8, 0, 7, 2147483647], dtype=torch.int32),
        "l": torch.tensor([-9007199254740993, 2**62], dtype=torch.int64),
        "s": torch.tensor([[1.5, -0.0], [float("inf"), 3.25]], dtype=torch.float32),
        "scalar": torch.tensor(7.0, dtype=torch.float32),
    },
    "all_dtypes.safetensors",
    metadata={"format": "pt"},
)
