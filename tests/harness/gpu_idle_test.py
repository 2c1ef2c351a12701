"""calibrate/training_steps/gpu_idle.py on hand-made torch.profiler traces (no torch needed)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "calibrate",
                                "training_steps"))
from gpu_idle import idle_report  # noqa: E402

CPU = {"pid": 1, "tid": 1}


def kernel(name, ts, dur, correlation, stream=7):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts,
            "dur": dur, "args": {"correlation": correlation}}


def launch(ts, correlation):
    return dict(CPU, ph="X", cat="cuda_runtime", name="cudaLaunchKernel", ts=ts, dur=2,
                args={"correlation": correlation})


def cpu(name, ts, dur, cat="cpu_op"):
    return dict(CPU, ph="X", cat=cat, name=name, ts=ts, dur=dur)


def phase(name, ts, dur, on_gpu):
    return {"ph": "X", "cat": "gpu_user_annotation" if on_gpu else "user_annotation",
            "name": f"fsdpsim.{name}", "pid": 0 if on_gpu else 1, "tid": 7 if on_gpu else 1,
            "ts": ts, "dur": dur}


class IdleReportTest(unittest.TestCase):
    def test_a_gap_is_the_phases_and_its_launchers(self):
        # CPU enters forward at 0; the GPU runs 10-100, waits, runs 150-250 (launched at 140
        # from aten::mm inside forward), then backward's kernel at 260-300.
        events = [phase("forward", 0, 200, False), phase("backward", 200, 120, False),
                  phase("forward", 10, 240, True), phase("backward", 250, 50, True),
                  launch(5, 1), kernel("gemm", 10, 90, 1),
                  cpu("aten::mm", 130, 15), launch(140, 2), kernel("add", 150, 100, 2),
                  launch(210, 3), kernel("mul", 260, 40, 3)]
        r = idle_report(events)
        self.assertEqual(r["lead_in_us"], 10.0)
        self.assertEqual(r["window_us"], 290.0)
        self.assertEqual(r["idle_us"], 60.0)
        self.assertEqual(r["busy_us"], 230.0)
        self.assertEqual(r["gap_count"], 2)
        self.assertEqual(r["short_gaps_us"], 0.0)
        self.assertEqual(r["idle_by_phase_us"], {"backward": 10.0, "forward": 50.0})
        self.assertEqual(r["longest_gaps"][0],
                         [50.0, "forward", "gemm", "add", "fsdpsim.forward > aten::mm"])
        self.assertEqual(r["longest_gaps"][1], [10.0, "backward", "add", "mul", "fsdpsim.backward"])
        self.assertEqual(r["idle_by_launcher"][0], ["fsdpsim.forward > aten::mm", 1, 50.0])

    def test_overlapping_streams_leave_no_gap(self):
        # A copy on another stream inside a long kernel, then a kernel starting as it ends.
        events = [kernel("gemm", 0, 100, 1), kernel("copy", 20, 30, 2, stream=8),
                  kernel("add", 100, 10, 3)]
        r = idle_report(events)
        self.assertEqual(r["idle_us"], 0.0)
        self.assertEqual(r["gap_count"], 0)
        self.assertIsNone(r["lead_in_us"])

    def test_short_gaps_count_as_idle_but_not_per_launcher(self):
        events = [kernel("a", 0, 10, 1), kernel("b", 14, 10, 2), kernel("c", 54, 10, 3),
                  launch(50, 3)]
        r = idle_report(events, min_gap_us=10.0)
        self.assertEqual(r["idle_us"], 34.0)
        self.assertEqual(r["short_gaps_us"], 4.0)
        self.assertEqual(r["idle_by_phase_us"], {"outside": 34.0})
        self.assertEqual(r["idle_by_launcher"], [["", 1, 30.0]])
        self.assertEqual([g[0] for g in r["longest_gaps"]], [30.0])

    def test_a_trace_without_gpu_activity_is_an_error(self):
        with self.assertRaises(ValueError):
            idle_report([cpu("aten::mm", 0, 10)])


if __name__ == "__main__":
    unittest.main()
