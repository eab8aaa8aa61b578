#!/usr/bin/env bash
# The end-to-end rows of docs/benchmarks.md's GPU table (`bertkit train` on real shards, and the
# bench's step on batches of the same shards), in one run on one CUDA machine:
#
#     bench/gpu_e2e.sh OUT_DIR SHARDS128 SHARDS512 [BUDGET_S]   # from the repository root; 480
#     STAGES="e2e512 e2e512-unpad" bench/gpu_e2e.sh OUT_DIR SHARDS128 SHARDS512
#
# SHARDS128: the demo's pair shards (`bertkit demo --train-steps 0` writes out/demo/shards);
# SHARDS512: the same documents at 512 (the `bertkit examples` line of docs/benchmarks.md).
# Both are made on any machine and copied to the GPU one: the script reads only them.
# Stages, each under `timeout` and skipped when the budget has too little left (the log says
# so); each trainer run writes OUT_DIR/STAGE/metrics.jsonl, each bench run OUT_DIR/STAGE.json,
# and the log a summary line per trainer run: the median seq/s, tokens/s and MFU of its rows
# after step 20 (the compilation's).
#   e2e128        bertkit train, base, micro-batch 256, compiled, 4 workers, 60 steps
#   bench128      bench.train_step, base, batch 256, compiled, on batches of SHARDS128: the
#                 step without the loader, which e2e128 is to be within 3 % of
#   e2e512        bertkit train on SHARDS512, base, micro-batch 64, compiled, the padded batch
#                 (--unpad off)
#   e2e512-ad0    the same with --attention-dropout 0, which torch's varlen kernel needs (the
#                 default --unpad auto would unpad there: off keeps the padded batch)
#   e2e512-unpad  that with --unpad on: only the real tokens through the encoder, attending
#                 through the varlen kernel, their count a dynamic dimension of the compiled
#                 graph
#   e2e512-unpad-2018 the 2018 recipe (attention dropout 0.1) with --unpad on: the real tokens
#                 through aten's flash varlen kernel with dropout, against e2e512
#   e2e512-nodrop today's recipe: no hidden or attention dropout (MosaicML's, cramming's),
#                 the default --unpad auto (the varlen kernel, the batch holding padding):
#                 the fastest run at 512 the levers give, for the 1.3x goal
# TRAIN_ARGS is appended to every trainer run's flags, BENCH_ARGS to the bench's (a smoke test
# on the CPU: TRAIN_ARGS="--device cpu --model tiny --micro-batch-size 4 --max-steps 3
# --warmup-steps 1 --num-workers 0 --no-compile" BENCH_ARGS="--device cpu --model tiny --modes
# eager --batch 4 --steps 1 --repeats 1 --threads 1" SKIP_STEPS=0).
# It checks first, in one python call, that torch sees a CUDA device, and stops at once
# otherwise: exit 3, one line (unless TRAIN_ARGS and BENCH_ARGS both ask for --device cpu,
# as the smoke test does). A name in STAGES that is no stage: exit 2, naming the stages. It
# ends with a line naming each stage that failed or was skipped, and exit 1, when one did;
# exit 0 only when every requested stage ran and passed.
# PYTHON names the interpreter (one with a CUDA torch, webdataset and safetensors); unset,
# the checkout's .venv/bin/python when there is one, else python3 (packages on PYTHONPATH do).
set -u -o pipefail
case ${1:-} in  # its help is the comment above; any other flag is a mistaken OUT_DIR
    -h | --help) sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "usage: bench/gpu_e2e.sh OUT_DIR SHARDS128 SHARDS512 [BUDGET_S] (--help: the stages)" >&2; exit 2 ;;
esac
usage="usage: bench/gpu_e2e.sh OUT_DIR SHARDS128 SHARDS512 [BUDGET_S]"
out=${1:?$usage}
shards128=${2:?$usage}
shards512=${3:?$usage}
budget=${4:-480}
skip=${SKIP_STEPS:-20}
known=(e2e128 bench128 e2e512 e2e512-ad0 e2e512-unpad e2e512-unpad-2018 e2e512-nodrop)
# shellcheck source-path=SCRIPTDIR source=gpu_stages.sh
source "$(dirname "$0")/gpu_stages.sh"
check_stages
require_cuda "${TRAIN_ARGS:-}" "${BENCH_ARGS:-}"
mkdir -p "$out"
log="$out/e2e.log"
export PYTHONUNBUFFERED=1
start=$SECONDS

machine webdataset safetensors 2>&1 | tee "$log"

train() { # train NAME LIMIT_S SHARDS FLAGS…: one bertkit train run and its summary line
    local name=$1 limit=$2 shards=$3
    shift 3
    wanted "$name" || return 0
    # shellcheck disable=SC2086 # TRAIN_ARGS is a list of flags, split on purpose
    timed "$name" "$limit" "$python" -m trainer.train --shards "$shards" --output "$out/$name" \
        --overwrite --model base --max-steps 60 --warmup-steps 5 --log-every 5 --eval-every 0 \
        --eval-batches 1 --no-tensorboard "$@" ${TRAIN_ARGS:-} || return 1 # in finish's summary
    "$python" - "$out/$name/metrics.jsonl" "$skip" <<'EOF' 2>&1 | tee -a "$log"
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
rows = [r for r in rows if r.get("kind") == "train" and r["step"] > int(sys.argv[2])]
def median(key):
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else float("nan")
mfu = median("mfu")  # none known on a CPU: nan
print(f"== summary: {len(rows)} rows after step {sys.argv[2]}: {median('seq_per_s'):,.0f} seq/s,"
      f" {median('tokens_per_s'):,.0f} tokens/s, MFU " + (f"{100 * mfu:.1f} %" if mfu == mfu else "n/a"))
EOF
}

train e2e128 240 "$shards128" --micro-batch-size 256 --compile --num-workers 4
if wanted bench128; then
    # shellcheck disable=SC2086 # BENCH_ARGS is a list of flags, split on purpose
    timed bench128 150 "$python" -m bench.train_step --shards "$shards128" --seq 128 \
        --model base --batch 256 --modes compiled --json "$out/bench128.json" ${BENCH_ARGS:-}
fi
at512=(--micro-batch-size 64 --compile --num-workers 4)
train e2e512 150 "$shards512" "${at512[@]}" --unpad off
train e2e512-ad0 150 "$shards512" "${at512[@]}" --attention-dropout 0 --unpad off
train e2e512-unpad 200 "$shards512" "${at512[@]}" --attention-dropout 0 --unpad on
train e2e512-unpad-2018 200 "$shards512" "${at512[@]}" --unpad on
train e2e512-nodrop 200 "$shards512" "${at512[@]}" --hidden-dropout 0 --attention-dropout 0

finish
