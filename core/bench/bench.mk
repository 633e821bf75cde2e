# switchyard bench: the serving benchmark client (docs/benchmarks.md).
switchyard_SOURCES += core/bench/bench.h core/bench/bench_client.h \
	core/bench/bench_main.c core/bench/bench_args.c core/bench/bench_dataset.c \
	core/bench/bench_sse.c core/bench/bench_http1.c core/bench/bench_h2.c \
	core/bench/bench_loop.c core/bench/bench_stats.c core/bench/bench_report.c \
	core/bench/bench_png.c core/bench/bench_progress.c core/bench/bench_metrics.c
switchyard_CPPFLAGS += $(NGHTTP2_CFLAGS)
switchyard_LDADD += $(NGHTTP2_LIBS)
