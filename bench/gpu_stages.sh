# shellcheck shell=bash
# What bench/gpu_check.sh and bench/gpu_e2e.sh share, sourced by both: the interpreter, the
# stage names STAGES may give, the CUDA device check, the machine's lines at the top of the
# log, each stage's command under `timeout` within the budget, and the closing summary.
# The caller sets known (its stage names), then out, log, budget and start (SECONDS at its
# start) before machine, timed and finish.
# shellcheck disable=SC2154,SC2034 # those variables: assigned and read by the caller

# PYTHON when set; else the checkout's .venv/bin/python when there is one (docs/gpu.md's
# install); else python3 (a machine whose packages lie on PYTHONPATH, without a venv).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ -n ${PYTHON:-} ]]; then
    python=$PYTHON
elif [[ -x $root/.venv/bin/python ]]; then
    python=$root/.venv/bin/python
else
    python=python3
fi
failed_stages=()
skipped_stages=()

check_stages() { # exit 2 naming the known stages when STAGES names one that is not
    local name unknown=()
    for name in ${STAGES:-}; do
        [[ " ${known[*]} " == *" $name "* ]] || unknown+=("$name")
    done
    if ((${#unknown[@]})); then
        echo "bench/$(basename "$0"): error: unknown stage in STAGES: ${unknown[*]} (the stages: ${known[*]})" >&2
        exit 2
    fi
}

require_cuda() { # require_cuda FLAGS…: exit 3 in one line, before any work, when torch sees
    # no CUDA device, unless each of FLAGS (the lists of flags the stages get) asks for the
    # CPU, as the scripts' smoke runs do
    local flags on_cpu=1
    for flags in "$@"; do
        [[ " $flags " == *" --device cpu "* || " $flags " == *" --device=cpu "* ]] || on_cpu=0
    done
    ((on_cpu)) && return 0
    local device
    device=$("$python" -c '
import sys
try:
    import torch
except ImportError as error:
    sys.exit(f"no torch: {error}")
if not torch.cuda.is_available():
    sys.exit(f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device")
print(torch.cuda.get_device_name(0))' 2>&1)
    local code=$?
    device=${device##*$'\n'} # the last line: the probe's, after any warning of torch's
    if ((code != 0)) || [[ -z $device ]]; then
        echo "bench/$(basename "$0"): error: no CUDA device for $python: ${device:-it printed nothing (exit $code)}; nothing measured (PYTHON names the interpreter with a CUDA torch)" >&2
        exit 3
    fi
    echo "== CUDA device: $device ($python)"
}

machine() { # machine MODULE…: the date, the GPU, torch's build and each module's version
    date -u +"%Y-%m-%dT%H:%M:%SZ"
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv || true
    "$python" - "$@" <<'PY'
import importlib, sys
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda)
for name in sys.argv[1:]:
    try:
        module = importlib.import_module(name)
    except ImportError:
        print(f"{name}: not installed")
    else:
        print(name, getattr(module, "__version__", "(no version)"))
PY
}

wanted() { # wanted NAME: whether STAGES (all when unset) names the stage
    [[ -z ${STAGES:-} || " $STAGES " == *" $1 "* ]]
}

skip() { # skip NAME WHY: a requested stage not run, in the log and in the summary
    echo "== $1: SKIPPED, $2" | tee -a "$log"
    skipped_stages+=("$1")
}

timed() { # timed NAME LIMIT_S COMMAND…: the command under timeout, or a note why it was skipped
    local name=$1 limit=$2
    shift 2
    local left=$((budget - (SECONDS - start)))
    if ((left < limit / 2)); then
        skip "$name" "${left}s of the budget left, it needs up to ${limit}s"
        return 1
    fi
    ((limit > left)) && limit=$left
    echo "== $name (limit ${limit}s): $*" | tee -a "$log"
    local began=$SECONDS
    timeout --signal=INT --kill-after=15 "$limit" "$@" 2>&1 | grep -v '^USDT:' | tee -a "$log"
    local code=${PIPESTATUS[0]} # the command's (or timeout's 124), not grep's
    echo "== $name: exit $code after $((SECONDS - began))s" | tee -a "$log"
    ((code == 0)) || failed_stages+=("$name")
    return "$code"
}

finish() { # the closing lines; exit 1 when a requested stage failed or was skipped
    echo "== done after $((SECONDS - start))s" | tee -a "$log"
    if ((${#failed_stages[@]} + ${#skipped_stages[@]})); then
        echo "== NOT ALL MEASURED: failed: ${failed_stages[*]:-none}; skipped: ${skipped_stages[*]:-none}" | tee -a "$log"
        exit 1
    fi
    echo "== all measured" | tee -a "$log"
    exit 0
}
