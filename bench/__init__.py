"""bertkit's benchmarks. Each command runs from the repository root as a module:

    python -m bench.extract --sizes 12,25,50        # extraction against WikiExtractor 3.1.0
    python -m bench.examples --google-bert DIR      # examples against Google's script, vocab
    python -m bench.loader                          # the trainer's input pipeline (demo shards)
    python -m bench.train_step                      # the training step: throughput and MFU
    python -m bench.recipes                         # today's recipes vs 2018's, equal compute
    python -m bench.packing                         # full-sentence shards vs pairs: bytes
    python -m bench.scale_dump --target-mb 50       # the inputs bench.extract builds and caches
    python -m bench.scale_documents --target-mb 50  # ... and bench.examples
    python -m bench.faults --kills 5 --seed 1       # the fault campaign (tests/support's machinery)
    python -m bench.tf_checkpoint                   # Google TF checkpoints: bertkit vs transformers

--help says what each measures and how. The figures measured on the project's machine are
in docs/benchmarks.md, not in the code.

The other modules are parts, not commands:

    measure          CPU time, wall time and peak RSS of a child process tree; the paths,
                     units and report helpers every benchmark shares
    runs             repeated runs of a tool in the work directory: --sizes, output and log
                     paths, a fresh output per run, medians, building inputs in a child
    venvs            throwaway venvs for the tools bertkit is compared with
    extract_quality  bench.extract's text checks: leftover markup, {{convert}} numbers kept
    examples_tools   bench.examples' tools (bertkit examples, Google's script) and their runs
    examples_vocab   bench.examples' bertkit vocab against bare tokenizers
    examples_bytes   bench.examples' bytes per example, bertkit's shards and Google's records
    tf1_on_tf2       runs google-research/bert's script from the user's checkout
                     (--google-bert DIR) on TensorFlow 2, in bench.examples' TensorFlow venv

bench is not part of the bertkit package: it imports schemas, pipelines, trainer and
tests/support (the loopback S3 server, the fault machinery); nothing of bertkit and no test
imports bench.
"""
