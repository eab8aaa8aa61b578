"""bertkit's streaming BERT trainer (reads WebDataset shards; see the trainer issue)."""
