# shellcheck shell=bash
# Sourced by build.sh, run.sh and run_chain.sh: the checks of a script's arguments that come
# before any gcloud call.

# check_arguments USAGE MIN MAX "$@": --help prints the usage line (exit 0); fewer than MIN
# or more than MAX arguments print it to stderr (exit 2), as does a BUCKET (the third
# argument) that is not a gs:// URL.
check_arguments() {
  local usage="usage: $0 $1" min=$2 max=$3
  shift 3
  case ${1:-} in -h | --help) echo "$usage"; exit 0 ;; esac
  if [ $# -lt "$min" ] || [ $# -gt "$max" ]; then
    echo "$usage" >&2
    exit 2
  fi
  case $3 in
    gs://?*) ;;
    *) echo "$0: BUCKET $3: give the bucket as a gs:// URL (gs://my-bucket)" >&2; exit 2 ;;
  esac
}
