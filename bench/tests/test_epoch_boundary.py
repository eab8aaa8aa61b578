from bench.epoch_boundary import summarise


def test_the_gap_at_each_boundary_is_the_one_before_the_epoch_s_first_micro_batch():
    # A request at 0, then 6 micro-batches, 2 an epoch: epochs start at micro-batches 2 and 4,
    # which arrive 0.5 s and 0.25 s after the micro-batch before them.
    times = [0.0, 1.0, 1.1, 1.6, 1.7, 1.95, 2.05]
    figures = summarise(times, per_epoch=2)
    assert round(figures["boundary_gap_ms"], 6) == 375.0  # the median of 500 and 250
    assert round(figures["median_gap_ms"], 6) == 100.0  # of 100, 500, 100, 250, 100
    assert round(figures["longest_gap_ms"], 6) == 500.0
    assert figures["wall_s"] == 2.05
