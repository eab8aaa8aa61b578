#!/usr/bin/env bash
# Extract a multistream enwiki dump on Dataflow. Usage: run_wikipedia.sh PROJECT REGION gs://BUCKET
set -euo pipefail
project=${1:?project}; region=${2:?region}; bucket=${3:?gs://bucket}
cd "$(dirname "$0")/../.."
python -m pipelines.wikipedia \
  --input "$bucket/dumps/enwiki-latest-pages-articles-multistream.xml.bz2" \
  --output "$bucket/documents/enwiki" \
  --runner DataflowRunner --project "$project" --region "$region" \
  --temp_location "$bucket/tmp" --max_num_workers 32 --experiments use_runner_v2
