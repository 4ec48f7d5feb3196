"""Record a Hugging Face transformers model's decode into a mactune trace.

For every attention layer of a Llama-family model (Llama 2/3, Mistral, Qwen2, Qwen3 and others
with the same attention block) the recorder captures, per position and head:

  q_pre   the query before RoPE — what MAC matches on (the output of q_proj, or of q_norm
          where the model normalizes queries per head before RoPE, as Qwen3 does)
  k_pre   the key before RoPE (k_proj, or k_norm), and the value (v_proj)
  k_rope  the key after RoPE, as the model's KV cache holds it (the attention function's
          input); readers of the format ignore it, the recorder uses it to check the RoPE
  o_ref   the model's exact attention output per head, before o_proj (the attention
          function's output, computed by the model's own implementation: eager or sdpa)

and writes them in the project's safetensors trace format (docs/replay.md,
data/traces/README.md): float32, row t = position t, with the metadata the reader checks.
Nothing in the model is edited: forward hooks on the projections and a registered attention
function (transformers' AttentionInterface) that calls the model's own implementation and
keeps its inputs and output. Both are removed on exit.

    from mactune.record import Recorder
    with Recorder(model) as rec, torch.no_grad():
        model(input_ids)                     # or model.generate(...): both are recorded
    rec.save("my_model.safetensors")
    mactune.replay("my_model.safetensors", tau=[0.45, 0.75])

Shapes: any GQA ratio (Hq / Hkv), head_dim as the model has it (the CPU engine replays 64,
128 and 256; `engine="ref"` any). RoPE: the format's rotate-half RoPE with one base
(rope_theta): Llama 2 and 3.0, Mistral and Qwen2/3 use exactly that, each with its own base
(10000, 500000, 1000000, ...). Scaled RoPE (Llama 3.1's "llama3", linear, dynamic NTK, YaRN)
changes the frequencies, which the format cannot express: the recorder checks every layer's
post-RoPE keys and queries against rope(k_pre), rope(q_pre) with the model's base and raises
ValueError naming the layer and the model's rope_scaling when they differ. Sliding-window
attention is refused when the window is shorter than the sequence. Batch size 1.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Dict, Iterable, List, Optional

import numpy as np

from mactune import tensorfile

try:
    import torch
except ImportError as e:  # the rest of mactune does not need torch
    raise ImportError("mactune.record needs torch and transformers "
                      "(pip install torch transformers)") from e

_ATTN_NAME = "mactune_record"


def _attention_modules(model) -> Dict[int, "torch.nn.Module"]:
    """layer index -> attention module: modules with q/k/v/o projections and a layer_idx."""
    found = {}
    for m in model.modules():
        if all(hasattr(m, a) for a in ("q_proj", "k_proj", "v_proj", "o_proj", "layer_idx")):
            found[int(m.layer_idx)] = m
    if not found:
        raise ValueError(f"{type(model).__name__}: no attention module with q_proj, k_proj, "
                         "v_proj, o_proj and layer_idx (not a Llama-family model?)")
    return dict(sorted(found.items()))


def _rope_np(x: np.ndarray, theta: float) -> np.ndarray:
    """The format's rotate-half RoPE of x [T, H, D] at positions 0..T-1, in float64."""
    T, _, D = x.shape
    inv = theta ** (-2.0 * np.arange(D // 2) / D)
    ang = np.arange(T)[:, None] * np.concatenate([inv, inv])[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    xd = x.astype(np.float64)
    return xd * cos + np.concatenate([-xd[..., D // 2:], xd[..., :D // 2]], axis=-1) * sin


def _text_config(config):
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def _rope_theta(config) -> float:
    c = _text_config(config)
    theta = getattr(c, "rope_theta", None)
    params = getattr(c, "rope_parameters", None)  # newer transformers keep it here
    if theta is None and isinstance(params, dict):
        theta = params.get("rope_theta")
    if theta is None:
        raise ValueError(f"{type(c).__name__}: no rope_theta in the config")
    return float(theta)


def _rope_scaling(config) -> Optional[dict]:
    c = _text_config(config)
    s = getattr(c, "rope_scaling", None) or getattr(c, "rope_parameters", None)
    if isinstance(s, dict):
        kind = s.get("rope_type", s.get("type", "default"))
        return None if kind in (None, "default") else dict(s)
    return None


class Recorder:
    """Context manager that records every forward pass of `model` (batch 1) into one trace.

    layers: attention layers to keep (default: all). keep_post_rope: also store
    layer{L}.k_rope. check_rope_tol: largest |rope(x_pre) - x_model| / max|x_model| accepted
    when checking the model's RoPE against the format's (fp32 roundoff is about 1e-6).
    """

    def __init__(self, model, layers: Optional[Iterable[int]] = None,
                 keep_post_rope: bool = True, check_rope_tol: float = 1e-4):
        self.model = model
        mods = _attention_modules(model)
        self.layers = sorted(mods) if layers is None else sorted(set(int(l) for l in layers))
        missing = [l for l in self.layers if l not in mods]
        if missing:
            raise ValueError(f"no attention layer {missing} (the model has 0..{max(mods)})")
        self.modules = {l: mods[l] for l in self.layers}
        self.keep_post_rope = keep_post_rope
        self.check_rope_tol = check_rope_tol
        self.theta = _rope_theta(model.config)
        self._rows: Dict[int, Dict[str, List[np.ndarray]]] = {
            l: {k: [] for k in ("q_pre", "k_pre", "v", "q_rope", "k_rope", "o_ref")}
            for l in self.layers}
        self._hooks: List = []
        self._saved_impl = None
        self.shape: Dict[int, tuple] = {}

    # ---- capture

    def _hook(self, layer: int, what: str, heads: int, head_dim: int):
        def keep(_module, _inputs, output):
            t = output[0] if isinstance(output, tuple) else output
            if t.shape[0] != 1:
                raise ValueError(f"mactune.record: batch size {t.shape[0]}; traces hold one "
                                 "sequence (batch 1)")
            rows = t.detach().to(torch.float32).reshape(-1, heads, head_dim)
            self._rows[layer][what].append(rows.cpu().numpy())
        return keep

    def _attention(self, base):
        def attend(module, query, key, value, attention_mask, **kwargs):
            out = base(module, query, key, value, attention_mask, **kwargs)
            layer = int(module.layer_idx)
            if layer in self._rows:
                window = kwargs.get("sliding_window")
                if window is not None and key.shape[2] > window:
                    raise ValueError(f"mactune.record: layer {layer} attends within a sliding "
                                     f"window of {window} < {key.shape[2]} tokens; the trace "
                                     "format has full causal attention")
                scaling = kwargs.get("scaling")
                if scaling is not None and abs(scaling * math.sqrt(query.shape[-1]) - 1) > 1e-6:
                    raise ValueError(f"mactune.record: layer {layer} scales scores by "
                                     f"{scaling}, the format by 1/sqrt(head_dim)")
                t_new = query.shape[2]  # [B, H, t_new, D]; key/value: the whole cache
                r = self._rows[layer]
                r["q_rope"].append(query[0].transpose(0, 1).detach().float().cpu().numpy())
                r["k_rope"].append(key[0, :, -t_new:].transpose(0, 1).detach().float().cpu()
                                   .numpy())
                o = out[0] if isinstance(out, tuple) else out  # [B, t_new, H, D]
                r["o_ref"].append(o[0].detach().float().cpu().numpy())
            return out
        return attend

    def __enter__(self) -> "Recorder":
        from transformers import AttentionInterface
        try:
            from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
        except ImportError:  # pragma: no cover - older layouts
            from transformers.integrations import ALL_ATTENTION_FUNCTIONS
        config = self.model.config
        impl = getattr(config, "_attn_implementation", None) or "eager"
        if impl == "eager":
            any_module = next(iter(self.modules.values()))
            base = getattr(sys.modules[type(any_module).__module__], "eager_attention_forward")
        else:
            base = ALL_ATTENTION_FUNCTIONS[impl]
        scaling = _rope_scaling(config)
        self.rope_scaling = scaling
        AttentionInterface.register(_ATTN_NAME, self._attention(base))
        self._saved_impl = impl
        self._set_impl(_ATTN_NAME)
        for layer, m in self.modules.items():
            c = _text_config(config)
            hq = c.num_attention_heads
            hkv = getattr(c, "num_key_value_heads", None) or hq
            d = getattr(m, "head_dim", None) or c.hidden_size // hq
            self.shape[layer] = (hq, hkv, d)
            # Pre-RoPE = after a per-head norm where the model has one (Qwen3).
            qsrc = m.q_norm if getattr(m, "q_norm", None) is not None else m.q_proj
            ksrc = m.k_norm if getattr(m, "k_norm", None) is not None else m.k_proj
            self._hooks.append(qsrc.register_forward_hook(self._hook(layer, "q_pre", hq, d)))
            self._hooks.append(ksrc.register_forward_hook(self._hook(layer, "k_pre", hkv, d)))
            self._hooks.append(m.v_proj.register_forward_hook(self._hook(layer, "v", hkv, d)))
        return self

    def _set_impl(self, name: str) -> None:
        if hasattr(self.model, "set_attn_implementation"):
            try:
                self.model.set_attn_implementation(name)
                return
            except Exception:  # older versions validate names against a fixed list
                pass
        self.model.config._attn_implementation = name

    def __exit__(self, *exc) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
        if self._saved_impl is not None:
            self._set_impl(self._saved_impl)
            self._saved_impl = None

    # ---- results

    def tensors(self) -> Dict[str, np.ndarray]:
        """The trace's tensors, after checking the model's RoPE against the format's."""
        out = {}
        for layer in self.layers:
            r = self._rows[layer]
            if not r["o_ref"]:
                raise ValueError("mactune.record: nothing was recorded (run the model inside "
                                 "the `with Recorder(model)` block)")
            t = {k: np.concatenate(v, axis=0).astype(np.float32) for k, v in r.items()}
            lengths = {k: v.shape[0] for k, v in t.items()}
            if len(set(lengths.values())) != 1:
                raise ValueError(f"mactune.record: layer {layer}: rows differ {lengths}")
            for pre, post in (("k_pre", "k_rope"), ("q_pre", "q_rope")):
                err = np.abs(_rope_np(t[pre], self.theta) - t[post]).max()
                scale = max(float(np.abs(t[post]).max()), 1e-30)
                if err / scale > self.check_rope_tol:
                    raise ValueError(
                        f"mactune.record: layer {layer}: the model's RoPE is not rotate-half "
                        f"RoPE with theta {self.theta:g} (max |rope({pre}) - {post}| = "
                        f"{err:.3g}, {err / scale:.2g} of the largest value; rope_scaling = "
                        f"{self.rope_scaling}); the trace format cannot express it")
            out[f"layer{layer}.q_pre"] = t["q_pre"]
            out[f"layer{layer}.k_pre"] = t["k_pre"]
            out[f"layer{layer}.v"] = t["v"]
            out[f"layer{layer}.o_ref"] = t["o_ref"]
            if self.keep_post_rope:
                out[f"layer{layer}.k_rope"] = t["k_rope"]
        return out

    def metadata(self, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        hq, hkv, d = self.shape[self.layers[0]]
        c = _text_config(self.model.config)
        steps = sum(a.shape[0] for a in self._rows[self.layers[0]]["o_ref"])
        meta = {
            "format": "mactune-trace", "recorded_by": "mactune.record",
            "model": str(getattr(c, "_name_or_path", "") or type(self.model).__name__),
            "model_type": str(getattr(c, "model_type", "")),
            "n_layers": str(getattr(c, "num_hidden_layers", len(self.layers))),
            "n_heads": str(hq), "n_kv_heads": str(hkv), "head_dim": str(d),
            "layers_included": ",".join(str(l) for l in self.layers),
            "seq_len": str(steps), "rope_theta": repr(self.theta),
            "rope_convention": "rotate_half", "position_offset": "0",
            "softmax_scale": repr(1.0 / math.sqrt(d)),
            "gqa_mapping": f"query head h uses kv head h // {hq // hkv}",
            "attention": f"causal, as the model's '{self._saved_impl or 'eager'}' "
                         "implementation computes it (o_ref)",
            "dtype": str(next(self.model.parameters()).dtype).replace("torch.", ""),
        }
        meta.update(extra or {})
        return meta

    def save(self, path: str | os.PathLike, extra_metadata: Optional[Dict[str, str]] = None):
        """Writes the trace (atomically) and returns `path`."""
        tensorfile.save(path, self.tensors(), self.metadata(extra_metadata))
        return path


def record(model, input_ids, path: str | os.PathLike, *, layers=None,
           extra_metadata: Optional[Dict[str, str]] = None, keep_post_rope: bool = True):
    """One teacher-forced forward pass over input_ids [1, T] (every position is a decode
    step, as in the shipped traces), recorded into `path`. Returns `path`."""
    with Recorder(model, layers, keep_post_rope) as rec, torch.no_grad():
        model(input_ids)
    return rec.save(path, extra_metadata)
