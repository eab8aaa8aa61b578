"""bertkit's BERT pre-training trainer: streams bertkit's WebDataset shards into a PyTorch BERT.

- model: BERT for pre-training (masked LM, with or without next sentence prediction), as HF
  builds it.
- source: the shard list a run reads (a manifest or shard URLs) and the checks on it.
- recipe: the objective (mlm+nsp or mlm) and masking (static or dynamic) a run trains with.
- order: the epoch's order, the same global batches on any number of processes.
- data: shards from a disk or a URL → shuffled, collated micro-batches, resumable mid-epoch.
- masking: dynamic masks, drawn afresh each epoch in the loader's collate.
- optim: AdamW or LAMB and the warmup-then-decay learning-rate schedule.
- setup, train: a run's set-up; `bertkit train`, the optimizer step and the loop (one process
  or torchrun).
- evaluate: held-out MLM loss and accuracy, NSP accuracy (with the NSP head), the unigram
  baseline.
- metrics: throughput and MFU, metrics.jsonl and TensorBoard logs, the progress line.
- checkpoint: atomic checkpoint writes, the `latest` pointer, the newest few kept.
- distributed: rank, world size and device, and the few collectives the trainer uses.
- export: `bertkit export-hf`, a checkpoint → an HF `BertForPreTraining` (mlm+nsp) or
  `BertForMaskedLM` (mlm) directory.
"""
