#!/usr/bin/env bash
# The training step's GPU rows of docs/benchmarks.md, in one run on one CUDA machine:
#
#     bench/gpu_check.sh OUT_DIR [BUDGET_S]      # from the repository root; BUDGET_S 560
#     STAGES="autotune autotune-warm" bench/gpu_check.sh OUT_DIR   # only these stages
#
# Stages, the issue's figures first, then the levers from the cheapest, each under `timeout`
# and skipped when the budget has too little left (the log says so); every stage's table goes
# to OUT_DIR/check.log, its results to OUT_DIR/STAGE.json. BERT-base at 128, batch 256,
# compiled, bf16, fused AdamW unless a stage says otherwise:
#   base           bertkit, with transformers' BertForPreTraining beside it (÷ transformers)
#   large          BERT-large at 128, batch 128
#   dropout0       --hidden-dropout 0 --attention-dropout 0 (cramming's recipe: no dropout)
#   fp16           --precision fp16: fp16 autocast with dynamic loss scaling
#   kernels        python -m bench.kernels --compiled: each Triton kernel against the plain
#                  ops one layer's block at a time, timed and checked as `bertkit train`'s
#                  auto does (base and large), whether they compile, agree and pay here
#   ffn            --ffn-epilogue off, then on: the feed-forward's bias and GELU in the
#                  matmul's epilogue (trainer/ffn_epilogue.py's Triton kernels, tuned at the
#                  row's start); ffn-large the same for BERT-large at batch 128
#   add-norm       --add-norm off, then on: each dropout, residual add and LayerNorm in one
#                  Triton kernel each way (trainer/add_norm.py), the 2018 recipe's dropout
#   unpad512       base at 512, batch 64, eager, 18 % of the positions padding (the demo's pair
#                  shards), --attention-dropout 0 (torch's varlen kernel has none): --unpad off,
#                  then on (real tokens only through the encoder, attending through varlen)
#   pad512         the same batches compiled: padded (--unpad off), then --unpad on (the real
#                  tokens' count a dynamic dimension of the compiled graph)
#   pad512-drop    the same with the 2018 recipe's attention dropout 0.1: --unpad on attends
#                  through aten's flash varlen kernel with dropout (varlen_attn has none)
#   fp8            BERT-large at 128, batch 128, --fp8 tensorwise, every encoder Linear
#                  (--fp8-layers all); the large stage is its bf16 row. Needs torchao (the
#                  gpu extra): where it is not installed the rows fail saying so
#   fp8-rowwise    the same, --fp8 rowwise
#   fp8-auto       the same, --fp8 tensorwise --fp8-layers auto (the Q/K/V and intermediate
#                  products only, those torchao's H100 tables show faster in FP8)
#   autotune       --compile-mode max-autotune, inductor's caches in OUT_DIR/compile-cache: the
#                  tuning (minutes: docs/benchmarks.md, "On a GPU") is in the row's warmup s
#   autotune-warm  the same again: the tuning loads from OUT_DIR/compile-cache (a requeued
#                  job's start, as `bertkit train --resume` finds OUTPUT/compile-cache)
# Each stage's limit is over the time it took on an H200 (docs/benchmarks.md, "On a GPU",
# gives the stages' times), and every finished row is in the stage's JSON as soon as it is
# measured. The budget's order runs the cheap levers
# before autotune's minutes. When autotune does not fit (its log line says SKIPPED, or exit
# 124 at its limit), rerun it with the same OUT_DIR and a budget of its own:
# STAGES="autotune autotune-warm" bench/gpu_check.sh OUT_DIR 420; when only autotune-warm did
# not fit, STAGES=autotune-warm: a later job's start is what it measures. The fp8 stages do
# not fit beside the others either: STAGES="fp8 fp8-rowwise fp8-auto" with a budget of 480 in
# a run of their own.
# Synthetic batches over BERT's 30,522-token vocabulary.
# It checks first, in one python call, that torch sees a CUDA device, and stops at once
# otherwise: exit 3, one line (unless BENCH_ARGS asks for --device cpu, as the smoke test
# below does). A name in STAGES that is no stage: exit 2, naming the stages. It ends with a
# line naming each stage that failed or was skipped, and exit 1, when one did; exit 0 only
# when every requested stage ran and passed.
# PYTHON names the interpreter (one with a CUDA torch, transformers and triton); unset, the
# checkout's .venv/bin/python when there is one, else python3 (packages on PYTHONPATH do).
# BENCH_ARGS is appended to every stage's flags, KERNEL_ARGS to the kernels stage's (a smoke
# test on the CPU:
# BENCH_ARGS="--device cpu --model tiny --modes eager --batch 4 --steps 1 --repeats 1 --threads 1 --warmup 1"
# KERNEL_ARGS="--device cpu --model tiny --rows 40", Triton's interpreter).
set -u -o pipefail
case ${1:-} in  # its help is the comment above; any other flag is a mistaken OUT_DIR
    -h | --help) sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "usage: bench/gpu_check.sh OUT_DIR [BUDGET_S] (--help: the stages)" >&2; exit 2 ;;
esac
out=${1:?usage: bench/gpu_check.sh OUT_DIR [BUDGET_S]}
budget=${2:-560}
known=(base large dropout0 fp16 kernels ffn ffn-large add-norm unpad512 pad512 pad512-drop
    fp8 fp8-rowwise fp8-auto autotune autotune-warm)
# shellcheck source-path=SCRIPTDIR source=gpu_stages.sh
source "$(dirname "$0")/gpu_stages.sh"
check_stages
require_cuda "${BENCH_ARGS:-}"
mkdir -p "$out"
log="$out/check.log"
cache="$(cd "$out" && pwd)/compile-cache"
export PYTHONUNBUFFERED=1
start=$SECONDS

machine transformers triton torchao 2>&1 | tee "$log"

stage() { # stage NAME LIMIT_S ARGS…: one bench.train_step run on synthetic batches
    local name=$1 limit=$2
    shift 2
    wanted "$name" || return 0
    # shellcheck disable=SC2086 # BENCH_ARGS is a list of flags, split on purpose
    timed "$name" "$limit" "$python" -m bench.train_step --synthetic --json "$out/$name.json" \
        "$@" ${BENCH_ARGS:-}
}

cached() { # the files inductor's cache in OUT_DIR holds (cache_files), before an autotune stage
    cache_files=0
    [[ -d $cache ]] && cache_files=$(find "$cache" -type f | wc -l)
    echo "== compile cache $cache: $cache_files files" | tee -a "$log"
}

base=(--model base --modes compiled)
stage base 120 "${base[@]}" --reference
stage large 150 --model large --batch 128 --modes compiled
stage dropout0 60 "${base[@]}" --hidden-dropout 0 --attention-dropout 0
stage fp16 60 "${base[@]}" --precision fp16
if wanted kernels; then
    # shellcheck disable=SC2086 # KERNEL_ARGS is a list of flags, split on purpose
    timed kernels 150 "$python" -m bench.kernels --compiled --json "$out/kernels.json" \
        ${KERNEL_ARGS:-}
fi
stage ffn 150 "${base[@]}" --ffn-epilogue off,on
stage ffn-large 150 --model large --batch 128 --modes compiled --ffn-epilogue off,on
stage add-norm 150 "${base[@]}" --add-norm off,on
at512=(--model base --seq 512 --batch 64 --padding 0.18 --attention-dropout 0)
stage unpad512 60 "${at512[@]}" --modes eager --unpad off,on
stage pad512 160 "${at512[@]}" --modes compiled --unpad off,on
stage pad512-drop 160 "${at512[@]}" --attention-dropout 0.1 --modes compiled --unpad off,on
fp8=(--model large --batch 128 --modes compiled)
stage fp8 180 "${fp8[@]}" --fp8 tensorwise --fp8-layers all
stage fp8-rowwise 180 "${fp8[@]}" --fp8 rowwise --fp8-layers all
stage fp8-auto 120 "${fp8[@]}" --fp8 tensorwise --fp8-layers auto
if wanted autotune; then
    cached
    TORCHINDUCTOR_CACHE_DIR=$cache stage autotune 300 "${base[@]}" --compile-mode max-autotune
fi
if wanted autotune-warm; then
    cached
    if ((cache_files > 0)); then
        TORCHINDUCTOR_CACHE_DIR=$cache stage autotune-warm 90 "${base[@]}" --compile-mode max-autotune
    else
        skip autotune-warm "nothing in $cache to load: run autotune first"
    fi
fi

finish
