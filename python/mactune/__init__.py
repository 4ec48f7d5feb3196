"""mactune from Python: dispatch tables, the decode sessions, replay and calibration.

The types are the C++ libraries' own (nanobind bindings in python/src/), so a serving engine
selects and steps exactly as the C++ API does::

    import numpy as np, mactune
    d = mactune.Dispatcher("dispatch/cpu-quick.json")     # refused -> one warning, fallback
    shape = mactune.Problem(batch=1, q_heads=8, kv_heads=2, head_dim=64, dtype="f32")
    choice = d.select(shape, 32768, 0.9)                  # FullChoice / MacChoice, typed
    s = mactune.cpu.Session(shape=shape, mac=choice.mac.mac_params() if choice.use_mac
                            else mactune.MacParams())
    rid = s.add_request()
    r = s.step(rid, q, k, v)          # numpy float32 in place: r.out, r.hit, r.stats

Arrays are float32 and C-contiguous, seen without copies (numpy through the buffer protocol,
torch CPU tensors through DLPack); anything else raises InputError naming the argument.
Every library error is a Python exception carrying the library's one-line message:
InputError (also a ValueError) for bad input, Error (a RuntimeError) for failures inside.

Pure-Python modules, imported on demand:
  mactune.record  capture a Hugging Face Llama-family model's decode into a trace (torch)
  mactune.inloop  a numpy Llama-style decoder with MAC-Attention in its forward pass
  mactune.gguf_llama  Llama-family GGUF models for it (gguf, tokenizers)
  mactune.fidelity  in-loop fidelity runs over text windows (KL, top-1, skip)
  mactune.calibrate_inloop  per-layer settings to an end-to-end KL / top-1 budget
  mactune.frontier  the measured KV skip vs KL frontier, markdown + SVG
  mactune.record_gguf  real-model decode traces from a GGUF model (numpy)
"""

from mactune._mactune import (
    GROUP_MODES,
    Choice,
    DeviceFingerprint,
    Dispatcher,
    Error,
    ForcedHits,
    FullChoice,
    InputError,
    InstanceDesc,
    LagDistribution,
    MacChoice,
    MacParams,
    Problem,
    RingEntry,
    StepResult,
    StepStats,
    Trace,
    __version__,
    build_info,
    calibrate,
    cpu,
    cpu_fingerprint,
    instances,
    load_schedule,
    replay,
    schedule_yaml,
)

try:  # present in a CUDA build only
    from mactune._mactune import cuda
except ImportError:
    cuda = None

__all__ = [
    "GROUP_MODES", "Choice", "DeviceFingerprint", "Dispatcher", "Error", "ForcedHits",
    "FullChoice", "InputError", "InstanceDesc", "LagDistribution", "MacChoice", "MacParams",
    "Problem", "RingEntry", "StepResult", "StepStats", "Trace", "__version__", "build_info",
    "calibrate", "cpu", "cpu_fingerprint", "cuda", "instances", "load_schedule", "replay",
    "schedule_yaml",
]
