# DeepSeek-V3, GLM-4-MoE and GLM-5 (glm_moe_dsa): MLA and the DSA indexer in
# batches, config and checkpoint errors, the indexer's effect. Their logits
# against the numpy reference are in tests/ref/test_engine_vs_reference.sh.
check_PROGRAMS += tests/arch/test_mla_batch
tests_arch_test_mla_batch_SOURCES = tests/arch/test_mla_batch.c
tests_arch_test_mla_batch_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_arch_test_mla_batch_LDADD = $(SY_CORE_LIBS)
TESTS += tests/arch/test_mla_batch.sh tests/arch/test_arch_config.sh tests/arch/test_dsa_selects.sh \
	tests/arch/test_config_defaults.sh
EXTRA_DIST += tests/arch/test_mla_batch.sh tests/arch/test_arch_config.sh tests/arch/test_dsa_selects.sh \
	tests/arch/test_config_defaults.sh \
	tests/arch/hf_check.py tests/arch/hf_save.py tests/arch/check_hf.sh

# Multi-token-prediction layers: loaded when asked for, skipped (their shard
# not even opened) otherwise; the bound shapes (test_mtp_load.c).
check_PROGRAMS += tests/arch/test_mtp_load
tests_arch_test_mtp_load_SOURCES = tests/arch/test_mtp_load.c
tests_arch_test_mtp_load_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_arch_test_mtp_load_LDADD = $(SY_CORE_LIBS)
TESTS += tests/arch/test_mtp.sh
EXTRA_DIST += tests/arch/test_mtp.sh

# Hugging Face transformers (the reference of record) on the same synthetic
# checkpoints and on ones transformers' save_pretrained writes (hf_save.py, both
# config.json layouts), logit by logit. Not in `make check`: it installs torch and
# transformers from PyPI into a venv (HF_VENV, default $(abs_top_builddir)/hf-venv)
# on first use: ~3 GB of downloads (PyPI's torch brings the CUDA libraries),
# 5.6 GB installed, 9 minutes here.
HF_VENV ?= $(abs_top_builddir)/hf-venv
check-hf: all
	$(AM_V_at)$(AM_TESTS_ENVIRONMENT) HF_VENV="$(HF_VENV)" $(SHELL) $(srcdir)/tests/arch/check_hf.sh
.PHONY: check-hf
