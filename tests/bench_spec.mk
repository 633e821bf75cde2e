# switchyard bench-spec (speculative decoding's step costs) and the draft-model source run through it;
# switchyard bench's acceptance figures from a speculating server's /metrics; a draft model's greedy
# serving output equal to plain greedy.
TESTS += tests/bench/test_bench_spec.sh tests/bench/test_bench_spec_metrics.sh tests/bench/test_spec_draft_serve.sh
EXTRA_DIST += tests/bench/test_bench_spec.sh tests/bench/test_bench_spec_metrics.sh tests/bench/test_spec_draft_serve.sh
