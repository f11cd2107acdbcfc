"""Data type names across frameworks: ``torch.float32``, ``Float32``, ``DT_FLOAT`` and ``float32`` are one type."""

from __future__ import annotations

from functools import lru_cache

__all__ = ["COMPILED_DTYPES", "is_float_dtype", "normalize_dtype", "precision_changed"]

COMPILED_DTYPES = frozenset({"float16", "float32", "float64"})
"""The dtypes (numpy names) graphcmp's compiled kernels read (`graphcmp.core.simd`, `graphcmp.core.tensor_fused`);
others take numpy's paths."""

_ALIASES = {
    "float": "float32", "double": "float64", "half": "float16", "bf16": "bfloat16",
    "dt_float": "float32", "dt_float16": "float16", "dt_bf16": "bfloat16", "dt_double": "float64",
    "dt_int8": "int8", "dt_int16": "int16", "dt_int32": "int32", "dt_int64": "int64", "dt_uint8": "uint8",
    "dt_bool": "bool", "long": "int64", "int": "int64",
}


@lru_cache(maxsize=1024)
def normalize_dtype(name: str) -> str:
    """Canonical lower-case dtype name.

    >>> normalize_dtype("torch.float32"), normalize_dtype("Float32"), normalize_dtype("mindspore.bfloat16")
    ('float32', 'float32', 'bfloat16')
    """
    text = name.strip().lower()
    for prefix in ("torch.", "mindspore.", "ms.", "numpy.", "np."):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return _ALIASES.get(text, text)


def is_float_dtype(name: str) -> bool:
    """True for floating-point types.

    >>> is_float_dtype("torch.bfloat16"), is_float_dtype("Int32")
    (True, False)
    """
    return "float" in normalize_dtype(name)


def precision_changed(npu: str, bench: str) -> bool:
    """True when the two types differ and at least one is floating point (integer width alone is not).

    >>> precision_changed("torch.bfloat16", "torch.float32"), precision_changed("Int32", "torch.int64")
    (True, False)
    >>> precision_changed("Float32", "torch.float32")
    False
    """
    a, b = normalize_dtype(npu), normalize_dtype(bench)
    return a != b and (is_float_dtype(a) or is_float_dtype(b))
