"""What the tests need beside the code they test, and the benchmarks may use too.

    s3server       moto's S3 server on loopback (the tests' S3, bench.loader's S3 row)
    gcsserver      gcp-storage-emulator on loopback, every GCS client pointed at it
    portable       Beam's portable job service and external worker pool on loopback
    faultproxy     an S3 proxy on loopback that breaks a seeded share of the requests
    killpoint      `bertkit COMMAND` SIGKILLed right before its N-th rename
    legacy_shards  a copy of shards in the 1.x layout (a tar member per sample)
    faults_runs    the fault suite's pieces: the sample's inputs, running, killing and
                   comparing runs
    faults_training, faults_s3
                   the trainer under kill -9; object storage under faults
    launch         a child Python with SIGINT's default or a file size limit, set before
                   it execs the command (no preexec_fn in a process that runs gRPC)

tests/test_faults.py runs the fault suite on them and `python -m bench.faults` the longer
randomized campaign. tests/support imports the product (schemas, pipelines, trainer,
bertkit), never bench/; bench/ may import tests/support and nothing else of tests/.
"""
