"""Device kernels classed by family: one ordered table, each family with its naming rule, its
class (compute, memory, communication), whether one launch is a whole collective matched
across ranks, and where the rule comes from.

A kernel's family is the first whose rule matches (:func:`classify`): the name (with
``re.search``), or, for Kineto's own activity categories (copies and memsets), the category.
A name no family matches is **unclassified** (``None``), never memory by default, so that a
trace's unknown kernels can be counted and named.

Order matters where names overlap: communication first (NCCL's names hold "Reduce"), helper
kernels of GEMM and convolution libraries before the libraries (``splitKreduce_kernel``
holds "cublas" in its arguments), attention and convolution before GEMM (their kernels are
often implicit GEMMs), Triton's generated kernels before the operations they fuse, and
PyTorch's generic elementwise kernels after the families named by their functor.
"""

from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "FAMILIES",
    "FUSABLE_ELEMENTWISE",
    "Family",
    "classify",
    "families_page",
]

Kind = Literal["compute", "memory", "comm"]


@dataclass(frozen=True, slots=True)
class Family:
    """One family of device kernels."""

    name: str
    rule: re.Pattern[str]
    """Searched in the kernel's name, or matched against its category (:attr:`on`)."""
    kind: Kind
    collective: bool
    """One launch is a whole collective, matched across ranks (NCCL kernels, DeepEP
    dispatch/combine, symmetric-memory all-reduce)."""
    source: str
    """Where the naming rule comes from."""
    on: Literal["name", "category"] = "name"
    fusable: bool = False
    """An elementwise family that a compiler (torch.compile, a fused kernel) could fuse into
    its neighbours: what "if the elementwise kernels were fused" would save."""


def _f(
    name: str,
    pattern: str,
    kind: Kind,
    source: str,
    *,
    collective: bool = False,
    on: Literal["name", "category"] = "name",
    fusable: bool = False,
    flags: int = 0,
) -> Family:
    return Family(name, re.compile(pattern, flags), kind, collective, source, on, fusable)


_I = re.IGNORECASE
_ATEN = "PyTorch aten/src/ATen/native/cuda"

FAMILIES: tuple[Family, ...] = (
    # --- Kineto's own activity categories --------------------------------------------------
    _f("memcpy", r"^(?:gpu_memcpy|Memcpy)$", "memory",
       "Kineto libkineto/src/ActivityType.cpp (gpu_memcpy); PyTorch 1.8 traces: Memcpy",
       on="category"),
    _f("memset", r"^(?:gpu_memset|Memset)$", "memory",
       "Kineto libkineto/src/ActivityType.cpp (gpu_memset); PyTorch 1.8 traces: Memset",
       on="category"),
    # --- communication ----------------------------------------------------------------------
    _f("NCCL/RCCL", r"^(?:void )?nccl\w*Kernel", "comm",
       "NCCL src/device/generate.py names ncclDevKernel_* (ncclKernel_* before 2.19), "
       "src/device/symmetric/generate.py ncclSymDevKernel_*/ncclSymkDevKernel_*; "
       "RCCL (ROCm/rccl) keeps NCCL's names", collective=True),
    _f("MSCCL", r"^(?:void )?mscclKernel_", "comm",
       "MSCCL in RCCL src/include/msccl/msccl_kernel.h: mscclKernel_<redop>_<type>_<proto>",
       collective=True),
    _f("MSCCL++",
       r"\bmscclpp::\w*[Kk]ernel|^(?:void )?(?:allreduce|allgather|reducescatter|broadcast)"
       r"(?:\d+|AllPairs|AllToAll|Nvls\w*)\b", "comm",
       "microsoft/mscclpp apps/nccl/src/allreduce.hpp (allreduce7, allreduce8, "
       "allreduceAllPairs), allgather.hpp, broadcast.hpp", collective=True),
    _f("DeepEP local", r"(?:deep_ep|dpsk::ep)::.*\b(?:get_dispatch_layout|clean_low_latency_buffer|"
       r"\w*mask_buffer|dispatch_copy_epilogue\w*|combine_reduce_epilogue\w*)\b", "memory",
       "deepseek-ai/DeepEP csrc/kernels/legacy/layout.cu, internode_ll.cu, "
       "deep_ep/include/deep_ep/impls/*_epilogue.cuh: kernels on one rank's buffers"),
    _f("DeepEP dispatch/combine",
       r"\bdeep_ep::|\bdpsk::ep::|\buccl::(?:intranode|internode\w*)::|"
       r"\bEp(?:Dispatch|Combine)\w*Kernel",
       "comm", "deepseek-ai/DeepEP csrc/kernels/{intranode,internode,internode_ll}.cu "
       "(notify_dispatch, dispatch, cached_notify_*, combine), deep_ep/include/deep_ep/impls "
       "(dispatch_impl, combine_impl, hybrid_*, barrier_impl); DeepSeek's own build in "
       "deepseek-ai/profile-data (dpsk::ep::internode::*); its ports: UCCL-EP "
       "(uccl::intranode::*), ROCm/mori src/ops/dispatch_combine (EpDispatch*Kernel)",
       collective=True),
    _f("NVSHMEM collective",
       r"\b(?:barrier|sync|sync_all|rdxn|reduce|bcast|broadcast|fcollect|alltoall)"
       r"_on_stream_kernel", "comm",
       "NVSHMEM src/include/internal/non_abi/nvshmemi_h_to_d_coll_defs.cuh "
       "(barrier_on_stream_kernel_threadgroup, ...)", collective=True),
    _f("NVSHMEM", r"\bnvshmemi?_\w+", "comm",
       "NVSHMEM's device functions and proxy kernels (nvshmemi_*), NVIDIA NVSHMEM"),
    _f("torch symmetric memory",
       r"\b(?:multimem|one_shot|two_shot)_\w*?(?:all_reduce|all_gather|reduce_scatter)\w*"
       r"kernel|\b(?:allToAllV(?:_2d)?|exchangeSplitAndOffset(?:_2d)?)\b", "comm",
       "pytorch torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemoryOps.cu "
       "(multimem_all_reduce_kernel, one_shot_/two_shot_all_reduce_kernel), "
       "nvshmem_extension.cu (allToAllV, exchangeSplitAndOffset)", collective=True),
    _f("custom all-reduce",
       r"\bcross_device_reduce_\dstage|\ballreduce_fusion_kernel|\bcustomAllReduce",
       "comm", "vllm-project/vllm csrc/custom_all_reduce.cuh (cross_device_reduce_1stage/"
       "2stage, also in SGLang and ROCm aiter); FlashInfer trtllm_allreduce_fusion",
       collective=True),
    _f("UCC", r"^(?:void )?(?:executor_(?:kernel|start|shutdown_ack)|"
       r"kernel_copy_multi(?:_aligned)?)\b|\bucc_\w+", "comm",
       "openucx/ucc src/components/ec/cuda/kernel/ec_cuda_executor.cu (executor_kernel, "
       "kernel_copy_multi)"),
    # --- helpers of GEMM and convolution libraries (memory-bound) --------------------------
    _f("GEMV / BLAS-1",
       r"gemv|gemmk1_kernel|\bscal_kernel|\baxpy|\bdot_kernel|\bnrm2|\bwvSplitK|\bLLGemm1",
       "memory", "cuBLAS gemv kernels (gemv2T_kernel_val, gemvNSP_kernel, internal::gemvx, "
       "gemmk1: k = 1) and BLAS-1 (scal_kernel); vLLM csrc/rocm/skinny_gemms.cu (wvSplitK, "
       "LLGemm1: N <= 4): about 1 FLOP per byte", flags=_I),
    _f("GEMM helpers",
       r"splitKreduce|ReduceSplitK|epilogue::impl::globalKernel|transpose_readWrite|"
       r"grouped_gemm::\w+::utils::", "memory",
       "cuBLAS splitKreduce_kernel and transpose_readWrite_alignment_kernel, cuBLASLt "
       "epilogue::impl::globalKernel, CUTLASS cutlass/reduction/kernel/reduce_split_k.h; "
       "the setup kernels of a grouped GEMM (tensor maps, transposes)"),
    _f("cuDNN/MIOpen helpers",
       r"nchwToNhwc|nhwcToNchw|compute\w*OffsetsKernel|scalePackedTensor|"
       r"generateWinogradTilesKernel|reduce_wgrad|winograd_nonfused::winograd\w+|\bfft\d?d_|"
       r"flip_filter|pointwise_mult_and_sum_complex|^SubTensorOp\w*", "memory",
       "cuDNN's layout transforms (cudnn::ops::nchwToNhwcKernel), offset tables "
       "(cask_cudnn::computeOffsetsKernel), Winograd and FFT transforms of its FFT and "
       "Winograd convolutions; MIOpen src/kernels/MIOpenSubTensorOp*Kernel.cl"),
    _f("MoE routing/permute",
       r"\bmoe::dev::(?:routing|finalize)|routingIndices|moe_align_block_size|moe_sum|"
       r"topk_softmax|topkGating|count_and_sort_expert|count_expert|get_fused_mapping|"
       r"expand_to_fused|moe_permute|moe_unpermute", "memory",
       "TensorRT-LLM cpp/tensorrt_llm/kernels/trtllmGenKernels/blockScaleMoe (moe::dev::"
       "routing, moe::dev::finalize); vLLM csrc/moe (moe_align_block_size, moe_sum, "
       "topk_softmax); DeepSeek's kernels in deepseek-ai/profile-data (clean_and_count_expert, "
       "get_fused_mapping, expand_to_fused_with_scales)", flags=_I),
    # --- compute ----------------------------------------------------------------------------
    _f("attention",
       r"flash_?(?:fwd|bwd|attn)|\bflash::|pytorch_flash|fmha|\battn|_attn_|attention|"
       r"\bsdpa|paged_?attention|flashinfer::.*(?:Prefill|Decode|Attention|mla)|\bmha_|"
       r"xformers", "compute",
       "FlashAttention (flash::/pytorch_flash::flash_fwd_kernel), xFormers and PyTorch "
       "mem-efficient (fmha_cutlassF/B), cuDNN SDPA (cudnn_generated_fort_native_sdpa_*), "
       "FlashInfer, trtllm-gen fmhaSm100*, CK/aiter fmha, vLLM paged_attention",
       flags=_I),
    _f("convolution",
       r"scudnn|hcudnn|cudnn_(?:infer|train)|_(?:fprop|dgrad|wgrad)_|"
       r"\b(?:fprop|dgrad|wgrad)\w*_?(?:optimized|analytic|engine|alg)|"
       r"ImplicitGemmConvolution|convolve|conv[123]d|convolution|depthwise|miopen|"
       r"igemm_(?:fwd|bwd|wrw)|naive_conv|\bconv_|grouped_conv", "compute",
       "cuDNN kernel names (cudnn_*_scudnn_*, sm80_xmma_fprop/dgrad/wgrad_implicit_gemm, "
       "cutlass_cudnn ImplicitGemmConvolution, wgrad_alg0_engine, dgrad2d_alg1_1, "
       "implicit_convolve_sgemm), MIOpen (miopen*, igemm_fwd_gtc), CK "
       "kernel_grouped_conv_fwd_*, PyTorch aten/src/ATen/native/cuda/DepthwiseConv2d.cu",
       flags=_I),
    _f("GEMM",
       r"(?<!fb)gemm|cutlass|xmma|cublas|nvjet_|\bCijk_|rocblas|hipblaslt|matmul|"
       r"^(?:void )?(?:[Bb]mm|Gemm\w*?)_|\bbmm_|marlin|flatmm|fused_moe_kernel|grouped_mm|"
       r"mfma|wmma|\bmm_|_mm_|triton_tem_", "compute",
       "cuBLAS/cuBLASLt (sm80_xmma_gemm_*, ampere_*gemm, volta_*gemm, nvjet_*), CUTLASS "
       "(cutlass::Kernel, device_kernel<GemmUniversal>), ROCm Tensile/hipBLASLt (Cijk_*), "
       "rocBLAS, CK (ck::kernel_gemm_*), DeepGEMM (fp8_gemm), trtllm-gen (bmm_*, Gemm_* "
       "_sm100f, TensorRT-LLM trtllmGenKernels), Marlin, Triton matmul and Inductor "
       "templates (triton_tem_*)", flags=_I),
    # --- Triton kernels generated by torch.compile (Inductor) -------------------------------
    _f("triton pointwise", r"^triton_poi_|^triton_\w*?pointwise", "memory",
       "PyTorch torch/_inductor/codegen/triton.py: prefix triton_poi_ (pointwise)",
       fusable=True),
    _f("triton reduction", r"^triton_red_|^triton_per_", "memory",
       "PyTorch torch/_inductor/codegen/triton.py: triton_red_ (reduction), triton_per_ "
       "(persistent reduction)"),
    _f("triton (unnamed)", r"^triton__\d", "memory",
       "PyTorch 2.0 Inductor's kernel names (triton__0d1d2d...): pointwise and reductions"),
    # --- memory-bound families --------------------------------------------------------------
    _f("optimizer", r"multi_tensor_apply|AdamFunctor|fused_adam|\badam\w*_kernel|"
       r"_fused_sgd|lamb_", "memory",
       f"{_ATEN}/ForeachFunctors.cuh, FusedAdamKernel.cu (multi_tensor_apply_kernel); "
       "NVIDIA apex multi_tensor_adam", flags=_I),
    _f("quantize/cast", r"quantiz|\bquant_|_quant(?:_|\b)|FP8rowwise|_qparam|hfp8|"
       r"float_to_|_to_float|cast_transpose|\bcast_kernel|cast_to_fp8|cast_back|per_\w*cast",
       "memory",
       "FP8/FP4 quantisation and casts (FBGEMM _compute_FP8_quantize_cuda_kernel, "
       "vLLM scaled_fp8_quant, Transformer Engine cast_transpose)", flags=_I),
    _f("RoPE", r"rotary|\brope\b|_rope|rope_", "memory",
       "rotary position embedding kernels (vLLM rotary_embedding_kernel, Transformer "
       "Engine fused_rope, Apex fused_rotary)", fusable=True, flags=_I),
    _f("embedding", r"embedding|bounds_check_indices|linearize_index|pooled_embs|"
       r"recat_copy", "memory",
       f"{_ATEN}/Embedding.cu, EmbeddingBag.cu; FBGEMM fbgemm_gpu TBE "
       "(split_embedding_*_kernel)", flags=_I),
    _f("FBGEMM sparse", r"\bfbgemm_gpu::|bucketize|permute_\dD_|permute_indices|"
       r"offsets_range", "memory",
       "pytorch/FBGEMM fbgemm_gpu sparse ops (permute_2D_data_kernel, "
       "_block_bucketize_sparse_features_cuda_kernel)"),
    _f("norm", r"layer_?norm|rms_?norm|group_?norm|batch_?norm|instance_?norm|"
       r"\bbn_(?:fw|bw)|RowwiseMoments|GammaBetaBackward|\bln_(?:fwd|bwd)|"
       r"ComputeFusedParams|l2norm", "memory",
       f"{_ATEN}/layer_norm_kernel.cu, Normalization.cuh, group_norm_kernel.cu; cuDNN "
       "cudnn::bn_fw_tr_1C11_kernel_NCHW; FlashInfer/vLLM rms_norm", flags=_I),
    _f("softmax", r"softmax", "memory",
       f"{_ATEN}/SoftMax.cu (cunn_SoftMaxForward, softmax_warp_forward)", flags=_I),
    _f("loss", r"nll_loss|NLLCriterion|cross_entropy|mse_kernel|mse_backward|smooth_l1|"
       r"binary_cross", "memory", f"{_ATEN}/Loss.cu, NLLLoss2d.cu", flags=_I),
    _f("dropout", r"dropout", "memory", f"{_ATEN}/Dropout.cu (fused_dropout_kernel_vec)",
       fusable=True, flags=_I),
    _f("activation", r"gelu|silu|relu|threshold_kernel|sigmoid|tanh|swiglu|geglu|"
       r"act_and_mul|\bmish|softplus|hardswish|hardsigmoid|\belu_", "memory",
       f"{_ATEN}/ActivationGeluKernel.cu, ActivationSiluKernel.cu, ...; vLLM "
       "csrc/activation_kernels.cu (act_and_mul_kernel)", fusable=True, flags=_I),
    _f("copy", r"copy_\w*kernel|CopyKernel|\bcopy_|_copy\b|__amd_rocclr_copy|"
       r"reshape_and_cache|concat_and_cache|transpose|permute", "memory",
       f"{_ATEN}/Copy.cu (direct_copy_kernel_cuda), ROCm CLR blit kernels "
       "(__amd_rocclr_copyBuffer), vLLM csrc/cache_kernels.cu", flags=_I),
    _f("fill", r"FillFunctor|fill_kernel|__amd_rocclr_fill|memset|zero_", "memory",
       f"{_ATEN}/FillKernel.cu (FillFunctor), ROCm CLR fill kernels", flags=_I),
    _f("cat", r"CatArray|cat_array|concat", "memory",
       f"{_ATEN}/Shape.cu (CatArrayBatchedCopy)", flags=_I),
    _f("reduction", r"reduce_kernel|reduction|ReduceOp|reduce_\w*(?:kernel|impl)|block_reduce",
       "memory", f"{_ATEN}/Reduce.cuh (reduce_kernel)", flags=_I),
    _f("sort/scan", r"\bcub::|thrust::|sort|scan|topk|radix|bitonic|unique|cumsum|"
       r"histogram", "memory", f"CUB/Thrust (cub::DeviceRadixSort*), {_ATEN}/Sort.cu, "
       "TensorTopK.cu", flags=_I),
    _f("indexing", r"(?<!with_)index|\bcompute_cuda_kernel\b|gather|scatter|masked_|"
       r"nonzero|searchsorted|take_along", "memory",
       f"{_ATEN}/Indexing.cu, IndexKernel.cu, ScatterGatherKernel.cu, Repeat.cu "
       "(compute_cuda_kernel: repeat_interleave)", flags=_I),
    _f("random", r"distribution_|curand|philox|randperm|bernoulli|multinomial",
       "memory", f"{_ATEN}/DistributionTemplates.h (distribution_elementwise_grid_stride_"
       "kernel)", flags=_I),
    _f("pooling", r"pool", "memory",
       f"{_ATEN}/DilatedMaxPool2d.cu, AdaptiveAveragePooling.cu, AveragePool2d.cu",
       flags=_I),
    _f("elementwise",
       r"elementwise_kernel|vectorized_elementwise|unrolled_elementwise|"
       r"elementwise_kernel_with_index|\bCUDAFunctor|pointwise", "memory",
       f"{_ATEN}/Loops.cuh, CUDALoops.cuh (vectorized_elementwise_kernel, "
       "unrolled_elementwise_kernel, elementwise_kernel)", fusable=True, flags=_I),
    _f("ATen other", r"^(?!.*\bspin_kernel\b).*?\b(?:at|at_cuda_detail)::", "memory",
       f"{_ATEN}: PyTorch's own kernels outside the families above (GEMM and convolution "
       "go to cuBLAS and cuDNN) are memory-bound; not its spin_kernel "
       "(torch.cuda._sleep), which waits"),
)  # fmt: skip

FUSABLE_ELEMENTWISE: frozenset[str] = frozenset(f.name for f in FAMILIES if f.fusable)
"""The families a what-if can fuse: "if the elementwise kernels were fused"."""

_BY_CATEGORY = tuple(f for f in FAMILIES if f.on == "category")
_BY_NAME = tuple(f for f in FAMILIES if f.on == "name")


@functools.lru_cache(maxsize=65536)
def classify(name: str, cat: str) -> Family | None:
    """The family of a device activity (its name and Kineto category), or None: unclassified.

    Kineto's categories (``gpu_memcpy``, ``gpu_memset``; ``Memcpy``/``Memset`` in the PyTorch
    1.8 format) decide first; then the first family whose rule is found in the name.
    """
    for family in _BY_CATEGORY:
        if family.rule.match(cat):
            return family
    for family in _BY_NAME:
        if family.rule.search(name):
            return family
    return None


_PAGE_HEAD = """# Kernel families

`clusterbench analyze` classes every device activity of a trace (kernel, copy, memset) by the
table below, in `clusterbench/traces/kernels.py`: the **first** family whose
rule matches decides. A rule is searched in the kernel's name, or (rows marked *category*)
matched against Kineto's category of the activity. A kernel that no rule matches is
*unclassified*: it is counted and named apart, never put in a class by default.

- **class**: compute (compute-bound: GEMM, convolution, attention), memory (memory-bound), or
  comm (communication).
- **collective**: one launch is a whole collective, matched across ranks to find who waits
  for whom.
- **fusable**: an elementwise family that a fused kernel or a compiler could merge into its
  neighbours (what "if the elementwise kernels were fused" would save).

`python scripts/kernel_coverage.py TRACE...` prints, per trace, each family's share of the
device time and the largest unclassified kernels. This page is generated from the table
(`python scripts/kernel_coverage.py --docs > docs/kernel-families.md`); a test keeps the two
equal.

| # | family | rule | class | collective | fusable | source |
|---|---|---|---|---|---|---|
"""


def _cell(text: str) -> str:
    """Text for a Markdown table cell: HTML-escaped, no bare pipe (it would split the cell
    on GitHub), no emphasis from ``*`` or ``_``."""
    return (
        html.escape(text, quote=False)
        .replace("|", "&#124;")
        .replace("*", "\\*")
        .replace("_", "\\_")
    )


def families_page() -> str:
    """docs/kernel-families.md: the table of :data:`FAMILIES`, in order."""
    rows = []
    for i, f in enumerate(FAMILIES, 1):
        rule = _cell(f.rule.pattern)
        where = "category: " if f.on == "category" else ""
        case = " (any case)" if f.rule.flags & re.IGNORECASE else ""
        rows.append(
            f"| {i} | {_cell(f.name)} | {where}<code>{rule}</code>{case} | {f.kind} | "
            f"{'yes' if f.collective else ''} | {'yes' if f.fusable else ''} | "
            f"{_cell(f.source)} |"
        )
    return _PAGE_HEAD + "\n".join(rows) + "\n"
