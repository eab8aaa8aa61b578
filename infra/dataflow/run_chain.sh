#!/usr/bin/env bash
# The whole data chain for English Wikipedia + books on Dataflow, in one job (the chain
# template: documents, vocabulary, examples at 128 and 512 tokens):
#
#   infra/dataflow/run_chain.sh PROJECT REGION gs://BUCKET
#
# Expects (see README.md): the multistream dump and its index under gs://BUCKET/dumps/, the
# book files under gs://BUCKET/books/, and the templates from build.sh. Writes
# gs://BUCKET/chain/documents/{wikipedia,books}, gs://BUCKET/chain/vocab and
# gs://BUCKET/chain/shards, as the four stages' templates would one after the other.
set -euo pipefail
# shellcheck source=/dev/null  # arguments.bash, linted on its own
source "$(dirname "$0")/arguments.bash"
check_arguments "PROJECT REGION gs://BUCKET" 3 3 "$@"
project=$1
region=$2
bucket=${3%/}
here=$(dirname "$0")

# Wait for a Dataflow job to finish; stop the chain if it did not succeed.
wait_for() {
  local job=$1 state
  while true; do
    state=$(gcloud dataflow jobs describe "$job" --project "$project" --region "$region" \
      --format 'value(currentState)')
    case $state in
      JOB_STATE_DONE) echo "job $job done"; return 0 ;;
      JOB_STATE_FAILED | JOB_STATE_CANCELLED | JOB_STATE_DRAINED)
        echo "job $job ended $state: see the Dataflow console" >&2; return 1 ;;
      *) sleep 30 ;;
    esac
  done
}

job=$("$here/run.sh" "$project" "$region" "$bucket" chain \
  "wikipedia=$bucket/dumps/enwiki-latest-pages-articles-multistream.xml.bz2" \
  "books=$bucket/books/*.txt" "output=$bucket/chain" \
  "vocab_size=30522" "sample_mb=1024" "max_seq_length=128,512")
wait_for "$job"
echo "shards: $bucket/chain/shards/manifest.json"
