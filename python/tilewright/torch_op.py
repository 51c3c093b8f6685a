"""``tw.register_torch_op(name, kernel)``: a compiled kernel as a ``torch.library`` custom op.

    op = tw.register_torch_op("mylib::matmul", kernel)
    y = op(a, b)                                   # also inside torch.compile(fullgraph=True)

The op takes the kernel's inputs as tensors (scalar parameters as Python numbers) and returns its
outputs as new tensors; it mutates nothing. Its fake (meta) implementation computes the output
shapes and dtypes from the kernel's signature, so ``torch.compile`` traces through it without
running it. torch is optional: importing tilewright never imports it.
"""
from __future__ import annotations

from .errors import TilewrightError

__all__ = ["register_torch_op"]

def register_torch_op(name: str, kernel):
    """Registers ``kernel`` (a :class:`~tilewright.Kernel`) as the custom op ``name``
    (``"namespace::op"``) and returns it (callable like the kernel)."""
    try:
        import torch
    except ImportError as e:
        raise TilewrightError("register_torch_op needs PyTorch, which is not installed",
                              hint="pip install torch (Tilewright itself does not depend on it)") from e
    if "::" not in name:
        raise TilewrightError(f"torch op name '{name}' has no namespace", hint="write it as 'namespace::op_name'")
    specs = kernel._exe.input_specs()
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
