#!/usr/bin/env bash
# Build bertkit's Dataflow image and one Flex Template per Beam stage.
#
#   infra/dataflow/build.sh PROJECT REGION gs://BUCKET [REPOSITORY]
#
# Pushes REGION-docker.pkg.dev/PROJECT/REPOSITORY/bertkit:VERSION (REPOSITORY defaults to
# "bertkit"; create it once with `gcloud artifacts repositories create`) and, per stage, the
# same image tagged VERSION-STAGE with BERTKIT_STAGE set, then writes
# gs://BUCKET/templates/{wikipedia,books,corpus,dedup,vocab,examples,chain}.json, each naming its stage's image.
# run.sh reads the image from that file, so it launches whatever REPOSITORY was given here.
set -euo pipefail
# shellcheck source=/dev/null  # arguments.bash, linted on its own
source "$(dirname "$0")/arguments.bash"
check_arguments "PROJECT REGION gs://BUCKET [REPOSITORY]" 3 4 "$@"
project=$1
region=$2
bucket=${3%/}
repository=${4:-bertkit}
cd "$(dirname "$0")/../.."

beam_version=$(sed -n 's/^apache-beam==//p' constraints.txt)
version=$(python -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
image="$region-docker.pkg.dev/$project/$repository/bertkit:$version"

rm -f dist/bertkit-*.whl
python -m pip wheel --no-deps -w dist .
docker build -f infra/dataflow/Dockerfile --build-arg "BEAM_VERSION=$beam_version" -t "$image" .
docker push "$image"

for stage in wikipedia books corpus dedup vocab examples chain; do
  # The launcher learns its stage from the image's environment. `flex-template build --env`
  # cannot set it: gcloud takes --env only for an image it builds itself and refuses it
  # beside --image. The stage's tag adds one ENV line (no layer) to the same image.
  # BERTKIT_IMAGE: the launcher's own image, which its workers then run on too.
  printf 'FROM %s\nENV BERTKIT_STAGE=%s BERTKIT_IMAGE=%s\n' "$image" "$stage" "$image-$stage" |
    docker build -t "$image-$stage" -
  docker push "$image-$stage"
  gcloud dataflow flex-template build "$bucket/templates/$stage.json" \
    --image "$image-$stage" \
    --sdk-language PYTHON \
    --metadata-file "infra/dataflow/metadata/$stage.json" \
    --project "$project"
done
echo "image $image (a tag per stage: $image-STAGE); templates under $bucket/templates/"
