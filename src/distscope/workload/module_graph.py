"""Any `torch.nn.Module` as a workload: its training step traced on the meta device into an op graph.

`--model torch:path/to/file.py:factory` (a function returning the module) or
`--model torchvision:resnet50` / `timm:NAME` (where the package installs), with a sample input spec
`--input "x:8x3x224x224:bf16"` (name:shape:dtype, comma-separated for several inputs; the leading dim
is the per-GPU micro-batch; an optional fourth field, `:nchw`, says the model runs in NCHW rather than
channels-last: Layout). The module is built under `torch.device("meta")`, so no weights are
allocated and nothing runs: one forward and one backward (of the sum of the outputs) are dispatched
through a TorchDispatchMode that records every aten op with its shapes. Each op becomes:

- a GEMM (mm, addmm, bmm, baddbmm) with its (M, N, K);
- a convolution (forward or backward) with its implicit-GEMM dims (M = N·H_out·W_out, N = C_out,
  K = C_in/groups·k_h·k_w) and its FLOPs from torch's own formulas (torch.utils.flop_counter);
- a fused attention (forward or backward) with its FLOPs and its shape (AttnShape). On the meta device
  `F.scaled_dot_product_attention` would decompose into its math path (two bmm, a softmax, casts), which
  no GPU runs; the trace routes it to the memory-efficient fused op instead (`_FusedSDPA`), one kernel
  per pass as FlashAttention is;
- an element-wise or reduction kernel priced by the bytes it reads and writes;
- nothing, for views and metadata ops (they launch no kernel).

Convolutions and group norms also carry the bytes a patch-parallel run exchanges for them
(`Op.exchange_bytes`, model/patch_parallel.py): a convolution's padding rows of its input (one side),
a group norm's per-group mean and mean-square.

For recompute (model/module_estimate.py), the training trace also splits the saved tensors by the
top-level child whose forward saved them (`child_saved`), and records the bytes each top-level child
receives as its forward's inputs (`child_inputs`): what a checkpoint of that child keeps instead.

FLOPs follow torch.utils.flop_counter (FlopCounterMode's registry), so the graph's total equals what
FlopCounterMode reports for the same step, with one correction: a grouped convolution's backward. Its
registry formula prices the weight gradient as an ungrouped convolution (its docstring: "details involving
... groups ... I skip"), 33x the forward's FLOPs for ResNeXt's 32-group 3x3 (torch 2.13), where each
gradient is the forward's 2·M·N·K (conv_backward_flops). The bytes the autograd graph keeps for the backward
(saved tensors, less the weights and views of them it keeps, which the weights already count) are the
activation memory per micro-batch.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import importlib
import importlib.util
import itertools
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from distscope.dtypes import DType
from distscope.errors import DistscopeError

PREFIXES = ("torch:", "torchvision:", "timm:")
_INPUT = re.compile(r"^\s*([A-Za-z_]\w*)\s*:\s*([0-9x]+)\s*:\s*(\w+)\s*(?::\s*(\w+)\s*)?$")
# input spelling -> pricing dtype (tf32: fp32 tensors whose matmuls and convolutions use TF32 tensor cores)
_DTYPES = {"bf16": DType.BF16, "fp16": DType.FP16, "tf32": DType.TF32, "fp32": DType.FP32}


class OpKind(enum.Enum):
    GEMM = "gemm"
    CONV = "conv"
    ATTENTION = "attention"
    MEMORY = "memory"  # element-wise, normalization, reduction: HBM traffic


class Phase(enum.Enum):
    FORWARD = "forward"
    BACKWARD = "backward"


@dataclasses.dataclass(frozen=True, slots=True)
class AttnShape:
    """A fused attention's problem: batch·heads sequences of seq_q queries over seq_kv keys."""

    batch_heads: int
    seq_q: int
    seq_kv: int
    d_qk: int
    d_v: int
    causal: bool


class Layout(enum.Enum):
    """The memory format a 4-D input (and the model's activations) are in: channels-last (NHWC, what cuDNN's
    tensor-core kernels take directly; the default) or NCHW, PyTorch's contiguous default, around which
    cuDNN transforms for its tensor-core kernels (model/module_estimate.py)."""

    CHANNELS_LAST = "channels_last"
    NCHW = "nchw"


_LAYOUTS = {x.value: x for x in Layout}  # --input's fourth field


@dataclasses.dataclass(frozen=True, slots=True)
class Op:
    name: str  # the aten op
    kind: OpKind
    phase: Phase
    flops: float
    bytes: float  # read + written
    gemm: tuple[float, float, float] | None = None  # (M, N, K): GEMMs and convolutions' implicit GEMM
    module: str = ""  # the model's top-level child the op ran in ("" at the root)
    attn: AttnShape | None = None  # fused attention only
    exchange_bytes: float = 0.0  # convolution: its input's padding rows (one side); group norm: its statistics
    in_bytes: float = 0.0  # its first tensor argument (convolution and group norm: the activation it reads)
    taps: float = 1.0  # convolution: the filter's spatial taps (k_h·k_w) sharing each input pixel
    groups: int = 1  # convolution: its channel groups
    pointwise: bool = False  # convolution: 1x1 at unit stride, a plain GEMM in either memory format
    winograd: bool = False  # convolution: ungrouped 3x3 at unit stride, the shape cuDNN's Winograd kernels take
    reduce_rows: int = 0  # group norm forward: the (sample, group) rows its statistics kernel reduces, N·G


@dataclasses.dataclass(frozen=True, slots=True)
class InputSpec:
    name: str
    shape: tuple[int, ...]
    dtype: DType
    layout: Layout = Layout.CHANNELS_LAST

    @property
    def text(self) -> str:
        """The spec as `--input` takes it (parse_inputs): name:AxBxC:dtype[:nchw]."""
        tail = f":{self.layout.value}" if self.layout is not Layout.CHANNELS_LAST else ""
        return f"{self.name}:{'x'.join(map(str, self.shape))}:{self.dtype.value}{tail}"


def at_batch(inputs: tuple[InputSpec, ...], batch: int) -> tuple[InputSpec, ...]:
    """The inputs with their leading (batch) dim set to `batch`."""
    return tuple(dataclasses.replace(x, shape=(batch, *x.shape[1:])) for x in inputs)


@dataclasses.dataclass(frozen=True)
class ModuleGraph:
    """One micro-batch's training step of a module on one GPU."""

    name: str
    params: int
    dtype: DType
    micro_batch: int  # leading dim of the first input
    ops: tuple[Op, ...]
    saved_bytes: float  # tensors autograd keeps from the forward for the backward
    child_saved: tuple[tuple[str, float], ...] = ()  # saved_bytes by top-level child ("": outside any)
    child_inputs: tuple[tuple[str, float], ...] = ()  # each top-level child's forward input bytes
    child_params: tuple[tuple[str, int], ...] = ()  # each top-level child's parameter count
    layout: Layout = Layout.CHANNELS_LAST  # the first input's memory format

    def flops(self, phase: Phase | None = None) -> float:
        return sum(o.flops for o in self.ops if phase is None or o.phase is phase)


def is_module_ref(model: str) -> bool:
    return model.startswith(PREFIXES)


def parse_inputs(text: str | None) -> tuple[InputSpec, ...]:
    """`x:8x3x224x224:bf16[:nchw][,y:...]` into input specs (one line naming the bad part otherwise); the
    optional fourth field is the memory format (Layout: channels_last, the default, or nchw)."""
    if not text or not text.strip():
        raise DistscopeError('--input is required with a torch model, e.g. --input "x:8x3x224x224:bf16"')
    out = []
    for part in text.split(","):
        m = _INPUT.match(part)
        if m is None:
            raise DistscopeError(f"--input {part.strip()!r} is not name:shape:dtype[:layout] (e.g. x:8x3x224x224:bf16)")
        name, dims, dt, fmt = m.groups()
        shape = tuple(int(d) for d in dims.split("x") if d)
        if not shape or any(d < 1 for d in shape) or len(shape) != len(dims.split("x")):
            raise DistscopeError(f"--input {part.strip()!r}: shape {dims!r} needs positive dims joined by x")
        if dt.lower() not in _DTYPES:
            raise DistscopeError(f"--input {part.strip()!r}: dtype {dt!r} is not one of {', '.join(_DTYPES)}")
        if fmt is not None and fmt.lower() not in _LAYOUTS:
            raise DistscopeError(f"--input {part.strip()!r}: layout {fmt!r} is not one of {', '.join(_LAYOUTS)}")
        out.append(InputSpec(name=name, shape=shape, dtype=_DTYPES[dt.lower()],
                             layout=_LAYOUTS[fmt.lower()] if fmt else Layout.CHANNELS_LAST))
    return tuple(out)


def load_factory(ref: str) -> tuple[Callable[[], Any], str]:
    """The module factory `ref` names, and a display name (one line when it cannot be loaded)."""
    kind, _, rest = ref.partition(":")
    if kind == "torch":
        path, sep, fn = rest.rpartition(":")
        if not sep or not path or not fn:
            raise DistscopeError(f"--model {ref!r}: expected torch:path/to/file.py:factory")
        p = Path(path)
        if not p.is_file():
            raise DistscopeError(f"--model {ref!r}: file {path!r} does not exist")
        spec = importlib.util.spec_from_file_location(f"_distscope_user_{p.stem}", p)
        if spec is None or spec.loader is None:
            raise DistscopeError(f"--model {ref!r}: {path!r} is not a Python file")
        mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mod)
        except Exception as exc:  # the user's file: report its error in one line
            raise DistscopeError(f"--model {ref!r}: importing {path!r} failed: {type(exc).__name__}: {exc}") from None
        factory = getattr(mod, fn, None)
        if not callable(factory):
            names = sorted(n for n, v in vars(mod).items() if callable(v) and not n.startswith("_"))
            raise DistscopeError(f"--model {ref!r}: {path!r} has no callable {fn!r} (callables: {', '.join(names[:8])})")
        return factory, f"{p.stem}.{fn}"
    package = {"torchvision": "torchvision.models", "timm": "timm"}[kind]
    try:
        lib = importlib.import_module(package)
    except ImportError:
        raise DistscopeError(f"--model {ref!r}: {kind} is not installed (pip install {kind})") from None
    except Exception as exc:  # e.g. a torchvision built for another torch
        raise DistscopeError(f"--model {ref!r}: importing {kind} failed: {type(exc).__name__}: {exc}") from None
    if kind == "timm":
        return (lambda: lib.create_model(rest, pretrained=False)), rest
    factory = getattr(lib, rest, None)
    if not callable(factory):
        raise DistscopeError(f"--model {ref!r}: torchvision.models has no model {rest!r}")
    return (lambda: factory(weights=None)), rest


def trace_ref(ref: str, inputs: tuple[InputSpec, ...], *, inference: bool = False) -> ModuleGraph:
    """trace_module of the module `ref` names (load_factory), remembered for the process while a
    `torch:` file is unchanged: a patch-parallel sweep and a validation pass trace the same denoiser at
    the same shapes again and again (an SDXL UNet takes ~2 s a shape on CPU)."""
    kind, _, rest = ref.partition(":")
    stamp: tuple[int, int] = (0, 0)
    if kind == "torch":
        p = Path(rest.rpartition(":")[0])
        if p.is_file():
            st = p.stat()
            stamp = (st.st_mtime_ns, st.st_size)
    return _trace_ref(ref, stamp, inputs, inference)


@functools.lru_cache(maxsize=16)
def _trace_ref(ref: str, stamp: tuple[int, int], inputs: tuple[InputSpec, ...], inference: bool) -> ModuleGraph:
    factory, name = load_factory(ref)
    return trace_module(factory, inputs, name, inference=inference)


_VIEW_OPS = {"view", "_unsafe_view", "t", "transpose", "permute", "expand", "as_strided", "detach", "alias",
             "squeeze", "unsqueeze", "reshape", "slice", "select", "split", "split_with_sizes", "unbind",
             "ones_like", "zeros_like", "empty_like", "empty", "zeros", "lift_fresh", "_reshape_alias"}
_GEMMS = {"mm", "addmm", "bmm", "baddbmm"}
_CONVS = {"convolution", "convolution_backward"}
_FUSED_ATTN = {"_scaled_dot_product_efficient_attention", "_scaled_dot_product_efficient_attention_backward",
               "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward",
               "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward"}


def _nbytes(x: Any) -> float:
    import torch

    if isinstance(x, torch.Tensor):
        return float(x.numel() * x.element_size())
    if isinstance(x, list | tuple):
        return sum(_nbytes(y) for y in x)
    return 0.0


def _gemm_dims(op: str, args: tuple[Any, ...]) -> tuple[float, float, float]:
    if op in ("mm", "addmm"):
        a, b = (args[0], args[1]) if op == "mm" else (args[1], args[2])
        return float(a.shape[0]), float(b.shape[1]), float(a.shape[1])
    a, b = (args[0], args[1]) if op == "bmm" else (args[1], args[2])
    return float(a.shape[0] * a.shape[1]), float(b.shape[2]), float(a.shape[2])


def _conv_dims(op: str, args: tuple[Any, ...], out: Any) -> tuple[tuple[float, float, float], float, int, bool, bool]:
    """Implicit-GEMM dims of the forward convolution the op belongs to, its filter's spatial taps, its
    channel groups, whether it is pointwise (1x1 at unit stride: Op.pointwise) and whether it is an
    ungrouped 3x3 at unit stride (Op.winograd)."""
    if op == "convolution":
        x, w, y = args[0], args[1], out
    else:  # convolution_backward(grad_output, input, weight, ...)
        y, x, w = args[0], args[1], args[2]
    n_out = math.prod(y.shape[2:]) * y.shape[0]
    dims = (float(n_out), float(w.shape[0]), float(math.prod(w.shape[1:])))
    taps = float(math.prod(w.shape[2:]))
    unit_stride = tuple(x.shape[2:]) == tuple(y.shape[2:])
    groups = max(1, int(x.shape[1]) // max(1, int(w.shape[1])))
    winograd = tuple(w.shape[2:]) == (3, 3) and unit_stride and groups == 1
    return dims, taps, groups, taps == 1 and unit_stride, winograd


def conv_backward_flops(dims: tuple[float, float, float], output_mask: Any) -> float:
    """FLOPs of a convolution's backward: each gradient it computes (input, weight; `output_mask`) is an
    implicit GEMM of the forward's (M, N, K) = (N·H_out·W_out, C_out, C_in/groups·k_h·k_w) dims, 2·M·N·K."""
    M, N, K = dims
    return 2.0 * M * N * K * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


def _attn_shape(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> AttnShape | None:
    """The problem of a fused attention op, read through its schema (query, key, value, is_causal)."""
    if func._overloadpacket.__name__ not in _FUSED_ATTN:
        return None
    bound = dict(zip((a.name for a in func._schema.arguments), args, strict=False)) | kwargs
    q, k, v = bound["query"], bound["key"], bound["value"]
    return AttnShape(batch_heads=int(q.shape[0] * q.shape[1]), seq_q=int(q.shape[2]), seq_kv=int(k.shape[2]),
                     d_qk=int(q.shape[3]), d_v=int(v.shape[3]), causal=bool(bound.get("is_causal", False)))


def _exchange_bytes(op: str, args: tuple[Any, ...]) -> float:
    """Bytes one patch boundary of this op costs a patch-parallel run (Op.exchange_bytes): a forward
    convolution's padding rows of its (N, C, H, W) input, a group norm's mean and mean-square per group."""
    if op == "convolution" and args[0].dim() == 4:
        x, pad = args[0], int(args[4][0])
        return float(pad * x.shape[0] * x.shape[1] * x.shape[3] * x.element_size())
    if op == "native_group_norm":
        x, groups = args[0], int(args[6])
        return float(2 * x.shape[0] * groups * x.element_size())
    return 0.0


def _reduce_rows(op: str, args: tuple[Any, ...]) -> int:
    """Op.reduce_rows: native_group_norm(input, weight, bias, N, C, HxW, group, eps) reduces N·group rows."""
    return int(args[3]) * int(args[6]) if op == "native_group_norm" else 0


def _fused_sdpa(q: Any, k: Any, v: Any, attn_mask: Any = None, dropout_p: float = 0.0, is_causal: bool = False,
                scale: float | None = None, enable_gqa: bool = False) -> Any:
    """`F.scaled_dot_product_attention` as the one fused kernel a GPU runs (the memory-efficient op, which
    has meta kernels for both passes), or None where its arguments need the math path."""
    import torch

    if q.dim() != 4 or k.dim() != 4 or (enable_gqa and q.shape[1] != k.shape[1]):
        return None
    out = torch.ops.aten._scaled_dot_product_efficient_attention(
        q, k, v, attn_mask, q.requires_grad or k.requires_grad or v.requires_grad, dropout_p, is_causal, scale=scale)
    return out[0]


def _top_child(parents: set[str], entered: dict[str, int]) -> str:
    """The top-level child among ModuleTracker's parents ('Global', 'Root', 'Root.block', ...): 'block'.
    In the backward the tracker can hold several (a child whose inputs need no gradient is never left,
    torch.utils.module_tracker), so the child of the most recently entered parent is the running one;
    `entered` numbers the parents in the order they appeared (a set's order would make it random)."""
    names = [(entered.get(p, 0), p.split(".", 2)[1]) for p in parents if p.count(".") >= 1]
    return max(names)[1] if names else ""


def trace_module(factory: Callable[[], Any], inputs: tuple[InputSpec, ...], name: str, *,
                 inference: bool = False) -> ModuleGraph:
    """One forward and backward of `factory()` on the meta device, recorded op by op (module docstring);
    with `inference`, the forward alone under no_grad (nothing saved for a backward)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry
    from torch.utils.module_tracker import ModuleTracker

    dtype = inputs[0].dtype
    tdt = {DType.BF16: torch.bfloat16, DType.FP16: torch.float16, DType.TF32: torch.float32, DType.FP32: torch.float32}
    try:
        with torch.device("meta"):
            model = factory()
        if not isinstance(model, torch.nn.Module):
            raise DistscopeError(f"--model: the factory returned {type(model).__name__}, not a torch.nn.Module")
        model = model.to(dtype=tdt[dtype])
    except DistscopeError:
        raise
    except Exception as exc:
        raise DistscopeError(f"--model {name}: building the module on the meta device failed: "
                             f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    from torch.overrides import TorchFunctionMode

    ops: list[Op] = []
    phase = [Phase.FORWARD]
    tracker = ModuleTracker()
    sdpa = torch.nn.functional.scaled_dot_product_attention

    class _FusedSDPA(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is sdpa:
                out = _fused_sdpa(*args, **kwargs)
                if out is not None:
                    return out
            return func(*args, **kwargs)

    entered: dict[str, int] = {}  # parent -> when it (last) appeared in tracker.parents
    last: list[set[str]] = [set()]
    tick = itertools.count(1)

    def where_now() -> str:
        parents = tracker.parents
        if parents != last[0]:
            for p in sorted(parents - last[0]):
                entered[p] = next(tick)
            last[0] = set(parents)
        return _top_child(parents, entered)

    class _Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            op = func._overloadpacket.__name__
            packet = func._overloadpacket
            if op in _VIEW_OPS:
                return out
            nbytes = _nbytes(args) + _nbytes(out)
            flops = float(flop_registry[packet](*args, **kwargs, out_val=out)) if packet in flop_registry else 0.0
            where = where_now()
            if op in _GEMMS:
                ops.append(Op(op, OpKind.GEMM, phase[0], flops, nbytes, _gemm_dims(op, args), where))
            elif op in _CONVS:
                dims, taps, groups, pointwise, winograd = _conv_dims(op, args, out)
                if op == "convolution_backward" and groups > 1 and not args[7]:
                    flops = conv_backward_flops(dims, args[10])
                ops.append(Op(op, OpKind.CONV, phase[0], flops, nbytes, dims, where, taps=taps, groups=groups,
                              exchange_bytes=_exchange_bytes(op, args), in_bytes=_nbytes(args[0]), pointwise=pointwise,
                              winograd=winograd))
            elif flops > 0:
                ops.append(Op(op, OpKind.ATTENTION, phase[0], flops, nbytes, module=where,
                              attn=_attn_shape(func, args, kwargs)))
            else:
                ops.append(Op(op, OpKind.MEMORY, phase[0], 0.0, nbytes, module=where,
                              exchange_bytes=_exchange_bytes(op, args), in_bytes=_nbytes(args[0]) if args else 0.0,
                              reduce_rows=_reduce_rows(op, args)))
            return out

    saved = [0.0]
    saved_by: dict[str, float] = {}
    inputs_by: dict[str, float] = {}

    weights = {id(p) for p in model.parameters()}

    def pack(t: Any) -> Any:
        base = getattr(t, "_base", None)
        if id(t) in weights or (base is not None and id(base) in weights):
            return t  # a weight (or a view of one) autograd keeps: already counted as the weights
        n = _nbytes(t)
        saved[0] += n
        where = where_now()
        saved_by[where] = saved_by.get(where, 0.0) + n
        return t

    def on_input(name: str) -> Callable[..., None]:
        def hook(_mod: Any, args: Any) -> None:
            inputs_by[name] = inputs_by.get(name, 0.0) + _nbytes(args)
        return hook

    if not inference:
        for child_name, child in model.named_children():
            child.register_forward_pre_hook(on_input(child_name))

    xs = [torch.empty(s.shape, dtype=tdt[s.dtype], device="meta") for s in inputs]
    try:
        if inference:
            with torch.no_grad(), tracker, _FusedSDPA(), _Record():
                model.eval()
                model(*xs)
        else:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), tracker, _FusedSDPA(), _Record():
                out = model(*xs)
                leaves = [t for t in (out if isinstance(out, list | tuple) else [out]) if isinstance(t, torch.Tensor)]
                if not leaves or not any(t.requires_grad for t in leaves):
                    raise DistscopeError(f"--model {name}: the forward returned no tensor that needs a gradient")
                loss = sum(t.float().sum() for t in leaves if t.requires_grad)
                phase[0] = Phase.BACKWARD
                loss.backward()  # type: ignore[union-attr]
    except DistscopeError:
        raise
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        shapes = ", ".join(f"{s.name}:{'x'.join(map(str, s.shape))}" for s in inputs)
        raise DistscopeError(f"--model {name} with --input {shapes}: the "
                             f"forward failed on the meta device: {type(exc).__name__}: {first}") from None
    params = sum(p.numel() for p in model.parameters())
    kids = tuple((n, sum(p.numel() for p in c.parameters())) for n, c in model.named_children())
    return ModuleGraph(name=name, params=params, dtype=dtype, micro_batch=inputs[0].shape[0], ops=tuple(ops),
                       saved_bytes=saved[0], child_saved=tuple(saved_by.items()), child_inputs=tuple(inputs_by.items()),
                       child_params=kids, layout=inputs[0].layout)
