from bench.mix_shares import shares


def test_the_rows_give_the_drawn_counts_and_the_batch_range():
    rows = shares([0.5, 0.5], 64, 4, seed=1)
    assert rows == [
        "| 4 | source0 (0.5) | 32 | 0.50000 | +0.000 | 2–2 (floor or ceiling) |",
        "| 4 | source1 (0.5) | 32 | 0.50000 | +0.000 | 2–2 (floor or ceiling) |",
    ]


def test_an_uneven_split_stays_within_the_floor_and_the_ceiling():
    rows = shares([0.7, 0.3], 20_000, 32, seed=12345)
    assert [row.split(" | ")[2] for row in rows] == ["14,001", "5,999"]
    assert all(row.endswith("(floor or ceiling) |") for row in rows)
