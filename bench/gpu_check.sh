#!/usr/bin/env bash
# The training step's GPU rows of docs/benchmarks.md, in one run on one CUDA machine:
#
#     bench/gpu_check.sh OUT_DIR [BUDGET_S]      # from the repository root; BUDGET_S 560
#
# Stages, most wanted first, each under `timeout` and skipped when the budget has too little
# left (the log says so); every stage's table goes to OUT_DIR/check.log, its results to
# OUT_DIR/STAGE.json:
#   base    BERT-base 128, batch 256: eager and compiled, AdamW and LAMB, with transformers
#   large   BERT-large 128, batch 128, compiled, AdamW, with transformers
#   graphs  base compiled AdamW with --compile-mode reduce-overhead (CUDA graphs)
#   pinned  base compiled AdamW, batches in pinned host memory, copied in the timed step
#   again   base compiled AdamW as in `base`: the baseline measured again after the levers
#   b512    base compiled AdamW at batch 512
# On a fresh H100 (2026-11-26) base took 191 s (8 rows, 6 of them compiled, most of it
# compiling), large about 200 s (both rows compiled), the others 20 to 60 s each (inductor's
# cache on the machine holds base's graphs by then): about 9 minutes in all.
# Synthetic full-length batches over BERT's 30,522-token vocabulary; bf16 autocast; fused AdamW.
# BENCH_ARGS is appended to every stage's flags (a smoke test on the CPU:
# BENCH_ARGS="--device cpu --model tiny --modes eager --batch 4 --steps 1 --repeats 1 --threads 1").
set -u -o pipefail
out=${1:?usage: bench/gpu_check.sh OUT_DIR [BUDGET_S]}
budget=${2:-560}
mkdir -p "$out"
log="$out/check.log"
python=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
start=$SECONDS
failed=0

{
    date -u +"%Y-%m-%dT%H:%M:%SZ"
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv || true
    "$python" -c 'import torch, transformers, triton; print("torch", torch.__version__,
        "cuda", torch.version.cuda, "transformers", transformers.__version__,
        "triton", triton.__version__)'
} 2>&1 | tee "$log"

stage() { # stage NAME LIMIT_S ARGS…: one bench.train_step run, or a note why it was skipped
    local name=$1 limit=$2
    shift 2
    local left=$((budget - (SECONDS - start)))
    if ((left < limit / 2)); then
        echo "== $name: SKIPPED, ${left}s of the budget left, it needs up to ${limit}s" | tee -a "$log"
        return
    fi
    ((limit > left)) && limit=$left
    echo "== $name (limit ${limit}s): bench.train_step $*" | tee -a "$log"
    local began=$SECONDS
    timeout --signal=INT --kill-after=15 "$limit" "$python" -m bench.train_step --synthetic \
        --json "$out/$name.json" "$@" ${BENCH_ARGS:-} 2>&1 | grep -v '^USDT:' | tee -a "$log"
    local code=$?
    echo "== $name: exit $code after $((SECONDS - began))s" | tee -a "$log"
    ((code == 0)) || failed=1
}

stage base 230 --model base --reference --optimizer adamw,lamb --profile 3
stage large 220 --model large --batch 128 --modes compiled --reference
stage graphs 60 --model base --modes compiled --compile-mode reduce-overhead
stage pinned 45 --model base --modes compiled --host-batches pinned
stage again 45 --model base --modes compiled
stage b512 100 --model base --batch 512 --modes compiled

echo "== done after $((SECONDS - start))s" | tee -a "$log"
exit $failed
