# Serving: the scheduler (continuous batching, paged KV with prefix reuse),
# per-request output processing, metrics, and the engine thread behind the
# host serving API.
libsycore_a_SOURCES += \
	core/serve/prefix_cache.c core/serve/prefix_cache.h \
	core/serve/text_filter.c core/serve/text_filter.h \
	core/serve/seq.h core/serve/seq_output.c \
	core/serve/scheduler.c core/serve/scheduler.h \
	core/serve/sched_generate.c core/serve/sched_generate.h \
	core/serve/metrics.c core/serve/metrics.h \
	core/serve/server.c core/serve/server.h \
	core/serve/chat_glue.c core/serve/chat_glue.h \
	core/serve/guide.c core/serve/guide.h \
	core/serve/serving_proxy.c core/serve/serving_proxy.h
