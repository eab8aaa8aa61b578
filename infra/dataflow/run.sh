#!/usr/bin/env bash
# Launch one stage's Flex Template; returns once the job is submitted and prints its id.
#
#   infra/dataflow/run.sh PROJECT REGION gs://BUCKET STAGE name=value [name=value …]
#
# e.g. run.sh my-project us-central1 gs://my-bucket wikipedia \
#        input=gs://my-bucket/dumps/enwiki-latest-pages-articles-multistream.xml.bz2 \
#        output=gs://my-bucket/documents/enwiki
# STAGE is wikipedia, books, corpus, dedup, vocab, examples or chain; the parameters are its flags
# (infra/dataflow/metadata/STAGE.json). The job's manifest appears in the output directory
# when it has finished. MAX_WORKERS (32) and MACHINE_TYPE (n2-standard-4) size the job.
set -euo pipefail
# shellcheck source=/dev/null  # arguments.bash, linted on its own
source "$(dirname "$0")/arguments.bash"
check_arguments "PROJECT REGION gs://BUCKET STAGE name=value [name=value ...]" 4 9999 "$@"
project=$1
region=$2
bucket=${3%/}
stage=$4
shift 4
case $stage in
  wikipedia | books | corpus | dedup | vocab | examples | chain) ;;
  *) echo "$0: stage $stage: not a Beam stage; one of wikipedia, books, corpus, dedup, vocab, examples, chain" >&2
     exit 2 ;;
esac
template="$bucket/templates/$stage.json"

# The workers run the image the template's launcher runs: build.sh wrote its name into the
# template, with whatever REPOSITORY and version it was built.
image=$(gcloud storage cat "$template" --project "$project" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["image"])')
parameters="sdk_container_image=$image"
for parameter in "$@"; do
  parameters="$parameters~$parameter"  # "~" joins them: values may hold commas
done

gcloud dataflow flex-template run "bertkit-$stage-$(date -u +%Y%m%d-%H%M%S)" \
  --template-file-gcs-location "$template" \
  --project "$project" \
  --region "$region" \
  --temp-location "$bucket/tmp" \
  --staging-location "$bucket/staging" \
  --max-workers "${MAX_WORKERS:-32}" \
  --worker-machine-type "${MACHINE_TYPE:-n2-standard-4}" \
  --parameters "^~^$parameters" \
  --format 'value(job.id)'
