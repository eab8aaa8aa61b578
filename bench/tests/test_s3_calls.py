from bench.s3_calls import main


def test_both_rows_read_every_object_and_the_ratio_is_printed(capsys) -> None:
    main(["--objects", "3", "--bytes", "10", "--repeats", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Beam's S3 filesystem: exists + match + read of 3 objects of 10 B")
    assert [line.split()[0] for line in lines[2:4]] == ["per", "shared"]
    assert lines[4].startswith("shared uses ") and lines[4].endswith("x less CPU per object")
