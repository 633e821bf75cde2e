libsycore_a_SOURCES += \
	core/engine/engine.c core/engine/engine.h core/engine/engine_internal.h core/engine/group.c \
	core/engine/forward.c core/engine/forward_mla.c core/engine/graphs.c core/engine/graphs.h \
	core/engine/tp_shard.c core/engine/tp_step.c \
	core/engine/kv_blocks.c core/engine/kv_blocks.h \
	core/engine/rope.c core/engine/rope.h \
	core/engine/sampler.c core/engine/sampler.h \
	core/engine/generate.c core/engine/generate.h
# [speculative] method = mtp: the checkpoint's MTP layer.
libsycore_a_SOURCES += core/engine/forward_mtp.c
