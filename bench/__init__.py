"""bertkit's benchmarks: each module with a main runs from the repository root as a module.

    python -m bench.extract --sizes 12,25,50       # extraction against WikiExtractor 3.1.0
    python -m bench.examples --sizes 12,25,50,100  # examples against Google's script, vocab
    python -m bench.loader                         # the trainer's input pipeline (demo shards)
    python -m bench.train_step                     # the training step: throughput and MFU
    python -m bench.scale_dump --target-mb 50      # the inputs the first two build and cache
    python -m bench.scale_documents --target-mb 50

Every command takes --help, which says what it measures and how. The figures measured on the
project's machine are in the README's benchmark section, not here.

The shared parts, not commands:

    measure      CPU time, wall time and peak RSS of a child process tree; paths, units and
                 the report helpers (tables, number formats, machine description, results)
    runs         repeated runs of a tool in the work directory: sizes, output and log paths,
                 a fresh output per run, medians, building inputs in a child process
    venvs        throwaway venvs for the tools bertkit is compared with
    s3server     moto's S3 server on loopback (also the tests' S3 endpoint)

Those two benchmarks split along their seams: extract_quality (reading both extractors'
outputs, leftover-markup and {{convert}} counts), examples_tools (running bertkit examples and
Google's create_pretraining_data.py, vendored in third_party/google_bert), examples_vocab
(bertkit vocab against bare tokenizers), examples_bytes (bytes per example, both layouts).
"""
