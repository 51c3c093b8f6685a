"""``tw.register_torch_op(name, kernel)``: a compiled kernel as a ``torch.library`` custom op.

    op = tw.register_torch_op("mylib::matmul", kernel)
    y = op(a, b)                                   # also inside torch.compile(fullgraph=True)

The op takes the kernel's inputs as tensors (scalar parameters as Python numbers) and returns its
outputs as new tensors; it mutates nothing. Its fake (meta) implementation computes the output
shapes and dtypes from the kernel's signature, so ``torch.compile`` traces through it without
running it. torch is optional: importing tilewright never imports it.
"""
from __future__ import annotations

import re

from .errors import TilewrightError

__all__ = ["register_torch_op"]

_OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_]*")

def register_torch_op(name: str, kernel):
    """Registers ``kernel`` (a :class:`~tilewright.Kernel`) as the custom op ``name``
    (``"namespace::op"``) and returns it (callable like the kernel)."""
    try:
        import torch
    except ImportError as e:
        raise TilewrightError("register_torch_op needs PyTorch, which is not installed",
                              hint="pip install torch (Tilewright itself does not depend on it)") from e
    if not isinstance(name, str) or not _OP_NAME.fullmatch(name):
        raise TilewrightError(f"torch op name {name!r} is not 'namespace::op_name' (two identifiers)",
                              hint="write it as 'namespace::op_name', e.g. 'mylib::matmul'")
    from .jit import Kernel
    if not isinstance(kernel, Kernel):
        raise TilewrightError(f"register_torch_op takes a compiled tilewright Kernel, got {kernel!r}",
                              hint="pass tw.compile(prim_func, out_idx=[...]) or a @tw.jit function's result")
    specs = kernel._exe.input_specs()
    if kernel._written:
        written = ", ".join(f"'{specs[i][0]}'" for i in sorted(kernel._written))
        raise TilewrightError(f"kernel '{kernel.name}' writes its input(s) {written} in place; a torch op from "
                              "register_torch_op mutates nothing (torch.compile relies on that)",
                              hint="make the written tensors outputs (out_idx=[...]) so the op returns them")
    n_out = len(kernel._exe.output_dtypes)
    if n_out == 0:
        raise TilewrightError(f"kernel '{kernel.name}' has no output parameter; a torch op must return something",
                              hint="declare outputs with out_idx=[...] or tw.output(...)")
    params = [f"{'Tensor' if is_tensor else _scalar_type(dtype)} {pname}" for pname, _, dtype, is_tensor in specs]
    ret = "Tensor" if n_out == 1 else "(" + ", ".join(["Tensor"] * n_out) + ")"
    schema = "(" + ", ".join(params) + ") -> " + ret

    def impl(*args):
        return kernel(*args)

    op = torch.library.custom_op(name, impl, mutates_args=(), schema=schema)

    def fake(*args):
        shapes = [(list(a.shape), _tw_dtype(a.dtype)) if isinstance(a, torch.Tensor) else ([], "") for a in args]
        outs = [torch.empty(shape, dtype=getattr(torch, dt), device=args[0].device if args else "cpu")
                for shape, dt in kernel._exe.output_specs(shapes)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    op.register_fake(fake)
    return op


def _scalar_type(dtype):
    return "float" if dtype.startswith("float") or dtype == "bfloat16" else "int"


def _tw_dtype(torch_dtype):
    return str(torch_dtype).replace("torch.", "")
