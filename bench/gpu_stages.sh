# shellcheck shell=bash
# What bench/gpu_check.sh and bench/gpu_e2e.sh share, sourced by both: the machine's lines at
# the top of the log, STAGES, and each stage's command under `timeout` within the budget.
# The caller sets out, log, python, budget, start (SECONDS at its start) and failed (0).
# shellcheck disable=SC2154,SC2034 # those variables: assigned and read by the caller

machine() { # machine MODULE…: the date, the GPU, torch's build and each module's version
    date -u +"%Y-%m-%dT%H:%M:%SZ"
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv || true
    "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
    local module
    for module in "$@"; do
        "$python" -c "import $module; print('$module', $module.__version__)" || true
    done
}

wanted() { # wanted NAME: whether STAGES (all when unset) names the stage
    [[ -z ${STAGES:-} || " $STAGES " == *" $1 "* ]]
}

timed() { # timed NAME LIMIT_S COMMAND…: the command under timeout, or a note why it was skipped
    local name=$1 limit=$2
    shift 2
    local left=$((budget - (SECONDS - start)))
    if ((left < limit / 2)); then
        echo "== $name: SKIPPED, ${left}s of the budget left, it needs up to ${limit}s" | tee -a "$log"
        return 1
    fi
    ((limit > left)) && limit=$left
    echo "== $name (limit ${limit}s): $*" | tee -a "$log"
    local began=$SECONDS
    timeout --signal=INT --kill-after=15 "$limit" "$@" 2>&1 | grep -v '^USDT:' | tee -a "$log"
    local code=${PIPESTATUS[0]} # the command's (or timeout's 124), not grep's
    echo "== $name: exit $code after $((SECONDS - began))s" | tee -a "$log"
    ((code == 0)) || failed=1
    return "$code"
}
