"""CUDA-event timing shared by the measurement scripts. Import it after torch_required's check."""
import statistics

import torch


def timed(fn, warmup, repeats):
    """The median of `repeats` CUDA-event timings of `fn()` in seconds, after `warmup` untimed
    calls; each timing waits for its end event, so calls do not overlap."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)
