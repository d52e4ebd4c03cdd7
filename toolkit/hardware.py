"""What the machine offers for inference: CPU model and the vector/matrix instruction sets that decide
which path is fastest (AVX2, AVX-512, VNNI, bf16, AMX), and a CUDA device if present."""

from __future__ import annotations

from pathlib import Path

# Flags as /proc/cpuinfo names them, in the order of the table that prints them.
FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def cpu_flags(cpuinfo: str) -> tuple[str, list[str]]:
    """(model name, the FLAGS present) from the text of /proc/cpuinfo. Pure."""
    model, flags = "unknown", set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model == "unknown":
            model = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = set(value.split())
    return model, [f for f in FLAGS if f in flags]


def describe() -> dict:
    """The machine as a manifest records it."""
    import torch

    path = Path("/proc/cpuinfo")
    model, flags = cpu_flags(path.read_text(encoding="utf-8", errors="replace")) if path.is_file() else ("unknown", [])
    cuda = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"cpu": model, "cpu_flags": flags, "bf16": bool({"avx512_bf16", "amx_bf16"} & set(flags)) or bool(cuda), "cuda": cuda}


def bf16_supported(device: str = "cpu") -> bool:
    """Whether `device` has bf16 units: a CUDA device that supports bf16, or a CPU with avx512_bf16/amx_bf16
    (without them autocast emulates bf16 and is slower than fp32)."""
    import torch

    return torch.cuda.is_bf16_supported() if device.startswith("cuda") else describe()["bf16"]
