// In-sequence kernel timing for trace builds (cmake -DMERE_CUDA_TRACE=ON; docs/cuda-engine.md
// "Kernel trace"). ncu times each kernel alone, serialised and with its caches as ncu leaves them;
// a decode step runs ~400-660 kernels back to back under programmatic dependent launch, where a
// kernel's cost is how long it holds up the next one. In a trace build every kernel's block (0,0,0)
// stamps %globaltimer when its PDL wait returns (launch.cuh pdl_wait), i.e. when the kernel before
// it has completed, and launch() notes each launch's name in stream order; the difference between
// consecutive stamps is the time each kernel adds to the step. MERE_CUDA_TRACE_OUT=path (trace
// builds only) makes the CUDA engine trace its decode / verification passes (T <= 9; prompts are not
// counted) 8 .. 8 + MERE_CUDA_TRACE_STEPS (default 32) without graphs (MERE_CUDA_GRAPH=0) and write a
// per-kernel summary as JSON. MERE_CUDA_TRACE_ROWS=k counts only the passes of k rows (e.g. 8 for
// the width-8 verification passes of verify-bench, after its width-1 oracle steps; launches of other
// passes inside the window are still recorded). Normal builds compile none of this into the kernels.
#pragma once
#include <cstdint>
#include <string>

namespace mere::cuda {

// Each kernel translation unit registers a setter for its own copy of the device-side buffer pointer
// (no relocatable device code: every .cu has its own __constant__).
using TraceSymbolSetter = void (*)(unsigned long long*);
void trace_register_symbol(TraceSymbolSetter set);
// launch(): the name of a launch, in stream order, while a trace is running.
void trace_note_launch(const char* what);

// The engine's side: the output path (empty: no tracing), a step about to be launched (starts and
// stops the trace at the configured steps; stopping synchronises the current device and writes the
// JSON summary).
const std::string& trace_out_path();
void trace_step(int64_t step);
// Whether a pass of `rows` rows counts as a traced step (MERE_CUDA_TRACE_ROWS; unset: every pass).
bool trace_counts_rows(int64_t rows);

}  // namespace mere::cuda
