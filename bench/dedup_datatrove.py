"""datatrove's MinHash deduplication, its four steps, as bench.dedup runs it in the
throwaway venv (never a bertkit dependency; this file imports datatrove only):

    WORKDIR/datatrove/bin/python bench/dedup_datatrove.py INPUT.jsonl OUTPUT_DIR

1. MinhashDedupSignature: each document's signature (word 5-grams, 14 buckets × 8 hashes,
   datatrove's defaults), 2. MinhashDedupBuckets: matches within each bucket (14 tasks),
3. MinhashDedupCluster: the documents to remove, 4. MinhashDedupFilter: the input without
them, the removed ones to OUTPUT_DIR/removed/ (their ids, for recall and precision). As
datatrove's own examples/minhash_deduplication.py wires them, one task after another in
this one process (`LocalPipelineExecutor`, workers=1): the CPU time of each step is this
process's. Output JSONL is uncompressed, as the input is.
"""

from __future__ import annotations

import sys

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupFilter,
    MinhashDedupSignature,
)
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter


def main(input_file: str, output: str) -> None:
    config = MinhashConfig()  # 5-grams, 14 buckets of 8 hashes
    folder, name = input_file.rsplit("/", 1)

    def reader() -> JsonlReader:
        return JsonlReader(folder, glob_pattern=name, compression=None)

    steps = [
        ([reader(), MinhashDedupSignature(f"{output}/signatures", config=config)], 1),
        (
            [MinhashDedupBuckets(f"{output}/signatures", f"{output}/buckets", config=config)],
            config.num_buckets,
        ),
        ([MinhashDedupCluster(f"{output}/buckets", f"{output}/remove_ids", config=config)], 1),
        (
            [
                reader(),
                MinhashDedupFilter(
                    f"{output}/remove_ids",
                    exclusion_writer=JsonlWriter(f"{output}/removed", compression=None),
                ),
                JsonlWriter(f"{output}/kept", compression=None),
            ],
            1,
        ),
    ]
    for number, (pipeline, tasks) in enumerate(steps):
        LocalPipelineExecutor(
            pipeline=pipeline, tasks=tasks, workers=1, logging_dir=f"{output}/logs/{number}"
        ).run()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
