"""Google's create_pretraining_data.py steps, Beam-free: sentence pairs, masked-LM masks and
the seeded draws behind them, each a plain function with an explicit random stream; and
RoBERTa's full-sentence packing (packing.py), which draws nothing."""
