"""The kernel-family table (traces/kernels.py) on real kernel names, each with
the trace or source file it comes from, and its page in the docs."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import pytest

from clusterbench.traces import kernels
from clusterbench.traces.kernels import FAMILIES, classify, families_page

ROOT = Path(__file__).resolve().parents[2]
H100 = "tests/data/traces/h100/vm_487.1796552611574219025.pt.trace.json.gz"
# facebookresearch/HolisticTraceAnalysis at f4d0062, tests/data/ (MIT licence)
HTA = "HolisticTraceAnalysis tests/data/"
# the public corpus (tests/data/traces-public/manifest.json has each file's commit and licence)
DEEPSEEK = "deepseek-ai/profile-data train.json (job deepseek-train)"
B200 = "AMD-AGI/TraceLens tests/traces/b200/eager_trace.json.gz"
MI300 = "AMD-AGI/TraceLens tests/traces/mi300/resnet_act_checkpoint.json.gz"
KINETO = "pytorch/kineto tb_plugin/samples/resnet50_profiler_api_num_workers_0/"
KINETO_AUTOGRAD = "pytorch/kineto tb_plugin/samples/resnet50_autograd_api_num_workers_0/"

# (name, Kineto category, family, where the name comes from). Names from traces are as the
# trace writes them; names from source files are the kernel's demangled name as Kineto
# writes it, template arguments shortened where the source leaves them open.
REAL_NAMES: list[tuple[str, str, str, str]] = [
    ("Memcpy DtoD (Device -> Device)", "gpu_memcpy", "memcpy", H100),
    ("Memset (Device)", "gpu_memset", "memset", H100),
    ("Memcpy HtoD (Pageable -> Device)", "Memcpy", "memcpy", KINETO),
    ("Memset (Device)", "Memset", "memset", KINETO),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "kernel", "NCCL/RCCL",
     HTA + "trace_diff/test/test.json.gz"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
     "kernel", "NCCL/RCCL", HTA + "trace_filter/sampled_rank-0.json.gz"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "kernel",
     "NCCL/RCCL", "NVIDIA/nccl src/device/generate.py: ncclDevKernel_<coll>_<redop>_<ty>_"
     "<algo>_<proto>"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "kernel", "NCCL/RCCL",
     B200),
    ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "kernel", "NCCL/RCCL", MI300),
    ("ncclSymkDevKernel_AllReduce_AGxLL_R_sum_f32(ncclSymkDevWorkArgs4K)", "kernel",
     "NCCL/RCCL", "NVIDIA/nccl src/device/symmetric/generate.py (kernel_cname)"),
    ("mscclKernel_Sum_half_Simple_false(ncclDevComm*, mscclAlgo*, mscclWork*)", "kernel",
     "MSCCL", "ROCm/rccl src/include/msccl/msccl_kernel.h (MSCCL_KERNEL_ENTRY_NAME)"),
    ("void allreduce7<(Op)0, __nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, "
     "mscclpp::DeviceHandle<mscclpp::MemoryChannel>*, unsigned long, unsigned long, int, int, "
     "int, unsigned long, unsigned int*, unsigned int)", "kernel", "MSCCL++",
     "microsoft/mscclpp apps/nccl/src/allreduce.hpp (allreduce7)"),
    ("void deep_ep::legacy::layout::get_dispatch_layout<256, 32, 8>", "kernel",
     "DeepEP local", "deepseek-ai/DeepEP csrc/kernels/legacy/layout.cu"),
    ("void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, "
     "int, int, int, int)", "kernel", "DeepEP local", DEEPSEEK),
    ("void dpsk::ep::internode::cached_notify<false>(int, int, int, int, int*, int, int, int "
     "const*, int const*, int*, void*, void**, int**, int, int, int, int*, bool", "kernel",
     "DeepEP dispatch/combine", DEEPSEEK),
    ("void deep_ep::intranode::dispatch<8, 768, 8192>", "kernel", "DeepEP dispatch/combine",
     "deepseek-ai/DeepEP csrc/kernels/intranode.cu at ebfe47e (dispatch)"),
    ("void deep_ep::intranode::notify_dispatch<8>", "kernel", "DeepEP dispatch/combine",
     "deepseek-ai/DeepEP csrc/kernels/intranode.cu at ebfe47e (notify_dispatch)"),
    ("void deep_ep::legacy::internode_ll::combine<false, 7168>", "kernel",
     "DeepEP dispatch/combine", "deepseek-ai/DeepEP csrc/kernels/legacy/internode_ll.cu"),
    ("void deep_ep::elastic::dispatch_impl<true>", "kernel", "DeepEP dispatch/combine",
     "deepseek-ai/DeepEP deep_ep/include/deep_ep/impls/dispatch.cuh"),
    ("void barrier_on_stream_kernel_threadgroup<(threadgroup_t)1>(int, int)", "kernel",
     "NVSHMEM collective",
     "NVSHMEM src/include/internal/non_abi/nvshmemi_h_to_d_coll_defs.cuh"),
    ("nvshmemi_proxy_quiet_entrypoint()", "kernel", "NVSHMEM",
     "NVSHMEM src/host/proxy (nvshmemi_proxy_quiet_entrypoint)"),
    ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>"
     "(c10::BFloat16*, unsigned long, unsigned int**, unsigned long, unsigned long)", "kernel",
     "torch symmetric memory", B200),
    ("void (anonymous namespace)::two_shot_all_reduce_kernel_inplace<c10::BFloat16, 16, 8>",
     "kernel", "torch symmetric memory",
     "pytorch torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemoryOps.cu"),
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, "
     "vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)", "kernel",
     "custom all-reduce", "vllm-project/vllm csrc/custom_all_reduce.cuh"),
    ("executor_kernel(ucc_ec_cuda_executor volatile*, int)", "kernel", "UCC",
     "openucx/ucc src/components/ec/cuda/kernel/ec_cuda_executor.cu"),
    ("void scal_kernel<float, float, 1, false, 6, 5, 5, 3>(cublasTransposeParams<float>, "
     "float const*, float*, float const*)", "kernel", "GEMV / BLAS-1",
     HTA + "timeline_analysis/sampled_rank-0.json.gz"),
    ("void splitKreduce_kernel<float, float, float, float, true, false, false>"
     "(cublasSplitKParams<float>, float const*, float const*, float*, float const*, "
     "float const*, float const*, float const*, float*, void*, long, float*, int*)",
     "kernel", "GEMM helpers", HTA + "trace_diff/control/control.json.gz"),
    ("void cudnn::ops::scalePackedTensor_kernel<float, float>(long, float*, float)", "kernel",
     "cuDNN/MIOpen helpers", HTA + "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace"
     ".json.gz"),
    ("void flip_filter<float, float>(float*, float const*, int, int, int, int)", "Kernel",
     "cuDNN/MIOpen helpers", KINETO_AUTOGRAD),
    ("SubTensorOpWithScalar1d", "kernel", "cuDNN/MIOpen helpers", MI300),
    ("void moe::dev::routing::routingIndicesOffsetsKernel<moe::dev::routing::routingRenormalize::"
     "KernelParams<__nv_bfloat16, __nv_bfloat16, 128, false, true, true> >", "kernel",
     "MoE routing/permute", B200),
    ("void moe::dev::finalize::finalizeKernelVecLoad<moe::dev::finalize::KernelParams<cutlass::"
     "bfloat16_t, cutlass::bfloat16_t, 4, true> >", "kernel", "MoE routing/permute", B200),
    ("void cuda::get_fused_mapping<512>(long const*, int*, int*, int*, int*, int*, int*, int "
     "const*, int, int, int)", "kernel", "MoE routing/permute", DEEPSEEK),
    ("fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<"
     "cutlass::half_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)", "kernel",
     "attention", "pytorch aten/src/ATen/native/transformers/cuda/mem_eff_attention/kernels/"
     "cutlassF.h (fmha_cutlassF_f16_aligned_64x64_rf_sm80)"),
    ("fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext",
     "kernel", "attention", B200),
    ("attn_fwd", "kernel", "attention", "AMD-AGI/TraceLens tests/traces/mi300/Qwen_Qwen1.5-0.5B-"
     "Chat__1016005.json.gz"),
    ("void cutlass::device_kernel<flash::FlashAttnBwdPreprocess<cute::tuple<cute::C<64>, cute::"
     "C<192> >", "kernel", "attention", DEEPSEEK),
    ("cudnn_infer_volta_scudnn_128x64_relu_small_nn_v1", "kernel", "convolution",
     HTA + "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"),
    ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16"
     "_stage4_warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn", "kernel",
     "convolution", HTA + "critical_path/alexnet/benchmark_result_2869224_1695835535_trace"
     ".json.gz"),
    ("void implicit_convolve_sgemm<float, float, 128, 6, 7, 3, 3, 5, 1, false, true, true>(int, "
     "int, int, float const*, int, float*, float const*, kernel_conv_params", "Kernel",
     "convolution", KINETO),
    ("void cudnn::detail::dgrad2d_alg1_1<float, 0, 5, 6, 4, 3, 4, false, true>(int, int, int, "
     "float const*, int, float const*, int, float*, kernel_grad_params", "Kernel",
     "convolution", KINETO_AUTOGRAD),
    ("igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt64x128x32_wt32x32x8_ws1x1_wr2x1_ta1x8x1x1_1x4x1x64_tb1x8"
     "x2x1_1x4x1x64_gkgs", "kernel", "convolution", MI300),
    ("_ZN2ck16tensor_operation6device12_GLOBAL__N_139kernel_grouped_conv_fwd_xdl_cshuffle_v3INS_"
     "28GridwiseGemm_xdl_cshuffle_v3INS_13tensor_layout4gemm8RowMajorENS6_11ColumnMajorES7_",
     "kernel", "convolution", MI300),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4"
     "_alignc4_execute_kernel__5x_cublas", "kernel", "GEMM", H100),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nt_align1>(cutlass_80_simt_sgemm"
     "_256x128_8x4_nt_align1::Params)", "kernel", "GEMM", H100),
    ("volta_sgemm_128x32_nt", "kernel", "GEMM", HTA + "trace_diff/test/test.json.gz"),
    ("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1"
     "_CLR1_CADS0_EPS0_GRVWA2_GRVWB2_GSUAMB_ISA90a", "kernel", "GEMM",
     HTA + "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"),
    ("GemmGatedActKernel_E4m3_E4m3_Fp32_tile128x128x256_epilogueTile128x128_mma128x128x32"
     "_cluster1x1x1_sm100a", "kernel", "GEMM", "NVIDIA/TensorRT-LLM cpp/tensorrt_llm/kernels/"
     "trtllmGenKernels/gemmGatedAct/trtllmGen_gatedAct_export/KernelMetaInfo.h"),
    ("void cutlass::device_kernel<dpsk::grouped_gemm::cuda::m_grouped_fp8_ptp128c::GemmKernel>"
     "(dpsk::grouped_gemm::cuda::m_grouped_fp8_ptp128c::GemmKernel::Params)", "kernel", "GEMM",
     DEEPSEEK),
    ("nvjet_tst_144x128_64x6_2x1_v_bz_bias_TNN", "kernel", "GEMM", B200),
    ("void dpsk::grouped_gemm::cuda::utils::transpose<512, 128, 4, 4>(unsigned char const*, "
     "unsigned char*, int, int, int, int)", "kernel", "GEMM helpers", DEEPSEEK),
    ("triton_poi_fused_add_cos_sin_0", "kernel", "triton pointwise",
     HTA + "triton_example/triton_example.json.gz"),
    ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "kernel", "triton reduction",
     "pytorch torch/_inductor/codegen/triton.py (prefix triton_red_ and the fused ops)"),
    ("triton__0d1d2d", "kernel", "triton (unnamed)",
     HTA + "negative_queue_length_values_check/rank0.json.gz"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
     "namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::UnaryOpFunctor<float,"
     " 2, 1, 1>, at::native::Sqrt<float> >", "kernel", "optimizer", H100),
    ("void fbgemm_gpu::(anonymous namespace)::_FP8rowwise_to_float_cuda_kernel<float>(unsigned "
     "char const*, int, int, float*, bool)", "kernel", "quantize/cast",
     HTA + "timeline_analysis/sampled_rank-0.json.gz"),
    ("void split_embedding_codegen_forward_unweighted_kernel<float, float, float, long, 5ul>",
     "kernel", "embedding", HTA + "trace_diff/test/test.json.gz"),
    ("void fbgemm_gpu::_offsets_range_cuda_kernel<int>(long, long, int const*, int*)", "kernel",
     "FBGEMM sparse", HTA + "timeline_analysis/sampled_rank-0.json.gz"),
    ("void cudnn::bn_bw_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::bn_bw_1C11_args"
     "<float>)", "kernel", "norm", HTA + "nccl_parser_config/nccl_data.json.gz"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, "
     "float, float const*, float const*, float const*, float*, float*, float*)", "kernel",
     "norm", HTA + "trace_diff/control/control.json.gz"),
    ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>"
     "(float*, float const*, int, int, int, bool const*, int, bool)", "kernel", "softmax",
     HTA + "nccl_parser_config/nccl_data.json.gz"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::mse_kernel_cuda(at::"
     "TensorIteratorBase&)::{lambda()#1}::operator()() const", "kernel", "loss",
     HTA + "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"),
    ("void at::native::(anonymous namespace)::fused_dropout_kernel_vec<float, float, unsigned "
     "int, 1, 4, bool>", "kernel", "dropout",
     HTA + "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::"
     "TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const", "kernel",
     "activation", H100),
    ("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, "
     "c10::BFloat16*, c10::BFloat16 const*, int, long, long", "kernel", "RoPE", B200),
    ("rotary_kernel", "kernel", "RoPE", DEEPSEEK),
    ("void cuda::per_token_cast_to_fp8_with_channels<__nv_bfloat16, 128, false, 128, false>"
     "(__nv_bfloat16 const*, int, unsigned char*, float*, int", "kernel", "quantize/cast",
     DEEPSEEK),
    ("void cuda::reduce_fused_impl<__nv_bfloat16, false, false>(int4 const*, float const*, int "
     "const*, int4*, int, int, int, __nv_fp8_interpretation_t", "kernel", "reduction", DEEPSEEK),
    ("_copy_tensor_kernel", "kernel", "copy", DEEPSEEK),
    ("void cunn_ClassNLLCriterion_updateOutput_kernel<float, float>(float*, float*, float*, "
     "long*, float*, int, int, int, int, long)", "Kernel", "loss", KINETO),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::"
     "TensorIteratorBase&)::{lambda()#2}::operator()() const", "kernel", "copy",
     HTA + "trace_diff/control/control.json.gz"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
     "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
     "kernel", "fill", H100),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, 128, "
     "1>", "kernel", "cat", HTA + "trace_diff/test/test.json.gz"),
    ("void compute_cuda_kernel<long>(long*, long*, long*, long, long)", "kernel", "indexing",
     HTA + "timeline_analysis/sampled_rank-0.json.gz"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::"
     "WelfordOps<float, float, int, float, thrust::pair<float, float> >, unsigned int, float, "
     "2> >", "kernel", "reduction", HTA + "trace_diff/control/control.json.gz"),
    ("void cub::DeviceScanInitKernel<cub::ScanTileState<int, true> >(cub::ScanTileState<int, "
     "true>, int)", "kernel", "sort/scan", HTA + "negative_queue_length_values_check/rank0"
     ".json.gz"),
    ("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float"
     ", 4>", "kernel", "random",
     HTA + "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"),
    ("void at::native::(anonymous namespace)::adaptive_average_pool<float>(float const*, float*"
     ", int, int, int, int, long, long, long)", "kernel", "pooling",
     HTA + "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, "
     "float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >",
     "kernel", "elementwise", H100),
    ("void (anonymous namespace)::elementwise_kernel_with_index<int, at::native::arange_cuda_out"
     "(c10::Scalar const&, c10::Scalar const&, c10::Scalar const&, at::Tensor&)", "kernel",
     "elementwise", HTA + "trace_diff/test/test.json.gz"),
    ("void at::to_dense_representation_kernel<float>(long, long, long const*, float const*, "
     "long const*, float*)", "kernel", "ATen other", HTA + "trace_diff/test/test.json.gz"),
    # the PyTorch 1.8 format's category
    ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::"
     "BinaryFunctor<c10::Half, c10::Half, c10::Half, at::native::AddFunctor<float> > >",
     "Kernel", "elementwise", HTA + "trace_file_list/inference_rank_1.json.gz"),
]  # fmt: skip

# the kernels the regex rules before this table put in "memory" on public traces
# DeepEP's dispatch/combine of DEEPSEEK (half its step), the all-reduce and the MX-FP4 GEMMs
# of B200
ISSUE_NAMES: list[tuple[str, str, str]] = [
    ("void dpsk::ep::internode::dispatch<false, 8, false, 8>(int4*, float*, long*, float*, "
     "dpsk::ep::internode::SourceMeta*, int4 const*, float const*, long const*, float const*, "
     "int*, int*, int*, int*, int const*, int const*, int const*, int const*, int, int, int, int, "
     "int, bool const*, void*, int, int, void**, int, int, int, int, int*)", "comm",
     "DeepEP dispatch/combine"),
    ("void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*, float*, "
     "bool const*, int4 const*, float const*, int4 const*, int4 const*, int const*, int const*, "
     "dpsk::ep::internode::SourceMeta const*, int const*, int const*, int const*, int, int, int, "
     "int, void*, int, int, void**, int, int, int, int, int*)", "comm", "DeepEP dispatch/combine"),
    ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*"
     ", unsigned long, unsigned int**, unsigned long, unsigned long)", "comm",
     "torch symmetric memory"),
    ("bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN"
     "_transOut_schedP2x1x2x3_biasM_bN_tma_tmaOpt_clmp_swiGlu_dynBatch_sm100f", "compute",
     "GEMM"),
    ("bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM"
     "_TN_transOut_schedP2x1x2x3_biasM_bN_tmaOpt_clmp_dynBatch_sm100f", "compute", "GEMM"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "cat", "family", "source"), REAL_NAMES)
def test_real_names_get_their_family(name: str, cat: str, family: str, source: str) -> None:
    got = classify(name, cat)
    assert got is not None, f"unclassified: {name} ({source})"
    assert got.name == family, f"{name} ({source}): {got.name}, not {family}"


def test_every_family_is_matched_by_a_real_name() -> None:
    matched = {family for _, _, family, _ in REAL_NAMES}
    assert [f.name for f in FAMILIES if f.name not in matched] == []


@pytest.mark.parametrize(("name", "kind", "family"), ISSUE_NAMES)
def test_the_issue_kernels_are_classed_right(name: str, kind: str, family: str) -> None:
    got = classify(name, "kernel")
    assert got is not None and (got.kind, got.name) == (kind, family)


def test_collectives_are_communication_and_matched_across_ranks() -> None:
    for name in (
        "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
        "void deep_ep::intranode::notify_dispatch<8>",
        "void (anonymous namespace)::one_shot_all_reduce_kernel<float, 16, 8>",
    ):
        got = classify(name, "kernel")
        assert got is not None and got.kind == "comm" and got.collective, name
    local = classify("void deep_ep::legacy::internode_ll::clean_low_latency_buffer<32>", "kernel")
    assert local is not None and local.kind == "memory" and not local.collective


@pytest.mark.parametrize(
    "name",
    [
        "my_custom_kernel(float*, int)",
        "Kernel",
        "_fwd_kernel",
        "void foo::bar<1>(int)",
        "",
        # torch.cuda._sleep's busy wait (HolisticTraceAnalysis tests/data/critical_path/
        # cuda_event_sync): no memory traffic, no compute
        "at::cuda::(anonymous namespace)::spin_kernel(long)",
    ],
)
def test_unknown_names_are_unclassified(name: str) -> None:
    assert classify(name, "kernel") is None


def test_category_decides_before_the_name() -> None:
    got = classify("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy")
    assert got is not None and got.name == "memcpy"
    # the same name outside Kineto's copy category is no copy
    assert classify("Memcpy HtoD (Pageable -> Device)", "kernel") is None
    memset = classify("Memset (Device)", "Memset")
    assert memset is not None and memset.name == "memset"


def test_fusable_families_are_the_elementwise_ones() -> None:
    fusable = {"elementwise", "activation", "dropout", "RoPE", "triton pointwise"}
    assert fusable == kernels.FUSABLE_ELEMENTWISE
    assert all(f.kind == "memory" for f in FAMILIES if f.fusable)


def test_every_family_names_its_source_and_a_class() -> None:
    assert len({f.name for f in FAMILIES}) == len(FAMILIES)
    for f in FAMILIES:
        assert f.source.strip() and f.kind in ("compute", "memory", "comm"), f.name
        assert not f.collective or f.kind == "comm", f.name


def test_the_docs_page_is_the_table() -> None:
    page = (ROOT / "docs" / "kernel-families.md").read_text()
    assert page == families_page(), (
        "docs/kernel-families.md is stale: python scripts/kernel_coverage.py --docs "
        "> docs/kernel-families.md"
    )


def test_the_page_shows_each_rule_whole() -> None:
    """Every rule is on the page as written (pipes and brackets escaped as HTML entities)."""
    import html

    codes = re.findall(r"<code>(.*?)</code>", families_page())
    shown = [html.unescape(c).replace("\\_", "_").replace("\\*", "*") for c in codes]
    assert shown == [f.rule.pattern for f in FAMILIES]


def _coverage_script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "kernel_coverage", ROOT / "scripts" / "kernel_coverage.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("kernel_coverage", module)  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


def test_coverage_of_the_recorded_h100_trace() -> None:
    script = _coverage_script()
    path = ROOT / H100
    cov = script.coverage(path, script.device_times(path))
    assert cov.total_us > 0 and cov.unclassified_pct == 0.0 and not cov.comm_misclassed
    assert {"GEMM", "optimizer", "memcpy", "memset", "elementwise"} <= set(cov.by_family)
    assert sum(cov.by_family.values()) == pytest.approx(cov.total_us)


CORPUS = ROOT / "tests" / "data" / "traces-public"
SMALL_FILE_BYTES = {".json": 4_000_000, ".gz": 2_000_000}
"""The files this tier reads (a compressed file holds 10-20 times its size); the script
reads every one (docs/kernel-families.md)."""


def _corpus_dir() -> Path | None:
    """Where the fetched traces are (tests/data/traces-public/README.md): the first of
    $CLUSTERBENCH_PUBLIC_TRACES, tests/data/traces-public, ../shared/traces-public that holds
    a job folder."""
    jobs = [j["folder"] for j in json.loads((CORPUS / "manifest.json").read_text())["jobs"]]
    env = os.environ.get("CLUSTERBENCH_PUBLIC_TRACES")
    folders = ([Path(env)] if env else []) + [CORPUS, ROOT.parent / "shared" / "traces-public"]
    return next((f for f in folders if any((f / job).is_dir() for job in jobs)), None)


def _public_traces() -> list[Path]:
    folder = _corpus_dir()
    if folder is None:
        return []
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    paths = [folder / j["folder"] / f["name"] for j in manifest["jobs"] for f in j["files"]]
    return [p for p in paths if p.is_file() and p.stat().st_size <= SMALL_FILE_BYTES[p.suffix]]


@pytest.mark.skipif(not _public_traces(), reason="the public traces are not fetched")
@pytest.mark.parametrize("path", _public_traces(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_public_traces_are_classified(path: Path) -> None:
    script = _coverage_script()
    cov = script.coverage(path, script.device_times(path))
    top = cov.top_unclassified(3)
    assert cov.unclassified_pct <= 1.0, f"{path.name}: {cov.unclassified_pct:.2f}% {top}"
    assert not cov.comm_misclassed, f"{path.name}: {cov.comm_misclassed}"
