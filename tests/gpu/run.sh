#!/bin/sh
# The GPU run: needs one NVIDIA GPU (compute capability 8.x, 9.0 or 12.x),
# the CUDA toolkit and the build dependencies; on an H200 about a minute
# after the build (which takes a few minutes with nvcc for three targets).
#
#   1. builds switchyard with the CUDA plugins (configure --with-cuda) in
#      $SY_GPU_BUILD (default /tmp/sy-gpu-build)
#   2. switchyard doctor
#   3. tests/gpu/test_cuda_ops: every CUDA op against the CPU plugins on
#      random inputs (relative-error bounds per dtype; NaN never passes),
#      attention's tensor-core prefill kernel among them ("attention tc"), and attention sinks
#      (gpt-oss: "attention sinks"; the tensor-core kernel refuses them)
#      3b. comm cuda-p2p with two ranks on the one GPU (bench-comm with
#      the test-only same_device = allow: 0 wrong), and refused without it;
#      unpinned, rank 1 of bench-comm nccl takes GPU 1 (refused on one GPU)
#      3c. moe cuda: switchyard plugin-check through the cuda device
#      (forward and expert ranges against float64), then tune-moe --dry-run
#      of its tile variants on sy-mkmodel's test-mixtral (prints the table;
#      every tensor-core tile listed, the mma ones timed, wgmma off 9.0 refused,
#      fp4mma refused without NVFP4 activations)
#   4. switchyard generate on the shared models with etc/examples/cuda.ini:
#      the greedy ids must equal $SY_SHARED_DIR/models/expected_greedy.json's;
#      4b. on sy-mkmodel's GLM-4.5, DeepSeek-V3 (MLA), GLM-5 (MLA + DSA),
#      DeepSeek-V3.2 (MLA + DSA, half-split indexer RoPE; with an MTP layer),
#      Qwen2, Qwen3, sliding windows (Mistral; per layer: Qwen2, Qwen3, and
#      gpt-oss with its attention sinks, fused and MXFP4 experts) and
#      FP8 presets they must equal the CPU plugins' ids
#      4c. quantised MoE presets (FP8 / NVFP4 experts) on moe cuda, with
#      routing = device and = host: the CPU plugins' ids
#      4d. [device] graphs = on against off (tests/gpu/test_cuda_graphs):
#      the same ids (and, with split_k = off, the same logits bit for bit)
#      with steps replayed, on the shared models and sy-mkmodel's
#      test-mixtral with routing = device; routing = host falls back, warning
#   5. a synthetic 8B-class bf16 llama (sy-mkmodel, seeded, ~16 GB in
#      $SY_GPU_MODEL_DIR, default /tmp/sy-gpu-model-8b), the GPU's copy
#      bandwidth (tests/gpu/bw_probe), and decode tok/s at batch 1 and 64
#      next to the bandwidth bound (weight bytes per step / bandwidth), and
#      with [device] graphs = on; then one 4000-token prefill step with
#      attention's prefill rows on CUDA cores and on tensor cores
#
# Usage: tests/gpu/run.sh [--no-build] [--skip-8b]   (from the source tree)
# SY_GPU_CONFIG replaces etc/examples/cuda.ini in steps 4-5 (a CPU config
# there lets the script's own logic be tried on a machine without a GPU).
# Exit status: 0 when steps 1-4d pass (step 5 prints a table, asserts
# nothing about speed); 1 otherwise. Each step's log is in $SY_GPU_BUILD/gpu-logs.
set -u
# The CPU plugins are the reference here (ids, op outputs): f32, exact, even on a host CPU with AMX, where
# their default matmul = auto would be bf16 (docs/config.md). The cuda plugins do not declare the key.
SWITCHYARD_SET="device.matmul=f32 moe.matmul=f32"
export SWITCHYARD_SET
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${SY_GPU_BUILD:-/tmp/sy-gpu-build}
model8b=${SY_GPU_MODEL_DIR:-/tmp/sy-gpu-model-8b}
shared=${SY_SHARED_DIR:-$src/../shared}
config=${SY_GPU_CONFIG:-$src/etc/examples/cuda.ini}
jobs=$(nproc 2>/dev/null || echo 4)
do_build=yes
do_8b=yes
for a in "$@"; do
    case $a in
        --no-build) do_build=no ;;
        --skip-8b) do_8b=no ;;
        *) echo "usage: tests/gpu/run.sh [--no-build] [--skip-8b]" >&2; exit 2 ;;
    esac
done
logs=$build/gpu-logs
mkdir -p "$logs" || exit 1
fail=0
t_start=$(date +%s)
step() { echo; echo "== $* ($(($(date +%s) - t_start)) s)"; }
bad() { echo "FAIL: $*"; fail=1; }

step "1. build (configure --with-cuda, make -j$jobs)"
if [ $do_build = yes ]; then
    if [ ! -x "$src/configure" ]; then
        (cd "$src" && autoreconf -fi) >"$logs/autoreconf.log" 2>&1 || { cat "$logs/autoreconf.log"; exit 1; }
    fi
    (cd "$build" && "$src/configure" --with-cuda --enable-werror --with-shared-dir="$shared") >"$logs/configure.log" 2>&1 ||
        { tail -30 "$logs/configure.log"; echo "FAIL: configure (missing packages? tools/install-deps.sh)"; exit 1; }
    (cd "$build" && make -j"$jobs" && make -j"$jobs" tests/gpu/test_cuda_ops tests/gpu/bench_decode tests/gpu/bw_probe \
        tests/gpu/test_cuda_graphs) \
        >"$logs/make.log" 2>&1 || { tail -40 "$logs/make.log"; echo "FAIL: build"; exit 1; }
fi
sy=$build/switchyard
plugins=$build/build-plugins
for f in "$sy" "$plugins/sy-device-cuda.so" "$build/tests/gpu/test_cuda_ops" "$build/tests/gpu/bw_probe"; do
    [ -e "$f" ] || { echo "FAIL: $f missing (configure found no CUDA? see $logs/configure.log)"; exit 1; }
done
"$src/tools/check-cuda-smem.sh" "$build" | tail -1

step "2. switchyard doctor"
"$sy" doctor --plugin-dir "$plugins" | tee "$logs/doctor.log"
rc=$?
[ "$rc" -eq 0 ] || bad "doctor exited $rc (0 expected with a usable GPU)"

step "3. CUDA ops against the CPU plugins"
"$build/tests/gpu/test_cuda_ops" --plugin-dir "$plugins" >"$logs/ops.log" 2>&1
rc=$?
grep -E '^(FAIL|loaded)' "$logs/ops.log"
tail -1 "$logs/ops.log"
[ "$rc" -eq 0 ] || bad "test_cuda_ops exited $rc (see $logs/ops.log)"
# Attention's tensor-core prefill kernel (prefill_kernel = tensor-cores: self-checked at each prepare) against
# attn cpu: prefill-only, mixed and chunked steps, windows, groups 1-16, head dims 64/128, every cache dtype.
ntc=$(grep -c '^ok   attention tc' "$logs/ops.log")
echo "attention tc: $ntc comparisons within 1e-4 (tensor-core prefill kernel)"
[ "$ntc" -ge 91 ] || bad "attention tc: $ntc passing comparisons, 91 expected (15 cases x 3 steps x 2 layers + the refusal) (see $logs/ops.log)"
# [moe] activations = nvfp4 (W4A4): moe cuda against moe cpu in the mode; the block-scaled FP4 tiles (sm_120a)
# self-checked and within 1e-4 on 12.0, refused elsewhere; their self-check lines from the log.
grep -E '^(ok|FAIL) +moe (w4a4|fp4)' "$logs/ops.log"
grep -E 'tile fp4mma[0-9x]+ self-check' "$logs/ops.log" | sort -u
nw4=$(grep -c -E '^ok +moe (w4a4|fp4)' "$logs/ops.log")
[ "$nw4" -ge 12 ] || bad "moe w4a4/fp4: $nw4 passing lines, at least 12 expected (2 token counts x (2 + 3 tiles) + the count + the refusal) (see $logs/ops.log)"

step "3b. comm cuda-p2p: two ranks on one GPU over CUDA IPC (same_device = allow, a test-only key)"
# The whole IPC path (handles, peer mappings, the timed peer copy, chunked
# one-shot allreduce over both banks) on a one-GPU machine; bench-comm checks
# every result against the exact sum and exits 1 on a wrong one.
# Each forked rank opens device cuda first with local rank = rank (rank r on GPU r), so on one GPU both
# ranks are pinned to GPU 0 with device.gpu=0.
"$sy" bench-comm --plugin-dir "$plugins" --plugin cuda-p2p --ranks 2 --set comm.same_device=allow \
    --set device.gpu=0 --min-bytes 8 --max-bytes 64M --factor 8 --timeout 60 >"$logs/p2p.log" 2>&1
rc=$?
grep -E '^#? *[0-9]|^# device|Out of bounds|FAIL|error|refus' "$logs/p2p.log" | tail -13
if [ "$rc" -ne 0 ] || ! grep -q 'Out of bounds values : 0 OK' "$logs/p2p.log"; then
    bad "bench-comm --plugin cuda-p2p --set comm.same_device=allow exited $rc (see $logs/p2p.log)"
fi
if grep -q '^# device cuda: rank 0 on GPU 0, rank 1 on GPU 0$' "$logs/p2p.log"; then
    echo "ok   bench-comm header: both ranks on the pinned GPU 0"
else bad "bench-comm header does not name each rank's GPU (see $logs/p2p.log)"; fi
# Without the key, ranks that share a GPU are refused with the reason (what makes auto fall back).
"$sy" bench-comm --plugin-dir "$plugins" --plugin cuda-p2p --ranks 2 --max-bytes 8 --timeout 60 \
    --set device.gpu=0 >"$logs/p2p-refused.log" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && grep -q 'share GPU' "$logs/p2p-refused.log"; then echo "ok   same GPU refused by default"; else
    bad "cuda-p2p with two ranks on one GPU and no same_device key: exit $rc, $(tail -2 "$logs/p2p-refused.log")"; fi
# Unpinned, rank r takes GPU r: with one GPU rank 1 has none, and device cuda says so.
n_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "$n_gpus" -eq 1 ]; then
    # (rank 0 waits for rank 1 until the timeout: keep it short)
    "$sy" bench-comm --plugin-dir "$plugins" --plugin nccl --ranks 2 --max-bytes 8 --timeout 10 \
        >"$logs/rank-gpu.log" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] && grep -q 'gpu = -1 gives local rank 1 GPU 1' "$logs/rank-gpu.log"; then
        echo "ok   rank 1 of 2 on one GPU: device cuda refuses GPU 1 with the reason"
    else bad "bench-comm nccl --ranks 2 on one GPU: exit $rc, $(tail -2 "$logs/rank-gpu.log")"; fi
elif [ "$n_gpus" -ge 2 ]; then
    "$sy" bench-comm --plugin-dir "$plugins" --plugin nccl --ranks 2 --max-bytes 1M --timeout 60 \
        >"$logs/rank-gpu.log" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && grep -q 'rank 0 on GPU 0, rank 1 on GPU 1$' "$logs/rank-gpu.log"; then
        echo "ok   bench-comm nccl: rank 0 on GPU 0, rank 1 on GPU 1"
    else bad "bench-comm nccl --ranks 2 on $n_gpus GPUs: exit $rc (see $logs/rank-gpu.log)"; fi
fi

step "3c. moe cuda: plugin-check (forward, expert ranges) and tune-moe --dry-run of its tiles"
"$sy" plugin-check --device "$plugins/sy-device-cuda.so" "$plugins/sy-moe-cuda.so" >"$logs/moe-check.log" 2>&1
rc=$?
grep -E '^moe +forward|^plugin-check' "$logs/moe-check.log"
grep -q 'expert ranges *OK' "$logs/moe-check.log" || bad "plugin-check moe cuda ran no expert-range case (see $logs/moe-check.log)"
[ "$rc" -eq 0 ] || bad "plugin-check moe cuda exited $rc (see $logs/moe-check.log)"
if "$build/sy-mkmodel" --preset test-mixtral --seed 7 --out "$build/gpu-presets/tune-mixtral" --quiet >"$logs/mk-tune.log" 2>&1; then
    "$sy" tune-moe -c "$config" --plugin-dir "$plugins" --model "$build/gpu-presets/tune-mixtral" \
        --tokens 1,64 --reps 3 --dry-run -v >"$logs/tune-moe.log" 2>&1
    rc=$?
    grep -E '^#|^ +[0-9]|^  tile|self-check' "$logs/tune-moe.log"
    [ "$rc" -eq 0 ] && grep -Eq '^ +64 +[0-9.]+ ' "$logs/tune-moe.log" ||
        bad "tune-moe --dry-run on moe cuda exited $rc (see $logs/tune-moe.log)"
    # The tensor-core tiles are candidates: each mma tile timed (so it passed its self-check at prepare);
    # each wgmma tile timed on compute capability 9.0, elsewhere refused for that reason alone.
    # The fp4mma tiles are listed and refused here: test-mixtral's experts are not NVFP4 with activations = nvfp4.
    for t in mma64x8x32 mma64x32x32 mma128x64x32 wgmma128x16x32 wgmma128x64x32 fp4mma64x8x128 fp4mma64x32x128 \
             fp4mma128x64x128; do
        if ! grep -q "^  tile $t" "$logs/tune-moe.log"; then
            bad "tune-moe --dry-run did not list tile $t (see $logs/tune-moe.log)"
        elif grep -q "^  tile $t refused" "$logs/tune-moe.log"; then
            case $t in
                wgmma*) grep -q "^  tile $t refused: .*compute capability 9.0 only" "$logs/tune-moe.log" ||
                    bad "tune-moe refused tile $t: $(grep "^  tile $t refused" "$logs/tune-moe.log")" ;;
                fp4mma*) grep -q "^  tile $t refused: .*activations = nvfp4" "$logs/tune-moe.log" ||
                    bad "tune-moe refused tile $t: $(grep "^  tile $t refused" "$logs/tune-moe.log")" ;;
                *) bad "tune-moe refused tile $t: $(grep "^  tile $t refused" "$logs/tune-moe.log")" ;;
            esac
        fi
    done
else
    bad "sy-mkmodel --preset test-mixtral: $(tail -1 "$logs/mk-tune.log")"
fi

step "4. golden greedy generations with $config"
expected=$shared/models/expected_greedy.json
if [ ! -f "$expected" ]; then
    bad "$expected not found (set SY_SHARED_DIR)"
else
    # One line per case: model, prompt ids, expected ids (comma-separated).
    python3 - "$expected" >"$logs/golden-cases.txt" <<'PY' || bad "cannot read $expected with python3"
import json, sys
d = json.load(open(sys.argv[1]))
for name, cases in d["models"].items():
    for c in cases:
        print(name, ",".join(map(str, c["prompt_ids"])), " ".join(map(str, c["greedy_ids"])))
PY
    n=0
    nbad=0
    while read -r name pids want; do
        n=$((n + 1))
        nw=$(echo "$want" | wc -w)
        got=$("$sy" generate -c "$config" --plugin-dir "$plugins" --model "$shared/models/$name" \
            --set scheduler.max_running=4 --set scheduler.kv_cache_size=256M \
            --prompt-ids "$pids" -n "$nw" --ignore-eos --print-ids -q 2>&1 >/dev/null | sed -n 's/^generated_ids: //p')
        if [ "$got" = "$want" ]; then
            echo "ok   $name prompt $pids"
        else
            nbad=$((nbad + 1))
            echo "FAIL $name prompt $pids"
            echo "     expected: $want"
            echo "     got:      $got"
        fi
    done <"$logs/golden-cases.txt"
    echo "golden: $n cases, $nbad differ"
    [ "$n" -gt 0 ] || bad "no golden cases read"
    [ "$nbad" -eq 0 ] || bad "$nbad golden generations differ"
fi

step "4b. synthetic checkpoints (MLA, DSA, GLM MoE, FP8, NVFP4): $config ids = the CPU plugins' ids"
# The CPU plugins are the reference for what the GPU plugins compute on these
# (sy-mkmodel presets; FP8 and NVFP4 linears stay quantised on the GPU).
cpu_cfg=$logs/cpu.ini
printf '[device]\nplugin = cpu\n[attention]\nplugin = auto\n[moe]\nplugin = auto\n[comm]\nplugin = local\n' >"$cpu_cfg"
nq=0
for p in test-glm4-moe test-deepseek-v3 test-glm5 test-deepseek-v32 test-llama-fp8 test-llama-fp8-tensor \
         test-llama:nvfp4 test-qwen2 test-qwen3; do
    d=$build/gpu-presets/$p
    set -- --preset "${p%:*}"
    [ "${p#*:}" = "$p" ] || set -- "$@" --quant "${p#*:}"
    if ! "$build/sy-mkmodel" "$@" --out "$d" --quiet >"$logs/mk-$p.log" 2>&1; then
        bad "sy-mkmodel --preset $p: $(tail -1 "$logs/mk-$p.log")"
        continue
    fi
    ids_of() { sed -n 's/^generated_ids: //p' "$1"; }
    "$sy" generate -c "$cpu_cfg" --plugin-dir "$plugins" --model "$d" --set scheduler.kv_cache_size=64M \
        --prompt-ids 1,2,3,4,5 -n 24 --ignore-eos --print-ids -q >/dev/null 2>"$logs/$p.cpu"
    "$sy" generate -c "$config" --plugin-dir "$plugins" --model "$d" --set scheduler.kv_cache_size=256M \
        --prompt-ids 1,2,3,4,5 -n 24 --ignore-eos --print-ids -q >/dev/null 2>"$logs/$p.gpu"
    want=$(ids_of "$logs/$p.cpu")
    got=$(ids_of "$logs/$p.gpu")
    if [ -n "$got" ] && [ "$got" = "$want" ]; then
        echo "ok   $p"
    else
        nq=$((nq + 1))
        echo "FAIL $p"
        echo "     cpu: $want"
        echo "     gpu: $got $(grep -v '_ids:' "$logs/$p.gpu" | tail -1)"
    fi
done
# Sliding windows on the GPU attention plugin: one window for every layer (Mistral), and per layer
# (sy_attn_problem.layer_window: Qwen2 and Qwen3 with max_window_layers 1, layer 0 full; gpt-oss's even layers,
# with its attention sinks, biased experts, and MXFP4 experts on the moe plugin auto picks); 29 positions pass them.
for w in "mistral-window8|--arch mistral --sliding-window 8" \
         "qwen2-window8-from-layer1|--preset test-qwen2 --sliding-window 8 --max-window-layers 1" \
         "qwen3-window6-from-layer1|--preset test-qwen3 --sliding-window 6 --max-window-layers 1 --attention-bias" \
         "gpt-oss-window8-sinks|--preset test-gpt-oss" "gpt-oss-mxfp4|--preset test-gpt-oss --experts-layout mxfp4"; do
    p=${w%%|*}
    d=$build/gpu-presets/$p
    # shellcheck disable=SC2086
    if ! "$build/sy-mkmodel" ${w#*|} --out "$d" --quiet >"$logs/mk-$p.log" 2>&1; then
        bad "sy-mkmodel ${w#*|}: $(tail -1 "$logs/mk-$p.log")"
        continue
    fi
    "$sy" generate -c "$cpu_cfg" --plugin-dir "$plugins" --model "$d" --set scheduler.kv_cache_size=64M \
        --prompt-ids 1,2,3,4,5 -n 24 --ignore-eos --print-ids -q >/dev/null 2>"$logs/$p.cpu"
    "$sy" generate -c "$config" --plugin-dir "$plugins" --model "$d" --set scheduler.kv_cache_size=256M \
        --prompt-ids 1,2,3,4,5 -n 24 --ignore-eos --print-ids -q >/dev/null 2>"$logs/$p.gpu"
    want=$(sed -n 's/^generated_ids: //p' "$logs/$p.cpu")
    got=$(sed -n 's/^generated_ids: //p' "$logs/$p.gpu")
    if [ -n "$got" ] && [ "$got" = "$want" ]; then
        echo "ok   $p"
    else
        nq=$((nq + 1))
        echo "FAIL $p"
        echo "     cpu: $want"
        echo "     gpu: $got $(grep -v '_ids:' "$logs/$p.gpu" | tail -1)"
    fi
done
[ "$nq" -eq 0 ] || bad "$nq synthetic checkpoints differ from the CPU plugins"

step "4c. quantised MoE checkpoints on moe cuda (FP8, NVFP4 experts), routing = device and host: ids = the CPU plugins' ids"
# The experts stay FP8 / NVFP4 on the GPU (moe cuda decodes them in its GEMM);
# both routing paths must pick what the CPU picks. [moe] plugin = cuda so a
# fallback to moe cpu cannot pass unnoticed.
nm=0
for p in test-mixtral-nvfp4 tiny-glm5-nvfp4 test-mixtral:nvfp4-experts test-deepseek-v3:fp8 test-glm4-moe:fp8-tensor \
         test-qwen3moe:fp8; do
    d=$build/gpu-presets/moe-$(printf %s "$p" | tr : -)
    set -- --preset "${p%:*}"
    [ "${p#*:}" = "$p" ] || set -- "$@" --quant "${p#*:}"
    if ! "$build/sy-mkmodel" "$@" --out "$d" --quiet >"$logs/mk-moe-$p.log" 2>&1; then
        bad "sy-mkmodel $*: $(tail -1 "$logs/mk-moe-$p.log")"
        continue
    fi
    ids_of() { sed -n 's/^generated_ids: //p' "$1"; }
    "$sy" generate -c "$cpu_cfg" --plugin-dir "$plugins" --model "$d" --set scheduler.kv_cache_size=64M \
        --prompt-ids 1,2,3,4,5 -n 24 --ignore-eos --print-ids -q >/dev/null 2>"$logs/moe-$p.cpu"
    want=$(ids_of "$logs/moe-$p.cpu")
    for r in device host; do
        "$sy" generate -c "$config" --plugin-dir "$plugins" --model "$d" --set scheduler.kv_cache_size=256M \
            --set moe.plugin=cuda --set moe.routing=$r \
            --prompt-ids 1,2,3,4,5 -n 24 --ignore-eos --print-ids -q >/dev/null 2>"$logs/moe-$p.gpu-$r"
        got=$(ids_of "$logs/moe-$p.gpu-$r")
        if [ -n "$want" ] && [ "$got" = "$want" ]; then
            echo "ok   $p (routing = $r)"
        else
            nm=$((nm + 1))
            echo "FAIL $p (routing = $r)"
            echo "     cpu: $want"
            echo "     gpu: $got $(grep -v '_ids:' "$logs/moe-$p.gpu-$r" | tail -1)"
        fi
    done
done
[ "$nm" -eq 0 ] || bad "$nm quantised MoE runs on moe cuda differ from the CPU plugins"

step "4d. [device] graphs = on against off: same ids, steps replayed (tests/gpu/test_cuda_graphs)"
# Six sequences crossing the 256-token bound, a batch shrinking every 8
# steps, one full logits row (see the program). split_k = off: recorded and
# plain steps then sum attention in the same order, so the logits must be
# equal bit for bit; auto: split-K counts come from the bound when recorded,
# so only the ids must agree.
tcg=$build/tests/gpu/test_cuda_graphs
ng=0
graphs_case() { # NAME LOG ARGS...: one test_cuda_graphs run
    n=$1 l=$2
    shift 2
    if "$tcg" -c "$config" --plugin-dir "$plugins" "$@" >"$l" 2>&1; then
        echo "ok   $n: $(sed -n 's/^graphs off: //p' "$l")"
    else
        ng=$((ng + 1))
        echo "FAIL $n"
        tail -8 "$l" | sed 's/^/     /'
    fi
}
for name in stories260k tiny-llama tiny-mixtral tiny-qwen3moe; do
    moe=
    case $name in *mixtral* | *moe*) moe="--set moe.plugin=cuda --set moe.routing=device" ;; esac
    # shellcheck disable=SC2086
    graphs_case "$name split_k = off" "$logs/graphs-$name-off.log" --set "model.path=$shared/models/$name" \
        --set attention.split_k=off $moe --expect-replays --bitwise
    # shellcheck disable=SC2086
    graphs_case "$name split_k = auto" "$logs/graphs-$name-auto.log" --set "model.path=$shared/models/$name" \
        --set attention.split_k=auto $moe --expect-replays
done
d=$build/gpu-presets/graphs-test-mixtral
if "$build/sy-mkmodel" --preset test-mixtral --out "$d" --quiet >"$logs/mk-graphs.log" 2>&1; then
    graphs_case "test-mixtral routing = device" "$logs/graphs-mixtral-device.log" --set "model.path=$d" \
        --set moe.plugin=cuda --set moe.routing=device --expect-replays
    graphs_case "test-mixtral routing = host (falls back)" "$logs/graphs-mixtral-host.log" --set "model.path=$d" \
        --set moe.plugin=cuda --set moe.routing=host --expect-fallback
    grep -q "graphs: recording the step failed: moe cuda: \[moe\] routing = host" "$logs/graphs-mixtral-host.log" ||
        { ng=$((ng + 1)); echo "FAIL routing = host: no warning naming moe routing in $logs/graphs-mixtral-host.log"; }
else
    bad "sy-mkmodel --preset test-mixtral: $(tail -1 "$logs/mk-graphs.log")"
fi
[ "$ng" -eq 0 ] || bad "$ng graphs runs failed"

step "5. decode speed of a synthetic 8B-class bf16 llama"
if [ $do_8b = yes ]; then
    if [ ! -f "$model8b/config.json" ]; then
        # Llama-3-8B's shape (hidden 4096, 32 layers, 32/8 heads, ffn 14336) with a 32000 vocabulary.
        "$build/sy-mkmodel" --preset bench-110m --out "$model8b" --hidden 4096 --layers 32 --heads 32 --kv-heads 8 \
            --ffn 14336 --vocab 32000 --no-tie --max-pos 4096 --dtype bf16 --shards 8 --quiet \
            >"$logs/mkmodel.log" 2>&1 || { tail -5 "$logs/mkmodel.log"; bad "sy-mkmodel 8b"; }
    fi
    bw=$("$build/tests/gpu/bw_probe" | sed -n 's/^d2d_bandwidth_gbs //p')
    echo "device copy bandwidth: ${bw:-?} GB/s (cudaMemcpy D2D, read + write)"
    printf '| batch | tok/s | ms/step | bound tok/s (batch x bandwidth / weight bytes) | of bound | graphs on: tok/s | ms/step |\n'
    printf '|---:|---:|---:|---:|---:|---:|---:|\n'
    for b in 1 64; do
        line=$("$build/tests/gpu/bench_decode" -c "$config" --plugin-dir "$plugins" \
            --set "model.path=$model8b" --set attention.kv_dtype=bf16 --batch $b --prompt 32 --steps 32 2>"$logs/bench-$b.log")
        echo "$line" >>"$logs/bench-$b.log"
        tps=$(echo "$line" | sed -n 's/.*: \([0-9.]*\) tok\/s.*/\1/p')
        ms=$(echo "$line" | sed -n 's/.*(\([0-9.]*\) ms\/step).*/\1/p')
        wb=$(echo "$line" | sed -n 's/.*weights \([0-9]*\) bytes.*/\1/p')
        if [ -z "$tps" ] || [ -z "$bw" ] || [ -z "$wb" ]; then
            echo "| $b | failed: $(tail -1 "$logs/bench-$b.log") | | | | | |"
            continue
        fi
        gline=$("$build/tests/gpu/bench_decode" -c "$config" --plugin-dir "$plugins" --set "model.path=$model8b" \
            --set attention.kv_dtype=bf16 --set device.graphs=on --batch $b --prompt 32 --steps 32 \
            2>"$logs/bench-graphs-$b.log")
        echo "$gline" >>"$logs/bench-graphs-$b.log"
        gtps=$(echo "$gline" | sed -n 's/.*: \([0-9.]*\) tok\/s.*/\1/p')
        gms=$(echo "$gline" | sed -n 's/.*(\([0-9.]*\) ms\/step).*/\1/p')
        awk -v b="$b" -v t="$tps" -v ms="$ms" -v bw="$bw" -v wb="$wb" -v gt="${gtps:-failed}" -v gms="${gms:-}" 'BEGIN {
            bound = b * bw * 1e9 / wb
            printf "| %d | %.1f | %.2f | %.1f | %.0f%% | %s | %s |\n", b, t, ms, bound, 100 * t / bound, gt, gms }'
    done
    # Time to first token: one 4000-token prefill step (the second of two; the first warms up) with attention's
    # prefill rows on CUDA cores (k_attend) and on tensor cores (k_attend_tc, forced: an error if its self-check
    # fails), the rest of the step being the same.
    echo
    printf '| prefill (tokens) | prefill_kernel | ms | tok/s |\n|---:|---|---:|---:|\n'
    for pk in cuda-cores tensor-cores; do
        pline=$("$build/tests/gpu/bench_decode" -c "$config" --plugin-dir "$plugins" --set "model.path=$model8b" \
            --set attention.kv_dtype=bf16 --set "attention.prefill_kernel=$pk" --set scheduler.kv_cache_size=2G \
            --set scheduler.max_batch_tokens=4096 --batch 2 --prompt 4000 --steps 3 --prefill-time 1 \
            2>"$logs/bench-prefill-$pk.log")
        echo "$pline" >>"$logs/bench-prefill-$pk.log"
        pms=$(echo "$pline" | sed -n 's/^prefill: [0-9]* tokens in \([0-9.]*\) ms.*/\1/p')
        ptps=$(echo "$pline" | sed -n 's/.* ms (\([0-9.]*\) tok\/s).*/\1/p')
        if [ -z "$pms" ]; then
            echo "| 4000 | $pk | failed: $(tail -1 "$logs/bench-prefill-$pk.log") | |"
        else
            echo "| 4000 | $pk | $pms | $ptps |"
        fi
    done
else
    echo "skipped (--skip-8b)"
fi

step "done"
[ $fail -eq 0 ] && echo "GPU run: PASS" || echo "GPU run: FAIL"
exit $fail
