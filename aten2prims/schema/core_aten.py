"""The 194 Core ATen overloads aten2prims lowers: torch 2.13's `core`-tagged overloads plus
`aten.native_batch_norm.default`, with their function schemas (docs/coverage.md lists them by family).

Families: E = elementwise/comparison/reduction, S = shape/view/indexing/creation/random/sort/metadata,
N = linear algebra/convolution/pooling/normalization/resampling/embedding/fft/backward.
"""

from __future__ import annotations

# overload -> (family, schema)
CORE_ATEN_OPS: dict[str, tuple[str, str]] = {
    "aten._local_scalar_dense.default": ("E", "_local_scalar_dense(Tensor self) -> Scalar"),
    "aten._log_softmax.default": (
        "E",
        "_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor",
    ),
    "aten._softmax.default": ("E", "_softmax(Tensor self, int dim, bool half_to_float) -> Tensor"),
    "aten._to_copy.default": (
        "E",
        "_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, bool non_blocking=False, MemoryFormat? memory_format=None) -> Tensor",
    ),
    "aten.abs.default": ("E", "abs(Tensor self) -> Tensor"),
    "aten.acos.default": ("E", "acos(Tensor self) -> Tensor"),
    "aten.acosh.default": ("E", "acosh(Tensor self) -> Tensor"),
    "aten.add.Tensor": ("E", "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"),
    "aten.add.Scalar": ("E", "add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor"),
    "aten.alias.default": ("E", "alias(Tensor(a) self) -> Tensor(a)"),
    "aten.amax.default": ("E", "amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor"),
    "aten.amin.default": ("E", "amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor"),
    "aten.any.default": ("E", "any(Tensor self) -> Tensor"),
    "aten.any.dim": ("E", "any.dim(Tensor self, int dim, bool keepdim=False) -> Tensor"),
    "aten.any.dims": ("E", "any.dims(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor"),
    "aten.argmax.default": (
        "E",
        "argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
    ),
    "aten.argmin.default": (
        "E",
        "argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
    ),
    "aten.asin.default": ("E", "asin(Tensor self) -> Tensor"),
    "aten.asinh.default": ("E", "asinh(Tensor self) -> Tensor"),
    "aten.atan.default": ("E", "atan(Tensor self) -> Tensor"),
    "aten.atan2.default": ("E", "atan2(Tensor self, Tensor other) -> Tensor"),
    "aten.atan2.out": (
        "E",
        "atan2.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    "aten.atanh.default": ("E", "atanh(Tensor self) -> Tensor"),
    "aten.bitwise_and.Tensor": ("E", "bitwise_and.Tensor(Tensor self, Tensor other) -> Tensor"),
    "aten.bitwise_and.Scalar": ("E", "bitwise_and.Scalar(Tensor self, Scalar other) -> Tensor"),
    "aten.bitwise_not.default": ("E", "bitwise_not(Tensor self) -> Tensor"),
    "aten.bitwise_or.Tensor": ("E", "bitwise_or.Tensor(Tensor self, Tensor other) -> Tensor"),
    "aten.bitwise_or.Scalar": ("E", "bitwise_or.Scalar(Tensor self, Scalar other) -> Tensor"),
    "aten.bitwise_xor.Tensor": ("E", "bitwise_xor.Tensor(Tensor self, Tensor other) -> Tensor"),
    "aten.bitwise_xor.Scalar": ("E", "bitwise_xor.Scalar(Tensor self, Scalar other) -> Tensor"),
    "aten.ceil.default": ("E", "ceil(Tensor self) -> Tensor"),
    "aten.clamp.default": ("E", "clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor"),
    "aten.clamp.Tensor": (
        "E",
        "clamp.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor",
    ),
    "aten.clone.default": (
        "E",
        "clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor",
    ),
    "aten.copy.default": ("E", "copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor"),
    "aten.cos.default": ("E", "cos(Tensor self) -> Tensor"),
    "aten.cosh.default": ("E", "cosh(Tensor self) -> Tensor"),
    "aten.cumsum.default": (
        "E",
        "cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor",
    ),
    "aten.div.Tensor": ("E", "div.Tensor(Tensor self, Tensor other) -> Tensor"),
    "aten.div.Scalar": ("E", "div.Scalar(Tensor self, Scalar other) -> Tensor"),
    "aten.div.Tensor_mode": (
        "E",
        "div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor",
    ),
    "aten.div.Scalar_mode": (
        "E",
        "div.Scalar_mode(Tensor self, Scalar other, *, str? rounding_mode) -> Tensor",
    ),
    "aten.elu.default": (
        "E",
        "elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor",
    ),
    "aten.eq.Tensor": ("E", "eq.Tensor(Tensor self, Tensor other) -> Tensor"),
    "aten.eq.Scalar": ("E", "eq.Scalar(Tensor self, Scalar other) -> Tensor"),
    "aten.erf.default": ("E", "erf(Tensor self) -> Tensor"),
    "aten.exp.default": ("E", "exp(Tensor self) -> Tensor"),
    "aten.expm1.default": ("E", "expm1(Tensor self) -> Tensor"),
    "aten.fill.Scalar": ("E", "fill.Scalar(Tensor self, Scalar value) -> Tensor"),
    "aten.floor.default": ("E", "floor(Tensor self) -> Tensor"),
    "aten.fmod.Tensor": ("E", "fmod.Tensor(Tensor self, Tensor other) -> Tensor"),
    "aten.fmod.Scalar": ("E", "fmod.Scalar(Tensor self, Scalar other) -> Tensor"),
    "aten.ge.Tensor": ("E", "ge.Tensor(Tensor self, Tensor other) -> Tensor"),
    "aten.ge.Scalar": ("E", "ge.Scalar(Tensor self, Scalar other) -> Tensor"),
    "aten.gelu.default": ("E", 'gelu(Tensor self, *, str approximate="none") -> Tensor'),
    "aten.gt.Tensor": ("E", "gt.Tensor(Tensor self, Tensor other) -> Tensor"),
    "aten.gt.Scalar": ("E", "gt.Scalar(Tensor self, Scalar other) -> Tensor"),
    "aten.hardtanh.default": (
        "E",
        "hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor",
    ),
    "aten.isinf.default": ("E", "isinf(Tensor self) -> Tensor"),
    "aten.isnan.default": ("E", "isnan(Tensor self) -> Tensor"),
    "aten.le.Tensor": ("E", "le.Tensor(Tensor self, Tensor other) -> Tensor"),
    "aten.le.Scalar": ("E", "le.Scalar(Tensor self, Scalar other) -> Tensor"),
    "aten.leaky_relu.default": (
        "E",
        "leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor",
    ),
    "aten.log.default": ("E", "log(Tensor self) -> Tensor"),
    "aten.log10.default": ("E", "log10(Tensor self) -> Tensor"),
    "aten.log1p.default": ("E", "log1p(Tensor self) -> Tensor"),
    "aten.log2.default": ("E", "log2(Tensor self) -> Tensor"),
    "aten.logical_and.default": ("E", "logical_and(Tensor self, Tensor other) -> Tensor"),
    "aten.logical_not.default": ("E", "logical_not(Tensor self) -> Tensor"),
    "aten.logical_or.default": ("E", "logical_or(Tensor self, Tensor other) -> Tensor"),
    "aten.logical_xor.default": ("E", "logical_xor(Tensor self, Tensor other) -> Tensor"),
    "aten.lt.Tensor": ("E", "lt.Tensor(Tensor self, Tensor other) -> Tensor"),
    "aten.lt.Scalar": ("E", "lt.Scalar(Tensor self, Scalar other) -> Tensor"),
    "aten.max.dim": (
        "E",
        "max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
    ),
    "aten.maximum.default": ("E", "maximum(Tensor self, Tensor other) -> Tensor"),
    "aten.mean.default": ("E", "mean(Tensor self, *, ScalarType? dtype=None) -> Tensor"),
    "aten.mean.dim": (
        "E",
        "mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
    ),
    "aten.min.dim": (
        "E",
        "min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
    ),
    "aten.minimum.default": ("E", "minimum(Tensor self, Tensor other) -> Tensor"),
    "aten.mul.Tensor": ("E", "mul.Tensor(Tensor self, Tensor other) -> Tensor"),
    "aten.mul.Scalar": ("E", "mul.Scalar(Tensor self, Scalar other) -> Tensor"),
    "aten.ne.Tensor": ("E", "ne.Tensor(Tensor self, Tensor other) -> Tensor"),
    "aten.ne.Scalar": ("E", "ne.Scalar(Tensor self, Scalar other) -> Tensor"),
    "aten.neg.default": ("E", "neg(Tensor self) -> Tensor"),
    "aten.pow.Tensor_Tensor": ("E", "pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor"),
    "aten.pow.Tensor_Scalar": ("E", "pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor"),
    "aten.pow.Scalar": ("E", "pow.Scalar(Scalar self, Tensor exponent) -> Tensor"),
    "aten.prod.default": ("E", "prod(Tensor self, *, ScalarType? dtype=None) -> Tensor"),
    "aten.prod.dim_int": (
        "E",
        "prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
    ),
    "aten.reciprocal.default": ("E", "reciprocal(Tensor self) -> Tensor"),
    "aten.relu.default": ("E", "relu(Tensor self) -> Tensor"),
    "aten.remainder.Tensor": ("E", "remainder.Tensor(Tensor self, Tensor other) -> Tensor"),
    "aten.remainder.Scalar": ("E", "remainder.Scalar(Tensor self, Scalar other) -> Tensor"),
    "aten.round.default": ("E", "round(Tensor self) -> Tensor"),
    "aten.rsqrt.default": ("E", "rsqrt(Tensor self) -> Tensor"),
    "aten.scalar_tensor.default": (
        "E",
        "scalar_tensor(Scalar s, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
    ),
    "aten.sigmoid.default": ("E", "sigmoid(Tensor self) -> Tensor"),
    "aten.sign.default": ("E", "sign(Tensor self) -> Tensor"),
    "aten.sin.default": ("E", "sin(Tensor self) -> Tensor"),
    "aten.sinh.default": ("E", "sinh(Tensor self) -> Tensor"),
    "aten.sqrt.default": ("E", "sqrt(Tensor self) -> Tensor"),
    "aten.sub.Tensor": ("E", "sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"),
    "aten.sub.Scalar": ("E", "sub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor"),
    "aten.sum.dim_IntList": (
        "E",
        "sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
    ),
    "aten.tan.default": ("E", "tan(Tensor self) -> Tensor"),
    "aten.tanh.default": ("E", "tanh(Tensor self) -> Tensor"),
    "aten.trunc.default": ("E", "trunc(Tensor self) -> Tensor"),
    "aten.var.dim": (
        "E",
        "var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor",
    ),
    "aten.var.correction": (
        "E",
        "var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor",
    ),
    "aten.where.self": ("E", "where.self(Tensor condition, Tensor self, Tensor other) -> Tensor"),
    "aten.arange.start_step": (
        "S",
        "arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
    ),
    "aten.as_strided.default": (
        "S",
        "as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor(a)",
    ),
    "aten.cat.default": ("S", "cat(Tensor[] tensors, int dim=0) -> Tensor"),
    "aten.constant_pad_nd.default": (
        "S",
        "constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor",
    ),
    "aten.diagonal.default": (
        "S",
        "diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)",
    ),
    "aten.embedding.default": (
        "S",
        "embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor",
    ),
    "aten.empty.memory_format": (
        "S",
        "empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
    ),
    "aten.empty_strided.default": (
        "S",
        "empty_strided(SymInt[] size, SymInt[] stride, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
    ),
    "aten.expand.default": (
        "S",
        "expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)",
    ),
    "aten.flip.default": ("S", "flip(Tensor self, int[] dims) -> Tensor"),
    "aten.full.default": (
        "S",
        "full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
    ),
    "aten.full_like.default": (
        "S",
        "full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
    ),
    "aten.gather.default": (
        "S",
        "gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor",
    ),
    "aten.index.Tensor": ("S", "index.Tensor(Tensor self, Tensor?[] indices) -> Tensor"),
    "aten.index_put.default": (
        "S",
        "index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor",
    ),
    "aten.index_select.default": (
        "S",
        "index_select(Tensor self, int dim, Tensor index) -> Tensor",
    ),
    "aten.masked_scatter.default": (
        "S",
        "masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor",
    ),
    "aten.native_dropout.default": (
        "S",
        "native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)",
    ),
    "aten.nonzero.default": ("S", "nonzero(Tensor self) -> Tensor"),
    "aten.permute.default": ("S", "permute(Tensor(a) self, int[] dims) -> Tensor(a)"),
    "aten.rand.default": (
        "S",
        "rand(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
    ),
    "aten.randn.default": (
        "S",
        "randn(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
    ),
    "aten.randperm.default": (
        "S",
        "randperm(SymInt n, *, ScalarType? dtype=4, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
    ),
    "aten.reflection_pad1d.default": (
        "S",
        "reflection_pad1d(Tensor self, SymInt[2] padding) -> Tensor",
    ),
    "aten.reflection_pad2d.default": (
        "S",
        "reflection_pad2d(Tensor self, SymInt[4] padding) -> Tensor",
    ),
    "aten.reflection_pad3d.default": (
        "S",
        "reflection_pad3d(Tensor self, SymInt[6] padding) -> Tensor",
    ),
    "aten.repeat.default": ("S", "repeat(Tensor self, SymInt[] repeats) -> Tensor"),
    "aten.replication_pad2d.default": (
        "S",
        "replication_pad2d(Tensor self, SymInt[4] padding) -> Tensor",
    ),
    "aten.replication_pad3d.default": (
        "S",
        "replication_pad3d(Tensor self, SymInt[6] padding) -> Tensor",
    ),
    "aten.resize_.default": (
        "S",
        "resize_(Tensor(a!) self, SymInt[] size, *, MemoryFormat? memory_format=None) -> Tensor(a!)",
    ),
    "aten.scatter.value": (
        "S",
        "scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor",
    ),
    "aten.scatter.src": (
        "S",
        "scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor",
    ),
    "aten.scatter_add.default": (
        "S",
        "scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor",
    ),
    "aten.scatter_reduce.two": (
        "S",
        "scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True) -> Tensor",
    ),
    "aten.select.int": ("S", "select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)"),
    "aten.select_scatter.default": (
        "S",
        "select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor",
    ),
    "aten.slice.Tensor": (
        "S",
        "slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)",
    ),
    "aten.slice_scatter.default": (
        "S",
        "slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor",
    ),
    "aten.sort.default": (
        "S",
        "sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)",
    ),
    "aten.split_with_sizes.default": (
        "S",
        "split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]",
    ),
    "aten.squeeze.dim": ("S", "squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)"),
    "aten.squeeze.dims": ("S", "squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)"),
    "aten.sym_is_contiguous.default": (
        "S",
        "sym_is_contiguous(Tensor self, MemoryFormat memory_format=0) -> SymBool",
    ),
    "aten.sym_numel.default": ("S", "sym_numel(Tensor self) -> SymInt"),
    "aten.sym_size.int": ("S", "sym_size.int(Tensor self, int dim) -> SymInt"),
    "aten.sym_storage_offset.default": ("S", "sym_storage_offset(Tensor self) -> SymInt"),
    "aten.sym_stride.int": ("S", "sym_stride.int(Tensor self, int dim) -> SymInt"),
    "aten.topk.default": (
        "S",
        "topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)",
    ),
    "aten.unsqueeze.default": ("S", "unsqueeze(Tensor(a) self, int dim) -> Tensor(a)"),
    "aten.view.default": ("S", "view(Tensor(a) self, SymInt[] size) -> Tensor(a)"),
    "aten._adaptive_avg_pool2d.default": (
        "N",
        "_adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor",
    ),
    "aten._adaptive_avg_pool2d_backward.default": (
        "N",
        "_adaptive_avg_pool2d_backward(Tensor grad_output, Tensor self) -> Tensor",
    ),
    "aten._adaptive_avg_pool3d.default": (
        "N",
        "_adaptive_avg_pool3d(Tensor self, SymInt[3] output_size) -> Tensor",
    ),
    "aten._cdist_forward.default": (
        "N",
        "_cdist_forward(Tensor x1, Tensor x2, float p, int? compute_mode) -> Tensor",
    ),
    "aten._embedding_bag.default": (
        "N",
        "_embedding_bag(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False, int mode=0, bool sparse=False, Tensor? per_sample_weights=None, bool include_last_offset=False, int padding_idx=-1) -> (Tensor, Tensor, Tensor, Tensor)",
    ),
    "aten._fft_c2r.default": (
        "N",
        "_fft_c2r(Tensor self, int[] dim, int normalization, SymInt last_dim_size) -> Tensor",
    ),
    "aten._fft_r2c.default": (
        "N",
        "_fft_r2c(Tensor self, int[] dim, int normalization, bool onesided) -> Tensor",
    ),
    "aten._native_batch_norm_legit.default": (
        "N",
        "_native_batch_norm_legit(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!) running_mean, Tensor(b!) running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)",
    ),
    "aten._native_batch_norm_legit.no_stats": (
        "N",
        "_native_batch_norm_legit.no_stats(Tensor input, Tensor? weight, Tensor? bias, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)",
    ),
    "aten._native_batch_norm_legit_no_training.default": (
        "N",
        "_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, Tensor running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor)",
    ),
    "aten._pdist_forward.default": ("N", "_pdist_forward(Tensor self, float p=2.) -> Tensor"),
    "aten.adaptive_avg_pool1d.default": (
        "N",
        "adaptive_avg_pool1d(Tensor self, int[1] output_size) -> Tensor",
    ),
    "aten.addmm.default": (
        "N",
        "addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
    ),
    "aten.avg_pool1d.default": (
        "N",
        "avg_pool1d(Tensor self, int[1] kernel_size, int[1] stride=[], int[1] padding=[0], bool ceil_mode=False, bool count_include_pad=True) -> Tensor",
    ),
    "aten.avg_pool2d.default": (
        "N",
        "avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor",
    ),
    "aten.avg_pool2d_backward.default": (
        "N",
        "avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor",
    ),
    "aten.avg_pool3d.default": (
        "N",
        "avg_pool3d(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor",
    ),
    "aten.bmm.default": ("N", "bmm(Tensor self, Tensor mat2) -> Tensor"),
    "aten.col2im.default": (
        "N",
        "col2im(Tensor self, SymInt[2] output_size, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride) -> Tensor",
    ),
    "aten.convolution.default": (
        "N",
        "convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor",
    ),
    "aten.convolution_backward.default": (
        "N",
        "convolution_backward(Tensor grad_output, Tensor input, Tensor weight, SymInt[]? bias_sizes, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
    ),
    "aten.embedding_dense_backward.default": (
        "N",
        "embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, SymInt padding_idx, bool scale_grad_by_freq) -> Tensor",
    ),
    "aten.grid_sampler_2d.default": (
        "N",
        "grid_sampler_2d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners) -> Tensor",
    ),
    "aten.max_pool2d_with_indices.default": (
        "N",
        "max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)",
    ),
    "aten.max_pool2d_with_indices_backward.default": (
        "N",
        "max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) -> Tensor",
    ),
    "aten.max_pool3d_with_indices.default": (
        "N",
        "max_pool3d_with_indices(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, int[3] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)",
    ),
    "aten.mm.default": ("N", "mm(Tensor self, Tensor mat2) -> Tensor"),
    "aten.native_group_norm.default": (
        "N",
        "native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, SymInt HxW, int group, float eps) -> (Tensor, Tensor, Tensor)",
    ),
    "aten.native_group_norm_backward.default": (
        "N",
        "native_group_norm_backward(Tensor grad_out, Tensor input, Tensor mean, Tensor rstd, Tensor? weight, SymInt N, SymInt C, SymInt HxW, int group, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
    ),
    "aten.native_layer_norm.default": (
        "N",
        "native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)",
    ),
    "aten.native_layer_norm_backward.default": (
        "N",
        "native_layer_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape, Tensor mean, Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
    ),
    "aten.upsample_bilinear2d.vec": (
        "N",
        "upsample_bilinear2d.vec(Tensor input, SymInt[]? output_size, bool align_corners, float[]? scale_factors) -> Tensor",
    ),
    "aten.upsample_nearest2d.vec": (
        "N",
        "upsample_nearest2d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor",
    ),
    "aten.native_batch_norm.default": (
        "N",
        "native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)",
    ),
}
