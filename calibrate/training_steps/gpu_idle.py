"""When a profiled training step leaves its GPU idle, and what the CPU was doing then.

fsdpsim's predicted steps keep the GPU busy from start to end, while the measured ones on an H200
ran no kernel for 1.6-7.9 % of each step (reports/h200-measured.md, "Kernel time by kind").
idle_report() finds those gaps in one step's torch.profiler trace (Chrome trace format, as
torch.profiler.profile.export_chrome_trace writes it; no torch needed here): the union of GPU
activity (kernels, memcpy, memset) on every stream, the gaps in it, each attributed to the phase
the training loop annotated on the GPU (record_function, seen as gpu_user_annotation spans) and
to the CPU work that launched the activity ending the gap: the names of the CPU ops and user
annotations enclosing its launch call (cudaLaunchKernel and the like, matched by correlation id),
outermost first. A gap ends when the CPU finally launches what the GPU waits for, so the ops
around that launch are the ones that kept it waiting.
"""

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
CPU_CATEGORIES = ("cpu_op", "user_annotation")
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")


def _spans(events, categories):
    return [e for e in events if e.get("ph") == "X" and e.get("cat") in categories and "dur" in e]


def _end(event):
    return float(event["ts"]) + float(event["dur"])


def _launch_stack(launch, cpu_ops_by_thread, depth):
    """Names of the CPU ops and annotations on the launch call's thread that enclose it,
    outermost first, at most `depth` of them (the innermost kept)."""
    at = float(launch["ts"])
    thread = cpu_ops_by_thread.get((launch.get("pid"), launch.get("tid")), [])
    enclosing = [e for e in thread if float(e["ts"]) <= at <= _end(e)]
    enclosing.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
    return [e["name"] for e in enclosing][-depth:]


def idle_report(events, phase_prefix="fsdpsim.", min_gap_us=10.0, top=40, depth=4):
    """The GPU's idle time in a profiled step: before its first kernel (lead_in_us, from the CPU
    entering the first annotated phase), then from its first kernel to its last in all, per
    annotated phase (phase_prefix + name, from the gpu_user_annotation spans;
    "outside" for idle outside every phase), and for the gaps of at least min_gap_us (shorter
    ones are the GPU's own time between back-to-back launches) per launching CPU stack and the
    `top` longest. Times in microseconds."""
    gpu = sorted(_spans(events, GPU_CATEGORIES), key=lambda e: float(e["ts"]))
    if not gpu:
        raise ValueError("the trace has no GPU activity (kernel, gpu_memcpy, gpu_memset events)")
    phases = [(e["name"][len(phase_prefix):], float(e["ts"]), _end(e))
              for e in _spans(events, ("gpu_user_annotation",))
              if e["name"].startswith(phase_prefix)]
    launches = {e["args"]["correlation"]: e for e in _spans(events, LAUNCH_CATEGORIES)
                if "correlation" in e.get("args", {})}
    cpu_ops_by_thread = {}
    for e in _spans(events, CPU_CATEGORIES):
        cpu_ops_by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(e)

    def phase_at(t):
        return next((name for name, start, end in phases if start <= t < end), "outside")

    gaps = []
    busy_until = _end(gpu[0])
    last = gpu[0]
    for e in gpu[1:]:
        start = float(e["ts"])
        if start > busy_until:
            gap = {"us": start - busy_until, "phase": phase_at(busy_until),
                   "after": last["name"], "before": e["name"], "launched_by": ""}
            launch = launches.get(e.get("args", {}).get("correlation"))
            if gap["us"] >= min_gap_us and launch is not None:
                gap["launched_by"] = " > ".join(_launch_stack(launch, cpu_ops_by_thread, depth))
            gaps.append(gap)
        if _end(e) >= busy_until:
            busy_until, last = _end(e), e
    window = busy_until - float(gpu[0]["ts"])
    # Before the first kernel: from the CPU entering the first phase (the GPU idle, as the loop
    # synchronizes before a profiled step) to the GPU starting the first kernel it launched.
    cpu_phases = [float(e["ts"]) for e in _spans(events, ("user_annotation",))
                  if e["name"].startswith(phase_prefix)]
    lead_in = max(0.0, float(gpu[0]["ts"]) - min(cpu_phases)) if cpu_phases else None
    idle = sum(g["us"] for g in gaps)
    long_gaps = [g for g in gaps if g["us"] >= min_gap_us]
    by_phase, by_stack = {}, {}
    for g in gaps:
        by_phase[g["phase"]] = by_phase.get(g["phase"], 0.0) + g["us"]
    for g in long_gaps:
        count, total = by_stack.get(g["launched_by"], (0, 0.0))
        by_stack[g["launched_by"]] = (count + 1, total + g["us"])
    longest = sorted(long_gaps, key=lambda g: -g["us"])[:top]
    return {
        "lead_in_us": None if lead_in is None else round(lead_in, 1),
        "window_us": round(window, 1),
        "busy_us": round(window - idle, 1),
        "idle_us": round(idle, 1),
        "gap_count": len(gaps),
        "short_gaps_us": round(idle - sum(g["us"] for g in long_gaps), 1),
        "idle_by_phase_us": {name: round(us, 1) for name, us in sorted(by_phase.items())},
        "idle_by_launcher": [[stack, count, round(us, 1)] for stack, (count, us) in
                             sorted(by_stack.items(), key=lambda kv: -kv[1][1])[:top]],
        "longest_gaps": [[round(g["us"], 1), g["phase"], g["after"], g["before"], g["launched_by"]]
                         for g in longest],
    }
