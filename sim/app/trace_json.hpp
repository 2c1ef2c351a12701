// Chrome trace-event JSON (opens in Perfetto and chrome://tracing): one track per stream and one
// for the CPU thread, every op a complete ("X") event named by unit and kernel, memory as
// counters, and flow arrows ("s"/"f" pairs): from the end of an op on one stream to the start
// of an op on another that waited for it (CUDA event waits), and from a CPU launch to its op
// where the GPU waited for that launch (so CPU-bound stretches show without an arrow per
// kernel). Format: "Trace Event Format" (Google,
// docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU).
#pragma once

#include <string>

#include "sim/app/json_file.hpp"  // TextSink
#include "sim/fsdp/simulation.hpp"

namespace fsdpsim::app {

// Writes the trace into `sink` in pieces of about a mebibyte as it is made, so that a trace of
// gigabytes never has to be held whole.
void write_trace_json(const fsdp::SimulationOutput& output, const TextSink& sink);

// The whole trace as one text.
std::string trace_json(const fsdp::SimulationOutput& output);

}  // namespace fsdpsim::app
