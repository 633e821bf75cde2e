# sy-bench-cpu: prefill / decode speed against the memory-bandwidth bound.
noinst_PROGRAMS += sy-bench-cpu
sy_bench_cpu_SOURCES = tools/bench/bench_cpu.c
sy_bench_cpu_CPPFLAGS = $(libsycore_a_CPPFLAGS)
sy_bench_cpu_LDADD = $(SY_CORE_LIBS)
