# The CUDA plugins' sources that automake cannot see (kernels and headers
# outside _SOURCES), distributed whether or not this configure found CUDA:
# the fragments that build them are conditional, this list is not.
EXTRA_DIST += plugins/common/cuda/sycuda.h plugins/common/cuda/sycuda_conv.cuh plugins/common/cuda/sycuda_mma.cuh \
	plugins/common/cuda/syselfcheck.h \
	plugins/device/cuda/device_kern.cu plugins/device/cuda/quant_kern.cu \
	plugins/attn/cuda/attn_kern.cuh plugins/attn/cuda/attn_sm80.cu plugins/attn/cuda/attn_sm90.cu \
	plugins/attn/cuda/attn_sm120.cu \
	plugins/moe/cuda/moe_kern.cu plugins/moe/cuda/moe_wgmma.cu plugins/moe/cuda/moe_tc.cuh \
	plugins/moe/cuda/moe_fp4.cu plugins/moe/cuda/moe_fp4_frag.h \
	plugins/comm/cuda-p2p/p2p_kern.cu
