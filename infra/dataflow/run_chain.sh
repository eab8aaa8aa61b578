#!/usr/bin/env bash
# The whole data chain for English Wikipedia + books on Dataflow, stage after stage:
#
#   infra/dataflow/run_chain.sh PROJECT REGION gs://BUCKET
#
# Expects (see README.md): the multistream dump and its index under gs://BUCKET/dumps/, the
# book files under gs://BUCKET/books/, and the templates from build.sh. Writes
# gs://BUCKET/documents/{enwiki,books}, gs://BUCKET/vocab and gs://BUCKET/shards.
set -euo pipefail
project=${1:?usage: run_chain.sh PROJECT REGION gs://BUCKET}
region=${2:?region}
bucket=${3:?gs://bucket}
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

# 1. Wikipedia and 2. books → documents, as two jobs side by side.
wiki=$("$here/run.sh" "$project" "$region" "$bucket" wikipedia \
  "input=$bucket/dumps/enwiki-latest-pages-articles-multistream.xml.bz2" \
  "output=$bucket/documents/enwiki")
books=$("$here/run.sh" "$project" "$region" "$bucket" books \
  "input=$bucket/books/*.txt" "output=$bucket/documents/books")
wait_for "$wiki"
wait_for "$books"

# 3. The vocabulary: words counted by Beam's local runner on this machine, one worker per
# core, reading gs:// directly; then the pieces learned from the counts. About a minute on 16
# vCPUs for a 1 GiB sample, where a Dataflow job would first spend its start-up (~4 min);
# the vocab template does the same as a job (run.sh … vocab documents=… output=…).
python -m pipelines.vocab \
  --documents "$bucket/documents/enwiki" "$bucket/documents/books" \
  --output "$bucket/vocab" --vocab-size 30522 --sample-mb 1024 \
  --direct_num_workers "$(nproc)" --direct_running_mode multi_processing

# 4. Pre-training examples at 128 and 512 tokens → shards.
shards=$("$here/run.sh" "$project" "$region" "$bucket" examples \
  "documents=$bucket/documents/enwiki,$bucket/documents/books" \
  "vocab=$bucket/vocab" "output=$bucket/shards" "max_seq_length=128,512")
wait_for "$shards"
echo "shards: $bucket/shards/manifest.json"
