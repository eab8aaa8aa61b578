"""What the trainer reports (trainer/metrics.py): JSON lines, TensorBoard, MFU, progress."""

import io
import json
import math
import threading
from collections.abc import Iterator

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from trainer.metrics import (
    MetricsLogger,
    MetricsWriteError,
    ProgressLine,
    ThroughputMeter,
    peak_flops,
)


def _read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_jsonl_lines_sorted_and_resumed_logger_appends(tmp_path):
    with MetricsLogger(tmp_path, tensorboard=False) as logger:
        logger.log(100, "train", {"loss": 2.5, "lr": 1e-4, "seq_per_s": None})
        logger.log(100, "eval", {"mlm_accuracy": 0.375, "examples": 512})
    assert (tmp_path / "metrics.jsonl").read_text(encoding="utf-8") == (
        '{"kind": "train", "loss": 2.5, "lr": 0.0001, "seq_per_s": null, "step": 100}\n'
        '{"examples": 512, "kind": "eval", "mlm_accuracy": 0.375, "step": 100}\n'
    )

    with MetricsLogger(tmp_path, tensorboard=False) as resumed:
        resumed.log(200, "train", {"loss": 2.25})
    assert _read_jsonl(tmp_path / "metrics.jsonl") == [
        {"step": 100, "kind": "train", "loss": 2.5, "lr": 1e-4, "seq_per_s": None},
        {"step": 100, "kind": "eval", "mlm_accuracy": 0.375, "examples": 512},
        {"step": 200, "kind": "train", "loss": 2.25},
    ]


def test_tensorboard_scalars(tmp_path):
    logger = MetricsLogger(tmp_path)
    logger.log(1, "train", {"loss": 3.5, "mfu": None})
    logger.log(2, "train", {"loss": 3.25, "mfu": 0.5})
    logger.log(2, "eval", {"loss": 3.125})
    logger.close()

    assert list(tmp_path.glob("events.out.tfevents.*"))
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert sorted(events.Tags()["scalars"]) == ["eval/loss", "train/loss", "train/mfu"]
    scalars = {
        tag: [(event.step, event.value) for event in events.Scalars(tag)]
        for tag in events.Tags()["scalars"]
    }
    # None (no MFU at step 1) is not an event; values chosen exact in float32.
    assert scalars == {
        "train/loss": [(1, 3.5), (2, 3.25)],
        "train/mfu": [(2, 0.5)],
        "eval/loss": [(2, 3.125)],
    }


def test_disabled_logger_writes_nothing(tmp_path):
    log_dir = tmp_path / "run"
    logger = MetricsLogger(log_dir, enabled=False)
    logger.log(1, "train", {"loss": 1.0})
    logger.close()
    assert not log_dir.exists()


def test_logger_rejects_what_it_cannot_write(tmp_path):
    with MetricsLogger(tmp_path, tensorboard=False) as logger:
        with pytest.raises(TypeError, match=r"metric 'loss' is a Tensor; log a Python number"):
            logger.log(1, "train", {"loss": torch.tensor(1.0)})
        with pytest.raises(ValueError, match="'train' or 'eval'"):
            logger.log(1, "test", {"loss": 1.0})
        with pytest.raises(ValueError, match="'step' is reserved"):
            logger.log(1, "train", {"step": 1})
    assert (tmp_path / "metrics.jsonl").read_text(encoding="utf-8") == ""


def test_missing_tensorboard_names_the_train_extra(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_tensorboard(name, *args, **kwargs):
        if name == "torch.utils.tensorboard":
            raise ImportError("TensorBoard logging requires TensorBoard")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    with pytest.raises(ImportError, match=r"pip install 'bertkit\[train\]'"):
        MetricsLogger(tmp_path)
    MetricsLogger(tmp_path, tensorboard=False).close()


def _clock(*times: float):
    values: Iterator[float] = iter(times)
    return lambda: next(values)


def test_throughput_meter_rates_and_mfu():
    meter = ThroughputMeter(peak_flops=100e12, clock=_clock(10.0, 12.0, 16.0))
    meter.update(sequences=32, tokens=4096, flops=60e12)
    meter.update(sequences=32, tokens=4096, flops=60e12)
    # 64 sequences, 8192 tokens, 120 TFLOP in 2 s.
    assert meter.lap() == {
        "seq_per_s": 32.0,
        "tokens_per_s": 4096.0,
        "model_tflops": 60.0,
        "mfu": 0.6,
    }
    meter.update(sequences=8, tokens=1024, flops=20e12)
    # Only what came after the lap, over the 4 s since it.
    assert meter.lap() == {
        "seq_per_s": 2.0,
        "tokens_per_s": 256.0,
        "model_tflops": 5.0,
        "mfu": 0.05,
    }


def test_throughput_meter_of_a_job_of_several_processes():
    """Each rank counts its own work; the job's totals (summed over ranks) give the rates,
    and the MFU is over every device's peak."""
    meter = ThroughputMeter(peak_flops=100e12, clock=_clock(10.0, 12.0))
    meter.update(sequences=32, tokens=4096, flops=60e12)
    assert meter.counts() == (32.0, 4096.0, 60e12)
    assert meter.lap(totals=(64.0, 8000.0, 120e12), devices=2) == {
        "seq_per_s": 32.0,
        "tokens_per_s": 4000.0,
        "model_tflops": 60.0,
        "mfu": 0.3,
    }
    assert meter.counts() == (0.0, 0.0, 0.0)


def test_throughput_meter_without_peak_or_time():
    meter = ThroughputMeter(clock=_clock(1.0, 3.0, 3.0))
    meter.update(4, 512, 1e12)
    assert meter.lap() == {
        "seq_per_s": 2.0,
        "tokens_per_s": 256.0,
        "model_tflops": 0.5,
        "mfu": None,
    }
    assert meter.lap() == dict.fromkeys(("seq_per_s", "tokens_per_s", "model_tflops", "mfu"))


def test_peak_flops(monkeypatch):
    cpu = torch.device("cpu")
    assert peak_flops(cpu, "bf16") is None
    assert peak_flops(cpu, "bf16", override_tflops=1.5) == 1.5e12

    cuda = torch.device("cuda", 0)
    names = {
        "NVIDIA H100 80GB HBM3": 989e12,
        "NVIDIA H100 PCIe": 756e12,
        "NVIDIA H200": 989e12,
        "NVIDIA A100-SXM4-80GB": 312e12,
        "NVIDIA A10": 125e12,
        "NVIDIA L4": 121e12,
        "NVIDIA L40S": None,  # not an L4
        "Tesla T4": None,
    }
    for name, expected in names.items():
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None, n=name: n)
        assert peak_flops(cuda, "bf16") == expected, name
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100-PCIE-40GB")
    assert (peak_flops(cuda, "tf32"), peak_flops(cuda, "fp32")) == (156e12, 19.5e12)
    assert peak_flops(cuda, "bf16", override_tflops=200) == 200e12
    with pytest.raises(ValueError, match="use one of: bf16, fp16, tf32, fp32"):
        peak_flops(cuda, "int8")


def test_progress_line_not_a_tty():
    stream = io.StringIO()
    progress = ProgressLine(
        total=10, every=4, stream=stream, clock=_clock(0.0, 1.0, 2.0, 3.5, 4.0, 5.0)
    )
    assert not progress._tty
    for step, loss in [(1, 9.5), (2, 8.25), (4, 7.0), (5, 6.125), (8, 5.0), (9, 4.5)]:
        progress.update(step, {"loss": loss, "seq/s": 812.34, "lr": None})
    progress.close()
    # Steps 4 and 8 (every 4), then close() prints the last step seen (9). ETA: seconds per
    # step since step 1 times the steps left: at 4 (t=2), 2/3 x 6 = 4 s; at 8 (t=4),
    # 4/7 x 2 = 1.14 s; at 9 (t=5), 5/8 x 1 = 0.6 s, rounded to 1.
    assert stream.getvalue() == (
        "step 4/10 | loss 7 | seq/s 812.3 | eta 0:00:04\n"
        "step 8/10 | loss 5 | seq/s 812.3 | eta 0:00:01\n"
        "step 9/10 | loss 4.5 | seq/s 812.3 | eta 0:00:01\n"
    )


def test_progress_line_tty_rewrites_one_line():
    stream = io.StringIO()
    progress = ProgressLine(total=100, stream=stream, tty=True, clock=_clock(0.0, 60.0, 120.0))
    progress.update(1, {"loss": 10.0})
    progress.update(2, {"loss": 9.5, "seq/s": 12345.6})
    progress.update(3, {"loss": 9.0})
    progress.close()
    second = "step 2/100 | loss 9.5 | seq/s 12346 | eta 1:38:00"  # 98 steps x 60 s
    third = "step 3/100 | loss 9 | eta 1:37:00"
    # Every update is drawn; a shorter line is padded with spaces over the longer one's end.
    assert stream.getvalue() == (
        f"\rstep 1/100 | loss 10\r{second}\r{third}" + " " * (len(second) - len(third)) + "\n"
    )


def test_progress_line_disabled_and_without_total():
    stream = io.StringIO()
    disabled = ProgressLine(total=10, every=1, stream=stream, enabled=False)
    disabled.update(1, {"loss": 1.0})
    disabled.close()
    assert stream.getvalue() == ""

    unbounded = ProgressLine(total=None, every=1, stream=stream, clock=_clock(0.0, 1.0))
    unbounded.update(1, {"loss": math.inf})
    unbounded.update(2, {"loss": 0.5})
    assert stream.getvalue() == "step 1 | loss inf\nstep 2 | loss 0.5\n"


# A full disk: one line naming the file and the way on, no thread's traceback. /dev/full
# fails every write with ENOSPC, as a full disk does.
FULL = "failed (No space left on device): free space there, then rerun with --resume"


def test_a_full_disk_under_metrics_jsonl_is_one_error_naming_it(tmp_path) -> None:
    (tmp_path / "metrics.jsonl").symlink_to("/dev/full")
    logger = MetricsLogger(tmp_path, tensorboard=False)
    with pytest.raises(MetricsWriteError) as raised:
        logger.log(1, "train", {"loss": 2.5})
    assert str(raised.value) == (
        f"writing metrics.jsonl in {tmp_path} {FULL} (the checkpoints are written apart)"
    )
    assert raised.value.errno == 28


def test_a_full_disk_under_the_event_files_is_one_error_and_no_traceback(
    tmp_path, monkeypatch, capfd
) -> None:
    """TensorBoard writes in a thread of its own; its failed write is raised by the run's
    next write, as MetricsWriteError, and the thread prints no traceback."""
    from tensorboard.summary.writer import record_writer

    def full(self, data) -> None:
        raise OSError(28, "No space left on device")

    printed: list[BaseException | None] = []  # what threading would print as a traceback
    monkeypatch.setattr(threading, "excepthook", lambda args: printed.append(args.exc_value))
    logger = MetricsLogger(tmp_path)
    monkeypatch.setattr(record_writer.RecordWriter, "write", full)
    logger.log(1, "train", {"loss": 2.5})
    with pytest.raises(MetricsWriteError) as raised:
        logger.flush()
        logger.log(2, "train", {"loss": 2.4})
    assert str(raised.value) == (
        f"writing the TensorBoard events in {tmp_path} {FULL} (the checkpoints are written apart)"
    )
    assert [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").open()] == [1]
    assert printed == []
    assert "Traceback" not in capfd.readouterr().err
