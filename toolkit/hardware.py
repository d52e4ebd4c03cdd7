"""What the machine offers for inference: CPU model and the vector/matrix instruction sets that decide
which path is fastest (AVX2, AVX-512, VNNI, bf16, AMX), and a CUDA device if present."""

from __future__ import annotations

import math
import os
import time
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


def cpu_kind(flags: list[str]) -> str:
    """The CPU kind a budget is held on, from its FLAGS: `amx` (Intel with AMX), `avx512` (AVX-512 without AMX,
    e.g. Zen 4), `avx2` (AVX2 only, e.g. Zen 2 and 3), else `baseline`. Record ids carry it, so each kind's
    figure is kept beside the others'. Pure."""
    if {"amx_bf16", "amx_int8"} & set(flags):
        return "amx"
    if "avx512f" in flags:
        return "avx512"
    return "avx2" if "avx2" in flags else "baseline"


def describe() -> dict:
    """The machine as a manifest records it."""
    import torch

    path = Path("/proc/cpuinfo")
    model, flags = cpu_flags(path.read_text(encoding="utf-8", errors="replace")) if path.is_file() else ("unknown", [])
    cuda = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "cpu": model,
        "cpu_flags": flags,
        "bf16": bool({"avx512_bf16", "amx_bf16"} & set(flags)) or bool(cuda),
        "cuda": cuda,
    }


def bf16_supported(device: str = "cpu") -> bool:
    """Whether `device` has bf16 units: a CUDA device that supports bf16, or a CPU with avx512_bf16/amx_bf16
    (without them autocast emulates bf16 and is slower than fp32)."""
    import torch

    return torch.cuda.is_bf16_supported() if device.startswith("cuda") else describe()["bf16"]


# Another process using at least this share of a core makes timings unrepresentative: OpenMP threads
# that wait on a busy core cost milliseconds per operator.
BUSY_CORE_SHARE = 0.2
_threads: int | None = None


def cpu_ticks(stat: str) -> tuple[int, int]:
    """(busy, total) clock ticks of all CPUs from the text of /proc/stat. Pure."""
    fields = [int(x) for x in stat.splitlines()[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def process_ticks(stat: str) -> int:
    """User + system clock ticks of a process (all its threads) from the text of /proc/PID/stat. Pure."""
    # The command name (field 2) may hold spaces and parentheses: fields are counted after its last ')'.
    rest = stat[stat.rindex(")") + 2 :].split()
    return int(rest[11]) + int(rest[12])  # utime, stime (fields 14 and 15)


def others_busy_cores(before: tuple[int, int, int], after: tuple[int, int, int], cores: int) -> float:
    """Cores kept busy by other processes between two (busy, total, own) tick readings. Pure."""
    busy = (after[0] - before[0]) - (after[2] - before[2])
    total = after[1] - before[1]
    return max(0.0, busy / total * cores) if total > 0 else 0.0


def free_cores_for(cores: int, others: float) -> int:
    """Threads to time with: the cores that other processes leave idle (at least one). Pure."""
    taken = 0 if others < BUSY_CORE_SHARE else math.ceil(others - BUSY_CORE_SHARE)
    return max(1, cores - taken)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def measure_conditions(seconds: float = 0.5) -> dict:
    """What else the machine is doing, sampled over `seconds` while this process sleeps: load average,
    cores busy with other processes, the cores left free, and a warning when timings would suffer.
    Every benchmark and `toolkit export`'s path timings record it."""
    cores = available_cores()
    stat, own = Path("/proc/stat"), Path("/proc/self/stat")
    load = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    if not (stat.is_file() and own.is_file()):
        return {"cores": cores, "load_average": load, "others_busy_cores": None, "free_cores": cores, "warning": None}

    def reading() -> tuple[int, int, int]:
        return (*cpu_ticks(stat.read_text()), process_ticks(own.read_text()))

    before = reading()
    time.sleep(seconds)
    others = others_busy_cores(before, reading(), os.cpu_count() or cores)
    free = free_cores_for(cores, others)
    warning = None
    if others >= BUSY_CORE_SHARE:
        warning = (
            f"other processes kept {others:.1f} of {cores} cores busy (load average {load[0] if load else '?'}): "
            f"timings are not this machine's idle figures (threads capped at the {free} free core(s)); run benchmarks "
            f"alone (bench/README.md)"
        )
    return {
        "cores": cores,
        "load_average": load,
        "others_busy_cores": round(others, 2),
        "free_cores": free,
        "warning": warning,
    }


def describe_conditions(conditions: dict) -> str:
    """One line for a benchmark's output."""
    line = (
        f"conditions: {conditions['cores']} cores, load average {conditions['load_average']}, others busy "
        f"{conditions['others_busy_cores']} cores"
    )
    return line + (f"\nWARNING: {conditions['warning']}" if conditions["warning"] else "")


def set_inference_threads(threads: int | None) -> None:
    """Intra-op threads for models loaded from now on (PyTorch at once, ONNX Runtime sessions created later);
    None leaves each runtime's default."""
    global _threads
    _threads = threads
    if threads:
        import torch

        torch.set_num_threads(threads)


def inference_threads() -> int | None:
    return _threads


def fit_threads(conditions: dict) -> int:
    """Time with no more threads than the free cores (nor than PyTorch already uses: OMP_NUM_THREADS);
    records the count in `conditions` and returns it."""
    import torch

    threads = min(conditions["free_cores"], torch.get_num_threads())
    set_inference_threads(threads)
    conditions["threads"] = threads
    return threads


def benchmark_header() -> dict:
    """Print the CPU (model and flags) and what else the machine is doing, for the top of a benchmark's
    output; returns both for its results file."""
    machine = describe()
    conditions = measure_conditions()
    print(
        f"CPU: {machine['cpu']}; flags: {' '.join(machine['cpu_flags']) or 'no AVX2'}; cuda: {machine['cuda']}",
        flush=True,
    )
    print(describe_conditions(conditions), flush=True)
    return {**machine, "conditions": conditions}
