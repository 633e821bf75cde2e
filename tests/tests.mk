# Test fragments, one per area. Tests that need ../shared read SY_SHARED_DIR
# and fail (never skip) when it is missing.
# tests/lib/serve.sh: starting and stopping `switchyard serve` for the tests of every area that talk HTTP.
EXTRA_DIST += tests/lib/serve.sh
include $(srcdir)/tests/tokenizer.mk
include $(srcdir)/tests/model.mk
include $(srcdir)/tests/plugin.mk
include $(srcdir)/tests/cpu.mk
include $(srcdir)/tests/moe.mk
include $(srcdir)/tests/ref.mk
include $(srcdir)/tests/arch.mk
include $(srcdir)/tests/engine.mk
include $(srcdir)/tests/serve.mk
include $(srcdir)/tests/sampling.mk
include $(srcdir)/tests/frontend.mk
include $(srcdir)/tests/chat.mk
include $(srcdir)/tests/grammar.mk
include $(srcdir)/tests/toolcall.mk
include $(srcdir)/tests/bench.mk
include $(srcdir)/tests/bench_spec.mk
include $(srcdir)/tests/comm.mk
include $(srcdir)/tests/gpu/gpu.mk
include $(srcdir)/tests/tp.mk
include $(srcdir)/tests/load.mk
include $(srcdir)/tests/quant.mk
include $(srcdir)/tests/faults.mk
include $(srcdir)/tests/graphs.mk
include $(srcdir)/tests/fuzz.mk
include $(srcdir)/tests/sdk/sdk.mk
include $(srcdir)/tests/spec.mk
