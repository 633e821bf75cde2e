# Test fragments, one per area. Tests that need ../shared read SY_SHARED_DIR
# and fail (never skip) when it is missing.
include $(srcdir)/tests/tokenizer.mk
include $(srcdir)/tests/model.mk
include $(srcdir)/tests/plugin.mk
include $(srcdir)/tests/cpu.mk
include $(srcdir)/tests/ref.mk
include $(srcdir)/tests/engine.mk
include $(srcdir)/tests/serve.mk
include $(srcdir)/tests/frontend.mk
include $(srcdir)/tests/chat.mk
include $(srcdir)/tests/bench.mk
include $(srcdir)/tests/comm.mk
include $(srcdir)/tests/load.mk
