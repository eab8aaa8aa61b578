#!/usr/bin/env bash
# Build bertkit's Dataflow image and one Flex Template per Beam stage.
#
#   infra/dataflow/build.sh PROJECT REGION gs://BUCKET [REPOSITORY]
#
# Pushes REGION-docker.pkg.dev/PROJECT/REPOSITORY/bertkit:VERSION (REPOSITORY defaults to
# "bertkit"; create it once with `gcloud artifacts repositories create`), then writes
# gs://BUCKET/templates/{wikipedia,books,vocab,examples}.json, each naming the image and the stage.
set -euo pipefail
project=${1:?usage: build.sh PROJECT REGION gs://BUCKET [REPOSITORY]}
region=${2:?region}
bucket=${3:?gs://bucket}
repository=${4:-bertkit}
cd "$(dirname "$0")/../.."

beam_version=$(sed -n 's/^apache-beam==//p' constraints.txt)
version=$(python -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
image="$region-docker.pkg.dev/$project/$repository/bertkit:$version"

rm -f dist/bertkit-*.whl
python -m pip wheel --no-deps -w dist .
docker build -f infra/dataflow/Dockerfile --build-arg "BEAM_VERSION=$beam_version" -t "$image" .
docker push "$image"

for stage in wikipedia books vocab examples; do
  gcloud dataflow flex-template build "$bucket/templates/$stage.json" \
    --image "$image" \
    --sdk-language PYTHON \
    --metadata-file "infra/dataflow/metadata/$stage.json" \
    --env "BERTKIT_STAGE=$stage" \
    --project "$project"
done
echo "image $image; templates under $bucket/templates/"
