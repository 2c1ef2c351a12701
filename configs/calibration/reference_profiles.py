#!/usr/bin/env python3
"""Writes the reference calibration profiles of this folder from the published measurements in
configs/validation/nccl_reference.csv (README.md here says what each holds and why). Run from the
repository root:  python3 configs/calibration/reference_profiles.py
"""
import csv
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
CSV = os.path.join(HERE, "..", "validation", "nccl_reference.csv")
STAS = "stas00/ml-engineering network/README.md @744d01e"
PERFORMANCE_MD = "nccl-tests doc/PERFORMANCE.md"

# A ring all-reduce of S bytes is a reduce-scatter of S then an all-gather of S over the same
# ring and chunks (NCCL src/device/all_reduce.h, runRing: n-1 reduce steps, then n-1 copy steps),
# each moving (n-1)/n S per rank; busbw, the rate of the bottleneck link, is the same for the
# three ring collectives (nccl-tests doc/PERFORMANCE.md "Bus bandwidth": busbw "should reflect the
# speed of the hardware bottleneck"; NVIDIA/nccl-tests#326, sjeaugey: 360 GB/s busbw "is exactly
# what we'd expect" for all_gather and ring all_reduce on 8 H100). So at equal busbw an all-gather
# or reduce-scatter of S takes half the all-reduce time of S.
RING_DERIVATION = ("time(S) = all_reduce time(S) / 2 from the measured all_reduce series of this profile: a ring "
                   "all-reduce is a reduce-scatter then an all-gather of the same S over the same ring (NCCL "
                   "src/device/all_reduce.h runRing), and busbw, the bottleneck link's rate, is the same for the "
                   "three ring collectives (nccl-tests doc/PERFORMANCE.md 'Bus bandwidth'; NVIDIA/nccl-tests#326: "
                   "360 GB/s busbw expected for all_gather and ring all_reduce alike on 8 H100)")


def csv_rows(predicate):
    return [r for r in csv.DictReader(open(CSV)) if predicate(r)]


def r6(x):
    return float("%.6g" % x)


def point(size, time_us, ranks, collective):
    n = ranks
    factor = 2 * (n - 1) / n if collective == "all_reduce" else (n - 1) / n
    algbw = size / (time_us * 1e-6) / 1e9
    return {"bytes": size, "time_us": r6(time_us), "algbw_GBps": r6(algbw), "busbw_GBps": r6(algbw * factor)}


def series(collective, dtype, ranks, per_node, group, points, origin, source, derivation=None):
    s = {"collective": collective, "dtype": dtype, "ranks": ranks, "ranks_per_node": per_node, "group": group,
         "origin": origin}
    if derivation:
        s["derivation"] = derivation
    s["source"] = source
    s["points"] = points
    return s


def profile(name, description, device, topology, sources, notes, collectives):
    return {"schema_version": 1, "kind": "fsdpsim_calibration_profile", "name": name, "description": description,
            "tool": "configs/calibration/reference_profiles.py (published measurements)", "complete": True,
            "device": device, "software": {}, "topology": topology, "sources": sources, "notes": notes,
            "collectives": collectives, "gemms": [], "memory": {}}


def write(name, p):
    with open(os.path.join(HERE, name + ".json"), "w") as f:
        json.dump(p, f, indent=2)
        f.write("\n")


def a100(name, preset_note):
    rows = csv_rows(lambda r: r["gpu"].startswith("A100 (SXM") and r["nodes"] == "1" and r["collective"] == "all_reduce")
    times = [(int(r["size_bytes"]), float(r["notes"].split("time_us=")[1])) for r in rows]
    source = (STAS + ' "Real network throughput": nccl-tests all_reduce_perf -g 8 -n 50 (float) on one 8x A100 SXM '
              "NVLink3 node; time as printed (the mean of 50 iterations, no spread given)")
    ar = series("all_reduce", "fp32", 8, 8, "intra_node", [point(s, t, 8, "all_reduce") for s, t in times],
                "measured", source)
    derived = [series(c, "fp32", 8, 8, "intra_node", [point(s, t / 2, 8, c) for s, t in times], "derived",
                      "the all_reduce series above", RING_DERIVATION) for c in ("all_gather", "reduce_scatter")]
    write(name, profile(
        name,
        "Reference profile for one 8x A100 SXM node (NVLink3, NVSwitch) from a published nccl-tests sweep. " + preset_note,
        # The device the curves belong to, so that fsdpsim refuses them for another GPU model: every
        # A100 has 108 SMs (NVIDIA Ampere whitepaper); the source does not say 40 or 80 GB.
        {"name": "NVIDIA A100 SXM (NVLink3)", "sm_count": 108},
        {"nodes": 1, "gpus_per_node": 8, "interconnect": "NVLink3 via NVSwitch, 12 links x 25 GB/s per GPU"},
        [source, PERFORMANCE_MD + " (busbw factors)", "NVIDIA/nccl-tests#326 (equal busbw of ring collectives)"],
        ["Only single-node (8-rank) curves: multi-node groups use the fallback model until measured on your cluster.",
         "No GEMM measurements: GEMMs use the roofline fallback (configs/hardware presets cite their efficiencies)."],
        [ar] + derived))


def h200():
    rows = csv_rows(lambda r: r["gpu"].startswith("H200 (NVLink4)") and r["nodes"] == "1" and r["collective"] == "all_reduce")
    sweep = [(int(r["size_bytes"]), int(r["size_bytes"]) / (float(r["algbw_GBps"]) * 1e9) * 1e6) for r in rows]
    source = (STAS + ' "Real network throughput": all_reduce_bench.py (torch.distributed, fp32, torch 2.9.1+cu130, '
              "NCCL 2.27.7) on one 8x H200 node; NCCL's default picks NVLS (NVLink SHARP) from 2 MiB and ring LL "
              "below; time = size / printed algbw")
    ar = series("all_reduce", "fp32", 8, 8, "intra_node", [point(s, t, 8, "all_reduce") for s, t in sweep], "measured",
                source)
    single = []
    for collective, busbw in (("all_gather", 361.4), ("reduce_scatter", 362.9)):
        size = 17179869184
        algbw = busbw / (7 / 8)
        single.append(series(collective, "fp32", 8, 8, "intra_node", [point(size, size / (algbw * 1e9) * 1e6, 8, collective)],
                             "measured", STAS + " SHARP section: nccl-tests -b 16G -e 16G -g 8 -z 1 (float), ring"))
    write("h200-sxm-141gb", profile(
        "h200-sxm-141gb",
        "Reference profile for one 8x H200 node (NVLink4, NVSwitch) from published measurements: the all-reduce sweep; "
        "all-gather and reduce-scatter only at 16 GiB.",
        # 132 SMs (Hopper whitepaper: the GH100 configuration of H100 SXM5 and H200) and H200's memory
        # as torch reports it (configs/hardware/h200-sxm-141gb.json, hbm_bytes), which sets it
        # apart from an H100's.
        {"name": "NVIDIA H200", "sm_count": 132, "memory_bytes": 150109945856},
        {"nodes": 1, "gpus_per_node": 8, "interconnect": "NVLink4 via NVSwitch, 18 links x 25 GB/s per GPU"},
        [source, STAS + " SHARP section (nccl-tests 16 GiB all_gather 361.4 and reduce_scatter 362.9 GB/s busbw)",
         PERFORMANCE_MD + " (busbw factors)"],
        ["The all-reduce curve is NCCL's default on this node: NVLS from 2 MiB (busbw above the ring's ~367 GB/s).",
         "all_gather and reduce_scatter have one size each; a curve needs two, so `fsdpsim calibrate fit` lists them "
         "as not fitted and the ring model prices them (its H200 preset efficiency is taken from these same numbers).",
         "No GEMM measurements: GEMMs use the roofline fallback."],
        [ar] + single))


def main():
    a100("a100-sxm-80gb", "Also valid for a100-sxm-40gb (the same NVLink3 fabric).")
    a100("a100-sxm-40gb", "The measurements were taken on A100 SXM; NVLink3 and NCCL's ring are the same on the 40 GB part.")
    h200()


if __name__ == "__main__":
    main()
