"""Beam-free IO: paths and URLs, retrying reads, compressed inputs, the shard codec and the
vocabulary loader. The trainer, `inspect` and `export-hf` read through this layer alone, so
none of them imports Apache Beam."""
