# Quantised checkpoints (FP8, NVFP4) end to end against the numpy reference,
# malformed ones refused, and memory without widening; MoE tuning tables
# and switchyard tune-moe; a GLM-5-shaped NVFP4 checkpoint served end to end
# (streamed chat completion over HTTP).
SY_QUANT_TESTS = tests/quant/test_quant_models.sh tests/quant/test_moe_tuning.sh tests/quant/test_glm5_nvfp4_serve.sh
TESTS += $(SY_QUANT_TESTS)
EXTRA_DIST += $(SY_QUANT_TESTS)
