"""Known aten schemas by qualified overload name (`aten.add.Tensor`), parsed on first use.

The Core ATen set comes from `core_aten.py`; `EXTRA_ATEN_SCHEMAS` adds the few non-core
overloads that real exported graphs carry and that we handle (each with the reason). They are
lowered and checked like Core ATen overloads (`tests/test_extra_overloads.py`) but are not part
of the 194 that `aten2prims ops` and docs/coverage.md list."""

from __future__ import annotations

from functools import cache

from .core_aten import CORE_ATEN_OPS
from .parser import Schema, parse_schema

# Non-core overloads seen in torch.export graphs, each with the reason it is here.
EXTRA_ATEN_SCHEMAS: dict[str, str] = {
    # Checks on a tensor's data (one_hot's class range, torch._assert_async): kept by the
    # frontends and lowered to prims.check, which raises the message when the condition is false.
    "aten._assert_async.default": "_assert_async(Tensor self) -> ()",
    "aten._assert_async.msg": "_assert_async.msg(Tensor self, str assert_msg) -> ()",
    # An output-less check run_decompositions() leaves before each _to_copy; the frontends skip it
    # (the metas it asserts are the loaded graph's own, which the loaders check).
    "aten._assert_tensor_metadata.default": (
        "_assert_tensor_metadata(Tensor a, SymInt[]? size=None, SymInt[]? stride=None, "
        "ScalarType? dtype=None, *, Device? device=None, Layout? layout=None) -> ()"
    ),
    # A BatchNorm in train mode: run_decompositions() keeps this functional variant, whose two
    # extra results are the updated running stats (buffer_mutation outputs).
    "aten._native_batch_norm_legit_functional.default": (
        "_native_batch_norm_legit_functional(Tensor input, Tensor? weight, Tensor? bias, "
        "Tensor running_mean, Tensor running_var, bool training, float momentum, float eps) "
        "-> (Tensor, Tensor, Tensor, Tensor running_mean_out, Tensor running_var_out)"
    ),
    # A BatchNorm's backward: torch's Core ATen table decomposes it, and a joint
    # forward-backward program exported with a table that keeps the backward ops whole holds it.
    "aten.native_batch_norm_backward.default": (
        "native_batch_norm_backward(Tensor grad_out, Tensor input, Tensor? weight, "
        "Tensor? running_mean, Tensor? running_var, Tensor? save_mean, Tensor? save_invstd, "
        "bool train, float eps, bool[3] output_mask) -> (Tensor, Tensor, Tensor)"
    ),
    # Ops run_decompositions() keeps because torch's table has no decomposition for them, seen in
    # exported models: F.normalize / torch.norm, `x << n` / `x >> n`, torch.round(x, decimals=n),
    # adaptive max pooling.
    "aten.linalg_vector_norm.default": (
        "linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, "
        "ScalarType? dtype=None) -> Tensor"
    ),
    "aten.__lshift__.Scalar": "__lshift__.Scalar(Tensor self, Scalar other) -> Tensor",
    "aten.__lshift__.Tensor": "__lshift__.Tensor(Tensor self, Tensor other) -> Tensor",
    "aten.__rshift__.Scalar": "__rshift__.Scalar(Tensor self, Scalar other) -> Tensor",
    "aten.__rshift__.Tensor": "__rshift__.Tensor(Tensor self, Tensor other) -> Tensor",
    "aten.round.decimals": "round.decimals(Tensor self, *, int decimals) -> Tensor",
    # Elementwise math and a scan (prims of their own, or a signbit select for copysign).
    "aten.hypot.default": "hypot(Tensor self, Tensor other) -> Tensor",
    "aten.copysign.Tensor": "copysign.Tensor(Tensor self, Tensor other) -> Tensor",
    "aten.copysign.Scalar": "copysign.Scalar(Tensor self, Scalar other) -> Tensor",
    "aten.nextafter.default": "nextafter(Tensor self, Tensor other) -> Tensor",
    "aten.erfinv.default": "erfinv(Tensor self) -> Tensor",
    "aten.lgamma.default": "lgamma(Tensor self) -> Tensor",
    "aten.digamma.default": "digamma(Tensor self) -> Tensor",
    "aten.i0.default": "i0(Tensor self) -> Tensor",
    "aten.cumprod.default": "cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor",
    # Complex FFTs (torch.fft.fft/ifft of a complex tensor, fft2/fftn/ifftn/hfft2/ihfftn of any),
    # the conjugates ifft/hfft/ihfft of a real signal take, and `.real`/`.imag` of a complex
    # result (view_as_real, then a select).
    "aten._fft_c2c.default": (
        "_fft_c2c(Tensor self, SymInt[] dim, int normalization, bool forward) -> Tensor"
    ),
    "aten._conj.default": "_conj(Tensor(a) self) -> Tensor(a)",
    "aten._conj_physical.default": "_conj_physical(Tensor self) -> Tensor",
    "aten.view_as_real.default": "view_as_real(Tensor(a) self) -> Tensor(a)",
    # Complex numbers built from real parts (the prims.complex extension): view_as_complex
    # (a spectral filter's complex weights, rotary embeddings' pairs of reals), torch.complex
    # and torch.polar.
    "aten.view_as_complex.default": "view_as_complex(Tensor(a) self) -> Tensor(a)",
    "aten.complex.default": "complex(Tensor real, Tensor imag) -> Tensor",
    "aten.polar.default": "polar(Tensor abs, Tensor angle) -> Tensor",
    # The phase of a spectrum (torch.angle), beside the magnitude's abs.
    "aten.angle.default": "angle(Tensor self) -> Tensor",
    # torch.fft.fftfreq / rfftfreq: the sample frequencies of a transform.
    "aten.fft_fftfreq.default": (
        "fft_fftfreq(int n, float d=1., *, ScalarType? dtype=None, Layout? layout=None, "
        "Device? device=None, bool? pin_memory=None) -> Tensor"
    ),
    "aten.fft_rfftfreq.default": (
        "fft_rfftfreq(int n, float d=1., *, ScalarType? dtype=None, Layout? layout=None, "
        "Device? device=None, bool? pin_memory=None) -> Tensor"
    ),
    # torch.masked_select: a data-dependent number of elements, like x[mask].
    "aten.masked_select.default": "masked_select(Tensor self, Tensor mask) -> Tensor",
    # torch.sort(x, stable=True) (our sort is always stable).
    "aten.sort.stable": (
        "sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) "
        "-> (Tensor values, Tensor indices)"
    ),
    # torch.unique / unique_consecutive: as many results as distinct values or slices (runs),
    # a data-dependent size.
    "aten._unique2.default": (
        "_unique2(Tensor self, bool sorted=True, bool return_inverse=False, "
        "bool return_counts=False) -> (Tensor, Tensor, Tensor)"
    ),
    "aten.unique_dim.default": (
        "unique_dim(Tensor self, int dim, bool sorted=True, bool return_inverse=False, "
        "bool return_counts=False) -> (Tensor, Tensor, Tensor)"
    ),
    "aten.unique_consecutive.default": (
        "unique_consecutive(Tensor self, bool return_inverse=False, bool return_counts=False, "
        "int? dim=None) -> (Tensor, Tensor, Tensor)"
    ),
    # nn.AdaptiveMaxPool1d/2d/3d (1d runs through 2d).
    "aten.adaptive_max_pool2d.default": "adaptive_max_pool2d(Tensor self, int[2] output_size) -> (Tensor, Tensor)",
    "aten.adaptive_max_pool3d.default": "adaptive_max_pool3d(Tensor self, int[3] output_size) -> (Tensor, Tensor)",
    # Ops of common modules and functions that run_decompositions() keeps (found by exporting
    # them): embedding bags without gradient, torch.var_mean, scans, binary searches, order
    # statistics, triangle indices, nn.Bilinear.
    "aten._embedding_bag_forward_only.default": (
        "_embedding_bag_forward_only(Tensor weight, Tensor indices, Tensor offsets, "
        "bool scale_grad_by_freq=False, int mode=0, bool sparse=False, "
        "Tensor? per_sample_weights=None, bool include_last_offset=False, int padding_idx=-1) "
        "-> (Tensor, Tensor, Tensor, Tensor)"
    ),
    "aten.var_mean.correction": (
        "var_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, "
        "bool keepdim=False) -> (Tensor, Tensor)"
    ),
    "aten.logcumsumexp.default": "logcumsumexp(Tensor self, int dim) -> Tensor",
    "aten.cummax.default": "cummax(Tensor self, int dim) -> (Tensor values, Tensor indices)",
    "aten.cummin.default": "cummin(Tensor self, int dim) -> (Tensor values, Tensor indices)",
    "aten.searchsorted.Tensor": (
        "searchsorted.Tensor(Tensor sorted_sequence, Tensor self, *, bool out_int32=False, "
        "bool right=False, str? side=None, Tensor? sorter=None) -> Tensor"
    ),
    "aten.searchsorted.Scalar": (
        "searchsorted.Scalar(Tensor sorted_sequence, Scalar self, *, bool out_int32=False, "
        "bool right=False, str? side=None, Tensor? sorter=None) -> Tensor"
    ),
    "aten.bucketize.Tensor": (
        "bucketize.Tensor(Tensor self, Tensor boundaries, *, bool out_int32=False, "
        "bool right=False) -> Tensor"
    ),
    "aten.bucketize.Scalar": (
        "bucketize.Scalar(Scalar self, Tensor boundaries, *, bool out_int32=False, "
        "bool right=False) -> Tensor"
    ),
    "aten.median.default": "median(Tensor self) -> Tensor",
    "aten.median.dim": (
        "median.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"
    ),
    "aten.nanmedian.default": "nanmedian(Tensor self) -> Tensor",
    "aten.nanmedian.dim": (
        "nanmedian.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"
    ),
    "aten.kthvalue.default": (
        "kthvalue(Tensor self, SymInt k, int dim=-1, bool keepdim=False) "
        "-> (Tensor values, Tensor indices)"
    ),
    "aten.mode.default": (
        "mode(Tensor self, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)"
    ),
    "aten.tril_indices.default": (
        "tril_indices(int row, int col, int offset=0, *, ScalarType? dtype=4, "
        "Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"
    ),
    "aten.triu_indices.default": (
        "triu_indices(int row, int col, int offset=0, *, ScalarType? dtype=4, "
        "Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"
    ),
    "aten._trilinear.default": (
        "_trilinear(Tensor i1, Tensor i2, Tensor i3, int[] expand1, int[] expand2, "
        "int[] expand3, int[] sumdim, int unroll_dim=1) -> Tensor"
    ),
    # Training-mode dropout of channels (Dropout1d/2d/3d, AlphaDropout, FeatureAlphaDropout):
    # a Bernoulli mask drawn into a tensor made by empty_permuted.
    "aten.bernoulli.p": "bernoulli.p(Tensor self, float p, *, Generator? generator=None) -> Tensor",
    "aten.empty_permuted.default": (
        "empty_permuted(SymInt[] size, int[] physical_layout, *, ScalarType? dtype=None, "
        "Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"
    ),
    # F.native_channel_shuffle, F.conv_tbc, F.gumbel_softmax's exponential draws.
    "aten.native_channel_shuffle.default": (
        "native_channel_shuffle(Tensor self, SymInt groups) -> Tensor"
    ),
    "aten.conv_tbc.default": "conv_tbc(Tensor self, Tensor weight, Tensor bias, int pad=0) -> Tensor",
    "aten.exponential.default": (
        "exponential(Tensor self, float lambd=1., *, Generator? generator=None) -> Tensor"
    ),
    # Random draws run_decompositions() keeps (no decomposition in torch's table): noise like a
    # tensor (a VAE's `randn_like(std)`, diffusion noise, random masks), random integers,
    # torch.normal's four forms, `tensor.normal_()` and `tensor.uniform_(a, b)` (the latter on an
    # empty_permuted tensor).
    "aten.rand_like.default": (
        "rand_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, "
        "Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"
    ),
    "aten.randn_like.default": (
        "randn_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, "
        "Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"
    ),
    "aten.randint_like.default": (
        "randint_like(Tensor self, SymInt high, *, ScalarType? dtype=None, Layout? layout=None, "
        "Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"
    ),
    "aten.randint_like.low_dtype": (
        "randint_like.low_dtype(Tensor self, SymInt low, SymInt high, *, "
        "ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
        "bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"
    ),
    "aten.randint.default": (
        "randint(SymInt high, SymInt[] size, *, ScalarType? dtype=4, Layout? layout=None, "
        "Device? device=None, bool? pin_memory=None) -> Tensor"
    ),
    "aten.randint.low": (
        "randint.low(SymInt low, SymInt high, SymInt[] size, *, ScalarType? dtype=4, "
        "Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"
    ),
    "aten.normal.Tensor_float": (
        "normal.Tensor_float(Tensor mean, float std=1., *, Generator? generator=None) -> Tensor"
    ),
    "aten.normal.float_Tensor": (
        "normal.float_Tensor(float mean, Tensor std, *, Generator? generator=None) -> Tensor"
    ),
    "aten.normal.Tensor_Tensor": (
        "normal.Tensor_Tensor(Tensor mean, Tensor std, *, Generator? generator=None) -> Tensor"
    ),
    "aten.normal.float_float": (
        "normal.float_float(float mean, float std, SymInt[] size, *, Generator? generator=None, "
        "ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
        "bool? pin_memory=None) -> Tensor"
    ),
    "aten.normal_functional.default": (
        "normal_functional(Tensor self, float mean=0., float std=1., *, "
        "Generator? generator=None) -> Tensor"
    ),
    "aten.uniform.default": (
        "uniform(Tensor self, float from=0., float to=1., *, Generator? generator=None) -> Tensor"
    ),
    # tensor.log_normal_(), cauchy_(), geometric_() and random_() drawn into an empty_permuted
    # tensor.
    "aten.log_normal.default": (
        "log_normal(Tensor self, float mean=1., float std=2., *, Generator? generator=None) "
        "-> Tensor"
    ),
    "aten.cauchy.default": (
        "cauchy(Tensor self, float median=0., float sigma=1., *, Generator? generator=None) "
        "-> Tensor"
    ),
    "aten.geometric.default": (
        "geometric(Tensor self, float p, *, Generator? generator=None) -> Tensor"
    ),
    "aten.random.to": "random.to(Tensor self, int to, *, Generator? generator=None) -> Tensor",
    "aten.random.from": (
        "random.from(Tensor self, int from, int? to, *, Generator? generator=None) -> Tensor"
    ),
    "aten.random.default": "random(Tensor self, *, Generator? generator=None) -> Tensor",
    # torch.multinomial (sampling tokens, weighted sampling of indices).
    "aten.multinomial.default": (
        "multinomial(Tensor self, SymInt num_samples, bool replacement=False, *, "
        "Generator? generator=None) -> Tensor"
    ),
    # nn.FractionalMaxPool2d/3d: deterministic given the random samples the graph draws.
    "aten.fractional_max_pool2d.default": (
        "fractional_max_pool2d(Tensor self, int[2] kernel_size, int[2] output_size, "
        "Tensor random_samples) -> (Tensor, Tensor)"
    ),
    "aten.fractional_max_pool3d.default": (
        "fractional_max_pool3d(Tensor self, int[3] kernel_size, int[3] output_size, "
        "Tensor random_samples) -> (Tensor, Tensor)"
    ),
    # F.rrelu / nn.RReLU: the functional form of rrelu_with_noise, returning the noise it drew.
    "aten.rrelu_with_noise_functional.default": (
        "rrelu_with_noise_functional(Tensor self, Tensor noise, Scalar lower=0.125, "
        "Scalar upper=0.33333333333333331, bool training=False, Generator? generator=None) "
        "-> (Tensor, Tensor noise_out)"
    ),
}

# Integer arithmetic on sizes: graphs exported with dynamic shapes compute sizes with Python's
# operators (`x.shape[0] * 2`), which the importers read as these overloads (torch's own int
# overloads of the same names). Their rules compute on sizes and emit no prims.
SIZE_ATEN_SCHEMAS: dict[str, str] = {
    "aten.add.int": "add.int(int a, int b) -> int",
    "aten.sub.int": "sub.int(int a, int b) -> int",
    "aten.mul.int": "mul.int(int a, int b) -> int",
    "aten.floordiv.int": "floordiv.int(int a, int b) -> int",
    "aten.remainder.int": "remainder.int(int a, int b) -> int",
    "aten.neg.int": "neg.int(int a) -> int",
    "aten.eq.int": "eq.int(int a, int b) -> bool",
    "aten.ne.int": "ne.int(int a, int b) -> bool",
    "aten.lt.int": "lt.int(int a, int b) -> bool",
    "aten.le.int": "le.int(int a, int b) -> bool",
    "aten.gt.int": "gt.int(int a, int b) -> bool",
    "aten.ge.int": "ge.int(int a, int b) -> bool",
    # torch._check(cond) on sizes: an assertion the lowering takes as a fact, checked at run time.
    "aten._assert_scalar.default": "_assert_scalar(Scalar self, str assert_msg) -> ()",
    # Arithmetic on the floats computed from sizes (`x.shape[2] * 1.5`, `h / w`,
    # `torch.sym_float(n)`, `math.trunc(f)`): torch's own scalar overloads of these names.
    **{
        f"aten.{name}.{suffix}": f"{name}.{suffix}({a} a, {b} b) -> float"
        for name in ("add", "sub", "mul", "pow")
        for suffix, a, b in (
            ("float", "float", "float"),
            ("int_float", "int", "float"),
            ("float_int", "float", "int"),
        )
    },
    "aten.div.float": "div.float(float a, float b) -> float",  # torch has no mixed div
    "aten.div.int": "div.int(int a, int b) -> float",
    "aten.neg.float": "neg.float(float a) -> float",
    "aten.Float.int": "Float.int(int a) -> float",
    "aten.Int.float": "Int.float(float a) -> int",
    "aten.floor.float": "floor.float(float a) -> int",
    "aten.ceil.float": "ceil.float(float a) -> int",
}

# Output-less nodes the importers keep: a fact about sizes (`_assert_scalar`), or a condition on
# data checked at run time (`_assert_async`).
KEPT_CHECKS: frozenset[str] = frozenset(
    {"aten._assert_scalar.default", "aten._assert_async.default", "aten._assert_async.msg"}
)

# What the importers read Python's operators on sizes (`_operator.mul` targets) as.
SIZE_OPERATORS: dict[str, str] = {
    "add": "aten.add.int",
    "sub": "aten.sub.int",
    "mul": "aten.mul.int",
    "floordiv": "aten.floordiv.int",
    "mod": "aten.remainder.int",
    "neg": "aten.neg.int",
    "eq": "aten.eq.int",
    "ne": "aten.ne.int",
    "lt": "aten.lt.int",
    "le": "aten.le.int",
    "gt": "aten.gt.int",
    "ge": "aten.ge.int",
}

# Python's operators, `torch.sym_*` and `math.*` on sizes and on the floats computed from them,
# as torch.export.save names the targets: what the importers read each as, chosen by the kinds
# of its operands (torch's own overloads: `aten.mul.int`, `aten.mul.int_float`, ...).
SCALAR_TARGETS: frozenset[str] = frozenset(
    {f"_operator.{name}" for name in SIZE_OPERATORS}
    | {"_operator.truediv", "_operator.pow", "torch.sym_float", "torch.sym_int"}
    | {"math.trunc", "math.floor", "math.ceil"}
)
_FLOAT_ARITHMETIC = {"add": "add", "sub": "sub", "mul": "mul", "pow": "pow"}
_FLOAT_SUFFIXES: dict[tuple[bool, ...], str] = {
    (True, True): "float",
    (False, True): "int_float",
    (True, False): "float_int",
}
_FROM_FLOAT = {
    "torch.sym_int": "aten.Int.float",  # truncates, as int() of a float
    "math.trunc": "aten.Int.float",
    "math.floor": "aten.floor.float",
    "math.ceil": "aten.ceil.float",
}


def scalar_operator(target: str, kinds: tuple[type, ...]) -> str | None:
    """The aten overload a scalar target (`_operator.mul`, `torch.sym_float`, ...; one of
    SCALAR_TARGETS) reads as, given its operands' kinds (int or float; a bool counts as an int),
    or None when torch has no such overload (a comparison of floats, `pow` of two ints)."""
    module, _, name = target.rpartition(".")
    floats = tuple(kind is float for kind in kinds)
    if module == "_operator":
        if not any(floats):
            if name == "truediv" and len(kinds) == 2:
                return "aten.div.int"
            return SIZE_OPERATORS.get(name)
        if name == "neg" and floats == (True,):
            return "aten.neg.float"
        if name == "truediv" and len(kinds) == 2:  # an int operand reads as a float
            return "aten.div.float"
        if name in _FLOAT_ARITHMETIC and len(kinds) == 2:
            return f"aten.{_FLOAT_ARITHMETIC[name]}.{_FLOAT_SUFFIXES[floats]}"
        return None
    if target == "torch.sym_float" and floats == (False,):
        return "aten.Float.int"
    if floats == (True,):
        return _FROM_FLOAT.get(target)
    return None


# The extra overloads that compute something (the others are checks, with no results).
EXTRA_COMPUTING_OPS: frozenset[str] = frozenset(
    op for op, schema in EXTRA_ATEN_SCHEMAS.items() if parse_schema(schema).returns
)


@cache
def aten_schema(op: str) -> Schema | None:
    """The parsed schema of an aten overload, or None when it is not known."""
    entry = CORE_ATEN_OPS.get(op)
    text = entry[1] if entry is not None else EXTRA_ATEN_SCHEMAS.get(op, SIZE_ATEN_SCHEMAS.get(op))
    return parse_schema(text) if text is not None else None


def core_aten_family(op: str) -> str | None:
    entry = CORE_ATEN_OPS.get(op)
    return entry[0] if entry is not None else None
