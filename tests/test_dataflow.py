"""Every Beam stage translated into a Dataflow job, offline: no Google account, no network.

The real command runs with `--runner DataflowRunner --template_location …`: Beam builds the
job, stages its files (to gs://, here the GCS emulator on loopback) and writes the job
description instead of submitting it. What is checked is what would break a real run:

- the command exits 0 and says where the template is and where the manifest will appear
  (the manifest is written inside the job, so it is not read now), and writes nothing to
  --output;
- without an image, bertkit's own wheel is staged for the workers, and its requirements do
  not pull torch; with `--sdk_container_image`, that image and the machine options reach
  the job's worker pool;
- the graph: no step funnels a corpus through one worker. Each stage's GroupByKeys and
  side inputs are listed below, with what they carry:

  wikipedia  SpreadSplits (Reshuffle)       dump splits (descriptors) spread over workers
             WriteManifest/CollectSummaries per-unit counts (one small dict each) gathered
                                            for the manifest: the one step that must be
                                            single, and it carries no text
  books      SpreadUnits (Reshuffle)        book units, as above; the same manifest step
  corpus     SpreadUnits (Reshuffle)        record-file units, as above; the same manifest step
  dedup      SpreadFiles (Reshuffle)        documents files spread over workers
             GroupPartitions                key partition → spill-file paths of its
                                            members (exact and band keys, signatures): one
                                            unit per ~32 MB of records
             JoinRemovals (CoGroupByKey)    documents file → spill-file paths of its edges,
                                            so each file is rewritten by one worker; the
                                            same manifest step
  vocab      SpreadFiles (Reshuffle)        documents files spread over workers: each
                                            counts its sampled words into a spill file
             LearnPieces (side input)       the units' summaries (counts, no words): one
                                            worker sums the spilled word counts and learns
                                            the pieces, the step whose time grows with the
                                            distinct words only
  examples   SpreadFiles (Reshuffle)        documents files spread over workers
             GroupPartitions                (split, pass, partition) → spill-file paths:
                                            one unit per --work-partition-mb of tokens
             SumBucketCounts, GroupBuckets  examples per shuffle bucket (counts), bucket →
                                            spill paths: one unit per --bucket-mb
             …/GroupRoutes, …/Regroup       on a large corpus (or --shuffle-levels 2), each
                                            of the two: route group → first-level spill
                                            paths, Regroup units per route group
                                            (pipelines/examples/shuffle.py)
             OrderBuckets (side input)      the bucket counts (a dict of ints) to place
                                            each bucket's shards
             GroupPieces                    pieces of a shard that straddles two buckets
             WriteManifest (side inputs)    the shard infos and unit summaries (metadata)
  chain      the stages' own, as above      a documents stage's under its name
                                            (ExtractBooks/…, WriteBooksManifest/…)
             …/GroupRoutes, …/Regroup       always: the plan, made inside the job, may take
                                            one level, and Regroup then passes files on
             side inputs of the steps that  the step before's outputs: manifest paths, then
             wait for the stage before      vocab.json's path (a few strings)
  Records never travel through Beam here: they move in spill files
  (pipelines/beam/spill.py); Beam carries keys, paths and counts.
"""

from __future__ import annotations

import json
import re
import tempfile
import zipfile
from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability.api import beam_runner_api_pb2

from pipelines import books, chain, corpus, dedup, examples, vocab, wikipedia
from pipelines.beam.runner import report_submission
from tests.conftest import DATA_DIR
from tests.support.gcsserver import gcs_emulator

BUCKET = "staging"
IMAGE = "us-central1-docker.pkg.dev/my-project/bertkit/bertkit:0.1.0"
DATAFLOW = [
    "--runner",
    "DataflowRunner",
    "--project",
    "my-project",
    "--region",
    "us-central1",
    "--temp_location",
    f"gs://{BUCKET}/tmp",
    "--machine_type",
    "n2-highmem-8",
    "--max_num_workers",
    "64",
    "--disk_size_gb",
    "100",
]

GROUPS = {
    "wikipedia": (
        {
            "ExtractWikipedia/SpreadSplits/ReshufflePerKey/GroupByKey",
            "WriteManifest/CollectSummaries/CombinePerKey/GroupByKey",
        },
        set(),
    ),
    "books": (
        {
            "ExtractBooks/SpreadUnits/ReshufflePerKey/GroupByKey",
            "WriteManifest/CollectSummaries/CombinePerKey/GroupByKey",
        },
        set(),
    ),
    "corpus": (
        {
            "ExtractCorpus/SpreadUnits/ReshufflePerKey/GroupByKey",
            "WriteManifest/CollectSummaries/CombinePerKey/GroupByKey",
        },
        set(),
    ),
    "dedup": (
        {
            "DeduplicateDocuments/SpreadFiles/ReshufflePerKey/GroupByKey",
            "DeduplicateDocuments/GroupPartitions",
            "DeduplicateDocuments/JoinRemovals/CoGroupByKeyImpl/GroupByKey",
            "WriteManifest/CollectSummaries/CombinePerKey/GroupByKey",
        },
        {"WriteManifest/CollectSummaries/InjectDefault"},
    ),
    "vocab": (
        {
            "SpreadFiles/ReshufflePerKey/GroupByKey",
        },
        {"LearnPieces"},
    ),
    "examples": (
        {
            "CreateExamples/SpreadFiles/ReshufflePerKey/GroupByKey",
            "CreateExamples/GroupPartitions/GroupByKey",
            "WriteShards/SumBucketCounts/GroupByKey",
            "WriteShards/GroupBuckets/GroupByKey",
            "WriteShards/GroupPieces",
        },
        {"WriteShards/OrderBuckets/ParDo(OrderBucketFn)", "WriteManifest"},
    ),
}
# The chain: each stage's own steps (a documents stage's under its name), the regroupings in
# their two-level shape whatever the plan made inside the job chooses (its Regroup passes the
# files on, on one level), and a side input more for every step that waits for the stage
# before it (manifest paths, then vocab.json's path: a few strings).
_WRITE_MANIFESTS = {
    f"Write{stage}Manifest/CollectSummaries/CombinePerKey/GroupByKey"
    for stage in ("Wikipedia", "Books", "Corpus")
}
GROUPS["chain"] = (
    {
        "ExtractWikipedia/SpreadSplits/ReshufflePerKey/GroupByKey",
        "ExtractBooks/SpreadUnits/ReshufflePerKey/GroupByKey",
        "ExtractCorpus/SpreadUnits/ReshufflePerKey/GroupByKey",
        "SpreadFiles/ReshufflePerKey/GroupByKey",
        "CreateExamples/SpreadFiles/ReshufflePerKey/GroupByKey",
        "CreateExamples/GroupPartitions/GroupRoutes",
        "CreateExamples/GroupPartitions/GroupByKey",
        "WriteShards/SumBucketCounts/GroupByKey",
        "WriteShards/GroupBuckets/GroupRoutes",
        "WriteShards/GroupBuckets/GroupByKey",
        "WriteShards/GroupPieces",
    }
    | _WRITE_MANIFESTS,
    {
        "ListDocumentsFiles",
        "CountWords",
        "LearnPieces",
        "CreateExamples/ListDocumentsFiles",
        "CreateExamples/TokenizeDocuments/ParDo(_AfterFn)",
        "CreateExamples/GroupPartitions/Regroup",
        "CreateExamples/PairAndMask/ParDo(_AfterFn)",
        "WriteShards/GroupBuckets/Regroup",
        "WriteShards/OrderBuckets/ParDo(OrderBucketFn)",
        "WriteManifest",
    },
)
# The examples graph with both regroupings in two levels: a GroupByKey per route group more.
TWO_LEVEL_GROUPS = GROUPS["examples"][0] | {
    "CreateExamples/GroupPartitions/GroupRoutes",
    "WriteShards/GroupBuckets/GroupRoutes",
}


@pytest.fixture(scope="module")
def gcs():
    with gcs_emulator(BUCKET) as client:
        yield client


@pytest.fixture(scope="module")
def gcs_inputs(gcs, sample_documents, sample_vocab) -> dict[str, list[str]]:
    """Each stage's input flags, on gs:// as a Dataflow job would read them."""
    bucket = gcs.bucket(BUCKET)

    def upload(local: Path, prefix: str) -> str:
        for path in sorted(p for p in local.rglob("*") if p.is_file()):
            bucket.blob(f"{prefix}/{path.relative_to(local)}").upload_from_filename(str(path))
        return f"gs://{BUCKET}/{prefix}"

    (dump,) = (DATA_DIR / "wikipedia").glob("*.xml.bz2")
    bucket.blob(f"in/dumps/{dump.name}").upload_from_filename(str(dump))
    for book in sorted((DATA_DIR / "books").glob("*.txt")):
        bucket.blob(f"in/books/{book.name}").upload_from_filename(str(book))
    records = "".join(
        json.dumps({"id": book.stem, "text": book.read_text(encoding="latin-1")}) + "\n"
        for book in sorted((DATA_DIR / "books").glob("*.txt"))
    )
    bucket.blob("in/corpus/books.jsonl").upload_from_string(records)
    documents = [upload(d, f"in/documents/{d.name}") for d in sample_documents]
    return {
        "wikipedia": ["--input", f"gs://{BUCKET}/in/dumps/*.xml.bz2"],
        "books": ["--input", f"gs://{BUCKET}/in/books/*.txt"],
        "corpus": ["--input", f"gs://{BUCKET}/in/corpus/*.jsonl"],
        "dedup": ["--documents", *documents],
        "vocab": ["--documents", *documents],
        "examples": ["--documents", *documents, "--vocab", upload(sample_vocab, "in/vocab")],
        "chain": [
            "--wikipedia",
            f"gs://{BUCKET}/in/dumps/*.xml.bz2",
            "--books",
            f"gs://{BUCKET}/in/books/*.txt",
            "--corpus",
            f"gs://{BUCKET}/in/corpus/*.jsonl",
        ],
    }


RUNS = {
    "wikipedia": wikipedia.run,
    "books": books.run,
    "corpus": corpus.run,
    "dedup": dedup.run,
    "vocab": vocab.run,
    "examples": examples.run,
    "chain": chain.run,
}
# What each stage writes last, inside the job: where the command says to look.
LAST_WRITTEN = {
    "examples": "manifest.json",
    "vocab": "vocab.json",
    "chain": "shards/manifest.json",
}


def translate(gcs, stage: str, inputs: list[str], tmp_path: Path, *extra: str):
    """Run the stage with --template_location: (exit code, the job, its graph, the files
    staged for it, the output prefix)."""
    template = tmp_path / f"{stage}.json"
    output = f"out/{stage}-{tmp_path.name}"
    before = {blob.name for blob in gcs.list_blobs(BUCKET)}
    code = RUNS[stage](
        [
            *inputs,
            "--output",
            f"gs://{BUCKET}/{output}",
            *DATAFLOW,
            "--template_location",
            str(template),
            *extra,
        ]
    )
    staged = {
        blob.name.rsplit("/", 1)[-1]: blob
        for blob in gcs.list_blobs(BUCKET, prefix="tmp/")
        if blob.name not in before
    }
    job = json.loads(template.read_text())
    graph = beam_runner_api_pb2.Pipeline.FromString(staged["pipeline.pb"].download_as_bytes())
    return code, job, graph, staged, output


def groups_and_side_inputs(graph) -> tuple[set[str], set[str]]:
    transforms = graph.components.transforms.values()
    groups = {t.unique_name for t in transforms if t.spec.urn == "beam:transform:group_by_key:v1"}
    sides = {
        t.unique_name
        for t in transforms
        if t.spec.urn == "beam:transform:pardo:v1"
        and beam_runner_api_pb2.ParDoPayload.FromString(t.spec.payload).side_inputs
    }
    return groups, sides


@pytest.mark.parametrize("stage", sorted(RUNS))
def test_each_stage_translates_into_a_dataflow_job(gcs, gcs_inputs, stage, tmp_path, capsys):
    code, job, graph, staged, output = translate(
        gcs, stage, gcs_inputs[stage], tmp_path, "--sdk_container_image", IMAGE
    )
    assert code == 0
    manifest = LAST_WRITTEN.get(stage, "_manifest.json")
    # gcloud reads a template from gs:// only: a local one is copied beside the staged files.
    template = f"gs://{BUCKET}/templates/{stage}.json"
    assert capsys.readouterr().out == (
        f"bertkit {stage}: job template written to {tmp_path / f'{stage}.json'}; the job is "
        f"not running. To launch it, copy it to Cloud Storage, which is the only place "
        f"gcloud reads a template from (gcloud storage cp {tmp_path / f'{stage}.json'} "
        f"{template}), then run gcloud dataflow jobs run NAME --gcs-location {template} "
        f"--region us-central1; its manifest appears at gs://{BUCKET}/{output}/{manifest} "
        "when it has finished\n"
    )
    assert list(gcs.list_blobs(BUCKET, prefix=output)) == []  # the job has not run
    (pool,) = job["environment"]["workerPools"]
    assert pool["workerHarnessContainerImage"] == IMAGE
    assert [image["containerImage"] for image in pool["sdkHarnessContainerImages"]] == [IMAGE]
    assert (pool["machineType"], pool["diskSizeGb"]) == ("n2-highmem-8", 100)
    assert pool["autoscalingSettings"]["maxNumWorkers"] == 64
    assert job["environment"]["version"]["job_type"] == "FNAPI_BATCH"
    # The image holds bertkit: nothing else is staged for the workers to install.
    assert not any(name.endswith(".whl") or name == "requirements.txt" for name in staged)
    assert groups_and_side_inputs(graph) == GROUPS[stage]


def test_the_two_level_examples_graph_regroups_in_parallel(gcs, gcs_inputs, tmp_path):
    code, _, graph, _, _ = translate(
        gcs, "examples", gcs_inputs["examples"], tmp_path, "--shuffle-levels", "2"
    )
    assert code == 0
    groups, sides = groups_and_side_inputs(graph)
    assert (groups, sides) == (TWO_LEVEL_GROUPS, GROUPS["examples"][1])
    names = {t.unique_name for t in graph.components.transforms.values()}
    assert {"CreateExamples/GroupPartitions/Regroup", "WriteShards/GroupBuckets/Regroup"} <= names


def test_a_template_on_gcs_is_launched_from_where_it_was_written(capsys):
    options = PipelineOptions([*DATAFLOW, "--template_location", f"gs://{BUCKET}/t/wiki.json"])
    assert report_submission(None, options, "gs://b/wiki/_manifest.json", "bertkit wikipedia") == 0
    assert capsys.readouterr().out == (
        f"bertkit wikipedia: job template written to gs://{BUCKET}/t/wiki.json; the job is not "
        f"running. Launch it (gcloud dataflow jobs run NAME --gcs-location gs://{BUCKET}/t/"
        "wiki.json --region us-central1); its manifest appears at gs://b/wiki/_manifest.json "
        "when it has finished\n"
    )


def test_without_an_image_bertkit_s_wheel_is_staged_without_torch(
    gcs, gcs_inputs, tmp_path, monkeypatch
):
    system_tmp = tmp_path / "system-tmp"  # what tempfile takes for the system's
    system_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))
    code, job, _, staged, _ = translate(gcs, "wikipedia", gcs_inputs["wikipedia"], tmp_path)
    assert code == 0
    # Neither the wheel's folder nor Beam's own (its stager's, its pipeline's) is left.
    assert list(system_tmp.iterdir()) == []
    (pool,) = job["environment"]["workerPools"]
    packages = [package["name"] for package in pool["packages"]]
    wheels = [name for name in packages if name.endswith(".whl")]
    assert wheels == ["bertkit-0.1.0-py3-none-any.whl"]
    assert "requirements.txt" not in packages  # the wheel's own requirements, nothing more
    wheel = tmp_path / wheels[0]
    staged[wheels[0]].download_to_filename(str(wheel))
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read("bertkit-0.1.0.dist-info/METADATA").decode()
    requires = re.findall(r"^Requires-Dist: (.*)$", metadata, re.M)
    unconditional = sorted(r.split(">")[0].split("[")[0] for r in requires if "extra ==" not in r)
    assert unconditional == [
        "apache-beam",
        "blingfire",
        "indexed-bzip2",
        "matplotlib",
        "pyarrow",
        "rensa",
        "smart-open",
        "tokenizers",
        "zstandard",
    ]
    assert [r for r in requires if r.startswith("torch")] == [
        'torch>=2.4; extra == "train"',
        'torchao>=0.12; extra == "gpu"',
    ]
