"""``tw.register_torch_op(name, kernel)``: a compiled kernel as a ``torch.library`` custom op.

    op = tw.register_torch_op("mylib::matmul", kernel)
    y = op(a, b)                                   # also inside torch.compile(fullgraph=True)

The op takes the kernel's inputs as tensors (scalar parameters as Python numbers) and returns its
outputs as new tensors (None when it has none). Inputs the kernel writes in place
(``Executable.written_inputs()``: stores and copy / fill / gemm / reduce destinations) are
declared mutated (``mutates_args`` and ``Tensor(a!)`` in the schema), so ``torch.compile`` and
autograd know the op changes them; every other input is declared read-only, which the kernel
guarantees. Its fake (meta) implementation computes the output shapes and dtypes from the
kernel's signature, so ``torch.compile`` traces through it without running it. torch is
optional: importing tilewright never imports it.
"""
from __future__ import annotations

import re

from .errors import TilewrightError, user_location

__all__ = ["register_torch_op"]

_OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_]*")

# name -> (kernel, op) of each registration in this process. torch replaces an op's entry process-wide,
# so a second kernel under a name would make every handle of it run the second (h-hunt11b F6).
_REGISTERED: dict = {}

def register_torch_op(name: str, kernel):
    """Registers ``kernel`` (a :class:`~tilewright.Kernel`) as the custom op ``name``
    (``"namespace::op"``) and returns it (callable like the kernel)."""
    try:
        import torch
    except ImportError as e:
        raise TilewrightError("register_torch_op needs PyTorch, which is not installed",
                              hint="pip install torch (Tilewright itself does not depend on it)") from e
    if not isinstance(name, str) or not _OP_NAME.fullmatch(name):
        raise TilewrightError(f"torch op name {name!r} is not 'namespace::op_name' (two identifiers)", *user_location(),
                              hint="write it as 'namespace::op_name', e.g. 'mylib::matmul'")
    from .jit import Kernel
    if not isinstance(kernel, Kernel):
        raise TilewrightError(f"register_torch_op takes a compiled tilewright Kernel, got {kernel!r}", *user_location(),
                              hint="pass tw.compile(prim_func, out_idx=[...]) or a @tw.jit function's result")
    if name in _REGISTERED:
        old_kernel, old_op = _REGISTERED[name]
        if old_kernel is kernel:
            return old_op
        raise TilewrightError(f"torch op {name!r} is already registered to kernel '{old_kernel.name}'; registering "
                              f"kernel '{kernel.name}' under it would make every handle of {name!r} run the new "
                              "kernel (torch replaces an op process-wide)", *user_location(),
                              hint="register each kernel under its own name, e.g. with its shape or constants in "
                                   "it: 'mylib::scale_2'")
    specs = kernel._exe.input_specs()
    mutated = sorted(kernel._written)  # positions among the inputs, all tensors
    n_out = len(kernel._exe.output_dtypes)
    if n_out == 0 and not mutated:
        raise TilewrightError(f"kernel '{kernel.name}' has no output parameter and writes none of its inputs; "
                              "a torch op of it would do nothing", *user_location(),
                              hint="declare outputs with out_idx=[...] or tw.output(...)")
    params = []
    for i, (pname, _, dtype, is_tensor) in enumerate(specs):
        # Each mutated tensor gets its own alias set: the op writes it and returns no alias of it.
        kind = f"Tensor({_alias_set(mutated.index(i))}!)" if i in mutated else "Tensor" if is_tensor \
            else _scalar_type(dtype)
        params.append(f"{kind} {pname}")
    ret = "()" if n_out == 0 else "Tensor" if n_out == 1 else "(" + ", ".join(["Tensor"] * n_out) + ")"
    schema = "(" + ", ".join(params) + ") -> " + ret

    def impl(*args):
        # A torch op writes any tensor in place, whatever its strides; the kernel takes dense ones
        # (and refuses a strided one it writes, whose copy would lose the writes): run it on a
        # dense copy and write that back.
        strided = [(i, args[i]) for i in mutated if isinstance(args[i], torch.Tensor) and not args[i].is_contiguous()]
        if strided:
            args = list(args)
            for i, t in strided:
                args[i] = t.contiguous()
        out = kernel(*args)
        for i, t in strided:
            t.copy_(args[i])
        return out

    op = torch.library.custom_op(name, impl, mutates_args=[specs[i][0] for i in mutated], schema=schema)

    def fake(*args):
        shapes = [(list(a.shape), _tw_dtype(a.dtype)) if isinstance(a, torch.Tensor) else ([], "") for a in args]
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), "cpu")
        outs = [torch.empty(shape, dtype=getattr(torch, dt), device=device)
                for shape, dt in kernel._exe.output_specs(shapes)]
        return None if not outs else outs[0] if len(outs) == 1 else tuple(outs)

    op.register_fake(fake)
    _REGISTERED[name] = (kernel, op)
    return op


def _alias_set(k: int) -> str:
    """The k-th alias set name of a schema: a .. z, then a1 .. z1, ..."""
    return "abcdefghijklmnopqrstuvwxyz"[k % 26] + (str(k // 26) if k >= 26 else "")


def _scalar_type(dtype):
    return "float" if dtype.startswith("float") or dtype == "bfloat16" else "int"


def _tw_dtype(torch_dtype):
    return str(torch_dtype).replace("torch.", "")
