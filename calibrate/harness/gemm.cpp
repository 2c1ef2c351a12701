#include "calibrate/harness/gemm.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>

#include "calibrate/harness/kernels.hpp"
#include "calibrate/harness/progress.hpp"

namespace fsdpsim::harness {
namespace {

constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;
constexpr double kMinRepeatMs = 0.2;    // a timed repeat lasts at least this long
constexpr double kMaxShapeMs = 2000.0;  // repeats are cut so that one shape takes at most this
constexpr std::int64_t kOverlapBytes = std::int64_t{256} << 20;
// All-gathers queued ahead of the GEMMs they overlap: under CUDA's ~1,024-entry launch queue.
constexpr int kMostQueuedAllGathers = 512;

struct GemmType {
  const char* name;
  cudaDataType_t ab;
  cudaDataType_t cd;
  cublasComputeType_t compute;
  int ab_bytes;
  int cd_bytes;
  std::uint32_t base;  // exponent bits of 1.0, mantissa bits random: values in [1, 2)
  std::uint32_t mask;
  int min_cc;  // compute capability * 10
};

const GemmType* gemm_type(const std::string& name) {
  static const GemmType kTypes[] = {
      {"bf16", CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, 2, 0x3f80U, 0x007fU, 80},
      {"fp16", CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, 2, 2, 0x3c00U, 0x03ffU, 70},
      {"fp32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 4, 4, 0x3f800000U, 0x007fffffU, 70},
      {"tf32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, 4, 0x3f800000U, 0x007fffffU,
       80},
      {"fp8", CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 1, 2, 0x38U, 0x07U, 89},
  };
  for (const GemmType& t : kTypes) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

class NotSupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One GEMM shape ready to launch: operands, descriptors and the heuristic's algorithm.
class Matmul {
 public:
  // Delegates to the constructor that acquires nothing, so that the destructor frees what this
  // one acquired when it throws (a shape cuBLASLt has no algorithm for, a cudaMalloc that fails):
  // a constructor's own throw runs no destructor, a delegating one's does.
  Matmul(cublasLtHandle_t handle, void* workspace, const GemmType& t, const GemmResult& shape,
         cudaStream_t stream)
      : Matmul(handle, workspace) {
    const auto m = static_cast<std::uint64_t>(shape.m);
    const auto n = static_cast<std::uint64_t>(shape.n);
    const auto k = static_cast<std::uint64_t>(shape.k);
    const auto batch = static_cast<std::int32_t>(shape.batch);
    const std::size_t a_count = static_cast<std::size_t>(m * k) * static_cast<std::size_t>(batch);
    const std::size_t b_count = static_cast<std::size_t>(k * n) * static_cast<std::size_t>(batch);
    const std::size_t d_count = static_cast<std::size_t>(m * n) * static_cast<std::size_t>(batch);
    // Out of memory (another process on the GPU, fragmentation) skips the shape on this rank, as
    // a shape cuBLASLt has no algorithm for is skipped: the phase timing GEMMs beside collectives
    // goes on issuing the collectives every rank expects.
    const auto allocate = [&](void** p, std::size_t bytes) {
      const cudaError_t e = cudaMalloc(p, bytes);
      if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();  // not sticky: clear it
        throw NotSupported(cat(t.name, " ", shape.m, "x", shape.n, "x", shape.k,
                               " skipped: cudaMalloc of ", bytes >> 20, " MiB ran out of memory"));
      }
      FSDPSIM_CUDA(e);
    };
    allocate(&a_, a_count * static_cast<std::size_t>(t.ab_bytes));
    allocate(&b_, b_count * static_cast<std::size_t>(t.ab_bytes));
    allocate(&d_, d_count * static_cast<std::size_t>(t.cd_bytes));
    FSDPSIM_CUDA(fill_pattern(a_, a_count, t.ab_bytes, t.base, t.mask, stream));
    FSDPSIM_CUDA(fill_pattern(b_, b_count, t.ab_bytes, t.base, t.mask, stream));
    FSDPSIM_CUBLAS(cublasLtMatmulDescCreate(&op_, t.compute, CUDA_R_32F));
    const cublasOperation_t transa = CUBLAS_OP_T;
    const cublasOperation_t transb = CUBLAS_OP_N;
    FSDPSIM_CUBLAS(
        cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa));
    FSDPSIM_CUBLAS(
        cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb));
    FSDPSIM_CUBLAS(cublasLtMatrixLayoutCreate(&la_, t.ab, k, m, static_cast<std::int64_t>(k)));
    FSDPSIM_CUBLAS(cublasLtMatrixLayoutCreate(&lb_, t.ab, k, n, static_cast<std::int64_t>(k)));
    FSDPSIM_CUBLAS(cublasLtMatrixLayoutCreate(&ld_, t.cd, m, n, static_cast<std::int64_t>(m)));
    if (batch > 1) {
      const std::int64_t strides[3] = {static_cast<std::int64_t>(m * k),
                                       static_cast<std::int64_t>(k * n),
                                       static_cast<std::int64_t>(m * n)};
      cublasLtMatrixLayout_t layouts[3] = {la_, lb_, ld_};
      for (int i = 0; i < 3; ++i) {
        FSDPSIM_CUBLAS(cublasLtMatrixLayoutSetAttribute(
            layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
        FSDPSIM_CUBLAS(cublasLtMatrixLayoutSetAttribute(layouts[i],
                                                        CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                        &strides[i], sizeof strides[i]));
      }
    }
    cublasLtMatmulPreference_t preference = nullptr;
    FSDPSIM_CUBLAS(cublasLtMatmulPreferenceCreate(&preference));
    const std::uint64_t workspace_bytes = kWorkspaceBytes;
    FSDPSIM_CUBLAS(cublasLtMatmulPreferenceSetAttribute(preference,
                                                        CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                        &workspace_bytes, sizeof workspace_bytes));
    int returned = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        handle_, op_, la_, lb_, ld_, ld_, preference, 1, &heuristic_, &returned);
    cublasLtMatmulPreferenceDestroy(preference);
    if (status != CUBLAS_STATUS_SUCCESS || returned == 0) {
      throw NotSupported(
          cat("cuBLASLt has no algorithm for ", t.name, " ", shape.m, "x", shape.n, "x", shape.k));
    }
  }
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;
  ~Matmul() {
    if (op_ != nullptr) cublasLtMatmulDescDestroy(op_);
    for (cublasLtMatrixLayout_t l : {la_, lb_, ld_}) {
      if (l != nullptr) cublasLtMatrixLayoutDestroy(l);
    }
    for (void* p : {a_, b_, d_}) {
      if (p != nullptr) cudaFree(p);
    }
  }

  void enqueue(cudaStream_t stream) {
    const float alpha = 1.0F;
    const float beta = 0.0F;
    FSDPSIM_CUBLAS(cublasLtMatmul(handle_, op_, &alpha, a_, la_, b_, lb_, &beta, d_, ld_, d_, ld_,
                                  &heuristic_.algo, workspace_, kWorkspaceBytes, stream));
  }

 private:
  Matmul(cublasLtHandle_t handle, void* workspace) : handle_(handle), workspace_(workspace) {}

  cublasLtHandle_t handle_;
  void* workspace_;
  void* a_ = nullptr;
  void* b_ = nullptr;
  void* d_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr;
  cublasLtMatrixLayout_t lb_ = nullptr;
  cublasLtMatrixLayout_t ld_ = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic_{};
};

struct Lt {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  explicit Lt(const Gpu& gpu) {
    FSDPSIM_CUDA(cudaSetDevice(gpu.device));
    FSDPSIM_CUBLAS(cublasLtCreate(&handle));
    FSDPSIM_CUDA(cudaMalloc(&workspace, kWorkspaceBytes));
  }
  Lt(const Lt&) = delete;
  Lt& operator=(const Lt&) = delete;
  ~Lt() {
    cudaFree(workspace);
    cublasLtDestroy(handle);
  }
};

int compute_capability(const Gpu& gpu) {
  cudaDeviceProp p{};
  FSDPSIM_CUDA(cudaGetDeviceProperties(&p, gpu.device));
  return p.major * 10 + p.minor;
}

std::int64_t operand_bytes(const GemmType& t, const GemmResult& s) {
  return s.batch * (s.m * s.k * t.ab_bytes + s.k * s.n * t.ab_bytes + s.m * s.n * t.cd_bytes);
}

float elapsed_ms(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0.0F;
  FSDPSIM_CUDA(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

struct Timing {
  double one_ms = 0.0;  // one launch, estimated
  int inner = 1;        // launches per timed repeat
  int repeats = 1;
};

// One timed launch after two untimed ones: how many launches a repeat needs (>= kMinRepeatMs)
// and how many repeats fit in kMaxShapeMs (at least 3 where `max_repeats` allows, at most
// `max_repeats`).
Timing plan_timing(Job& job, Gpu& gpu, Matmul& m, int max_repeats, const std::string& what) {
  for (int w = 0; w < 2; ++w) m.enqueue(gpu.stream);
  close_gate(gpu.gate, gpu.stream);
  FSDPSIM_CUDA(cudaEventRecord(gpu.start[0], gpu.stream));
  m.enqueue(gpu.stream);
  FSDPSIM_CUDA(cudaEventRecord(gpu.stop[0], gpu.stream));
  open_gate(gpu.gate);
  job.wait(cat("estimating ", what));
  // The estimate only sizes the repeats: a gate it saw time out is not the timings' to report.
  (void)gate_timed_out(gpu.gate);
  Timing t;
  t.one_ms = std::max(1e-3, static_cast<double>(elapsed_ms(gpu.start[0], gpu.stop[0])));
  t.inner = static_cast<int>(std::clamp(std::ceil(kMinRepeatMs / t.one_ms), 1.0, 64.0));
  const auto most = static_cast<double>(max_repeats);
  t.repeats = static_cast<int>(
      std::clamp(std::floor(kMaxShapeMs / (t.one_ms * t.inner)), std::min(3.0, most), most));
  return t;
}

// Enqueues the warm-up and the timed repeats on gpu.stream (after `after`, when given), waits for
// every local stream, and returns per-launch microseconds of each repeat. Each repeat is queued
// behind a closed gate (stream_gate.hpp), so that its launches run back to back whatever the
// host's enqueue rate; one repeat at a time, so that what waits behind the gate stays far below
// CUDA's ~1,000 queued launches (a host blocked on a full queue would wait out the timeout).
std::vector<double> run_timed(Job& job, Gpu& gpu, Matmul& m, const Timing& t, int warmup,
                              const std::string& what, cudaEvent_t after = nullptr) {
  if (after != nullptr) FSDPSIM_CUDA(cudaStreamWaitEvent(gpu.stream, after, 0));
  for (int w = 0; w < warmup; ++w) m.enqueue(gpu.stream);
  for (int r = 0; r < t.repeats; ++r) {
    close_gate(gpu.gate, gpu.stream);
    FSDPSIM_CUDA(cudaEventRecord(gpu.start[static_cast<std::size_t>(r)], gpu.stream));
    for (int i = 0; i < t.inner; ++i) m.enqueue(gpu.stream);
    FSDPSIM_CUDA(cudaEventRecord(gpu.stop[static_cast<std::size_t>(r)], gpu.stream));
    open_gate(gpu.gate);
  }
  job.wait(cat("timing ", what));
  std::vector<double> us;
  for (int r = 0; r < t.repeats; ++r) {
    const auto at = static_cast<std::size_t>(r);
    us.push_back(static_cast<double>(elapsed_ms(gpu.start[at], gpu.stop[at])) * 1000.0 / t.inner);
  }
  return us;
}

std::string shape_text(const GemmResult& g) {
  return cat(g.dtype, " ", g.m, "x", g.n, "x", g.k,
             g.batch > 1 ? cat(" x", g.batch) : std::string());
}

}  // namespace

void measure_gemms(Job& job, const Options& o, const Plan& plan, Results& results,
                   const std::function<void()>& save) {
  Gpu& gpu = job.gpus().front();
  const int cc = compute_capability(gpu);
  std::vector<GemmResult> shapes;
  for (const PlannedGemm& p : plan.gemms) {
    if (std::find(o.gemm_dtypes.begin(), o.gemm_dtypes.end(), p.dtype) == o.gemm_dtypes.end())
      continue;
    shapes.push_back(GemmResult{p.dtype, p.m, p.n, p.k, p.batch, 0, 0, 0, 0, std::nullopt, "plan",
                                std::nullopt});
  }
  for (const std::string& dtype : o.gemm_dtypes) {
    for (const std::int64_t m : o.gemm_grid) {
      for (const std::int64_t n : o.gemm_grid) {
        for (const std::int64_t k : o.gemm_grid) {
          const bool dup = std::any_of(shapes.begin(), shapes.end(), [&](const GemmResult& s) {
            return s.dtype == dtype && s.m == m && s.n == n && s.k == k && s.batch == 1;
          });
          if (!dup)
            shapes.push_back(
                GemmResult{dtype, m, n, k, 1, 0, 0, 0, 0, std::nullopt, "grid", std::nullopt});
        }
      }
    }
  }
  Lt lt(gpu);
  std::vector<std::string> unsupported;
  std::size_t done = 0;
  for (const GemmResult& shape : shapes) {
    ++done;
    const GemmType* t = gemm_type(shape.dtype);
    if (t == nullptr || cc < t->min_cc) {
      const std::string why = cat(
          shape.dtype, " GEMMs (needs compute capability ", t == nullptr ? 0 : t->min_cc / 10, ".",
          t == nullptr ? 0 : t->min_cc % 10, "; this GPU has ", cc / 10, ".", cc % 10, ")");
      if (std::find(unsupported.begin(), unsupported.end(), why) == unsupported.end())
        unsupported.push_back(why);
      continue;
    }
    if (operand_bytes(*t, shape) > job.free_memory() / 2) {
      results.notes.push_back(cat("GEMM ", shape_text(shape),
                                  " skipped: its operands do not fit in half the free memory"));
      continue;
    }
    progress_line(job.root(), cat("[", done, "/", shapes.size(), "] GEMM ", shape_text(shape)),
                  false);
    try {
      Matmul m(lt.handle, lt.workspace, *t, shape, gpu.stream);
      const std::string what = cat("GEMM ", shape_text(shape));
      const Timing timing = plan_timing(job, gpu, m, o.repeats, what);
      const Spread s = spread_of(run_timed(job, gpu, m, timing, o.warmup, what));
      if (gate_timed_out(gpu.gate)) results.notes.push_back(gate_timeout_note(what));
      GemmResult r = shape;
      r.median_us = s.median;
      r.min_us = s.min;
      r.max_us = s.max;
      r.repeats = timing.repeats;
      results.gemms.push_back(r);
    } catch (const NotSupported& e) {
      results.notes.push_back(e.what());
    }
    if (done % 16 == 0) save();
  }
  for (const std::string& u : unsupported) results.notes.push_back(cat("skipped ", u));
  if (std::any_of(results.gemms.begin(), results.gemms.end(),
                  [](const GemmResult& g) { return g.dtype == "fp8"; })) {
    // torchao's Float8Linear (Float8LinearConfig's default Float8GemmConfigs) sets
    // use_fast_accum for its forward GEMM only.
    results.notes.push_back(
        "fp8 GEMMs timed with cuBLASLt's default accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM "
        "off), as torchao's Float8Linear runs its two backward GEMMs; its forward GEMM uses fast "
        "accumulation, which may run faster than timed here");
  }
  progress_line(job.root(), cat("GEMMs: ", results.gemms.size(), " shapes measured"), true);
  save();
}

void measure_gemms_under_nccl(Job& job, const Options& o, const Plan& plan, Results& results,
                              const std::function<void()>& save) {
  std::vector<Gpu>& gpus = job.gpus();
  Gpu& gpu = gpus.front();
  if (job.world_size() < 2) return;
  // The candidates come from the options and the plan alone, so that every rank walks the same
  // list and issues the same collectives; a rank that did not measure a shape (it did not fit in
  // its memory) still runs the all-gathers.
  std::vector<GemmResult> candidates;
  for (const PlannedGemm& p : plan.gemms) {
    if (std::find(o.gemm_dtypes.begin(), o.gemm_dtypes.end(), p.dtype) == o.gemm_dtypes.end())
      continue;
    candidates.push_back(GemmResult{p.dtype, p.m, p.n, p.k, p.batch, 0, 0, 0, 0, std::nullopt,
                                    "plan", std::nullopt});
  }
  if (candidates.empty()) {
    for (const std::string& dtype : o.gemm_dtypes) {
      for (const std::int64_t d : o.gemm_grid)
        candidates.push_back(
            GemmResult{dtype, d, d, d, 1, 0, 0, 0, 0, std::nullopt, "grid", std::nullopt});
    }
  }
  if (candidates.empty()) return;
  // The collective: an all-gather of up to 256 MiB (bf16) on the world communicator, in a loop.
  const std::vector<float> room = job.max_over_ranks({static_cast<float>(
      -static_cast<double>(std::min<std::int64_t>(kOverlapBytes, job.free_memory() / 4)) /
      static_cast<double>(1 << 20))});
  const auto cap =
      static_cast<std::int64_t>(-static_cast<double>(room.front())) * (std::int64_t{1} << 20);
  const std::int64_t bytes = (cap / (2 * job.world_size())) * 2 * job.world_size();
  job.ensure_buffers(bytes);
  const auto per_rank = static_cast<std::size_t>(bytes / 2 / job.world_size());
  const auto all_gather = [&]() {
    job.group_start();
    for (Gpu& g : gpus)
      FSDPSIM_NCCL(ncclAllGather(g.send, g.recv, per_rank, ncclBfloat16, g.world, g.side));
    job.group_end();
  };
  for (int i = 0; i < 3; ++i) all_gather();
  FSDPSIM_CUDA(cudaEventRecord(gpu.side_start[0], gpu.side));
  for (int i = 0; i < 5; ++i) all_gather();
  FSDPSIM_CUDA(cudaEventRecord(gpu.side_stop[0], gpu.side));
  job.wait("timing the all-gather that overlaps GEMMs");
  const double ag_ms =
      std::max(1e-3, static_cast<double>(elapsed_ms(gpu.side_start[0], gpu.side_stop[0])) / 5.0);
  Lt lt(gpu);
  std::size_t kept = 0;
  for (const GemmResult& candidate : candidates) {
    GemmResult* measured = nullptr;
    for (GemmResult& g : results.gemms) {
      if (g.dtype == candidate.dtype && g.m == candidate.m && g.n == candidate.n &&
          g.k == candidate.k && g.batch == candidate.batch) {
        measured = &g;
      }
    }
    const GemmType* t = gemm_type(candidate.dtype);
    std::unique_ptr<Matmul> m;
    Timing timing;
    float loops_local = 0.0F;
    int warmup = o.warmup;
    double alone_us = 0.0;
    const std::string what = cat("GEMM ", shape_text(candidate), " under NCCL");
    if (measured != nullptr && t != nullptr) {
      try {
        m = std::make_unique<Matmul>(lt.handle, lt.workspace, *t, *measured, gpu.stream);
      } catch (const NotSupported& e) {
        results.notes.push_back(cat(what, " not measured: ", e.what()));
      }
    }
    if (m != nullptr) {
      timing = plan_timing(job, gpu, *m, o.repeats, what);
      // Enough all-gathers to outlast the warm-up and every repeat, with a margin for the
      // slowdown itself (the maximum over ranks: every rank must issue as many). They are all
      // queued before the GEMMs, so no more than kMostQueuedAllGathers: a host blocked on a full
      // launch queue would queue the GEMMs only once most all-gathers had run alone. Long GEMMs
      // get fewer repeats, then fewer warm-ups, to fit under them.
      const auto needed_ms = [&] {
        return timing.one_ms * (warmup + timing.repeats * timing.inner) * 2.0 + 5.0;
      };
      const double covered_ms = (kMostQueuedAllGathers - 2) * ag_ms;
      while (needed_ms() > covered_ms && timing.repeats > 1) --timing.repeats;
      while (needed_ms() > covered_ms && warmup > 0) --warmup;
      if (needed_ms() > covered_ms) {
        results.notes.push_back(cat(what, " not measured: one launch outlasts the ",
                                    kMostQueuedAllGathers, " all-gathers that can be queued"));
        m.reset();
        // loops_local stays 0: the ranks that measure it ask for the all-gathers.
      } else {
        loops_local = static_cast<float>(std::ceil(needed_ms() / ag_ms) + 2.0);
        // The baseline of the slowdown, timed now rather than taken from the gemm phase: the
        // GPU's clocks and temperature then are those of the run under NCCL.
        alone_us = spread_of(run_timed(job, gpu, *m, timing, warmup, cat(what, ", alone"))).median;
      }
    }
    const int loops = static_cast<int>(job.max_over_ranks({loops_local}).front());
    if (loops == 0) continue;  // measured on no rank
    progress_line(job.root(), what, false);
    all_gather();  // the ramp: the GEMMs start once the first all-gather ran on every rank
    FSDPSIM_CUDA(cudaEventRecord(gpu.side_start[1], gpu.side));
    for (int i = 1; i < loops; ++i) all_gather();
    FSDPSIM_CUDA(cudaEventRecord(gpu.side_stop[1], gpu.side));
    if (m == nullptr) {
      job.wait(cat("running the all-gathers of ", what));
      continue;
    }
    const std::vector<double> us = run_timed(job, gpu, *m, timing, warmup, what, gpu.side_start[1]);
    if (gate_timed_out(gpu.gate)) results.notes.push_back(gate_timeout_note(what));
    // Valid only if the all-gathers were still running when the last repeat ended.
    const std::size_t last = us.size() - 1;
    if (elapsed_ms(gpu.side_start[1], gpu.side_stop[1]) >=
        elapsed_ms(gpu.side_start[1], gpu.stop[last])) {
      measured->under_nccl_us = spread_of(us).median;
      measured->alone_beside_nccl_us = alone_us;
      ++kept;
    } else {
      results.notes.push_back(cat(what, " dropped: the all-gathers ended before the GEMMs"));
    }
  }
  job.free_buffers();
  progress_line(job.root(), cat("GEMMs under NCCL: ", kept, " shapes"), true);
  save();
}

HeldGemm time_held_gemm(Job& job, const HeldGemmPlan& plan) {
  std::vector<Gpu>& gpus = job.gpus();
  const int cc = compute_capability(gpus.front());
  const GemmType& type = *gemm_type(cc >= 80 ? "bf16" : "fp16");
  const GemmResult shape{type.name, plan.side, plan.side, plan.side,    1,      0,
                         0,         0,         0,         std::nullopt, "held", std::nullopt};
  // Every rank checks the same things of the same GPU model, so all stop together.
  if (cc < type.min_cc) {
    throw HarnessError(cat("the held GEMM needs compute capability ", type.min_cc / 10, ".",
                           type.min_cc % 10, "; this GPU has ", cc / 10, ".", cc % 10,
                           " (leave the rank-speed phase out with --phases)"));
  }
  // Free memory differs from rank to rank: whether any has too little is agreed on first, so
  // that all stop together rather than the others waiting out --timeout in the next collective.
  const bool too_little =
      2 * (operand_bytes(type, shape) + static_cast<std::int64_t>(kWorkspaceBytes)) >
      job.free_memory();
  if (job.max_over_ranks({too_little ? 1.0F : 0.0F}).front() > 0.0F) {
    throw HarnessError(cat("the held GEMM ", shape_text(shape), " needs ",
                           operand_bytes(type, shape) >> 20, " MiB of operands; ",
                           too_little ? "this GPU has" : "a GPU of another rank has",
                           " too little free memory"));
  }
  const std::string what = cat("held GEMM ", shape_text(shape));
  std::vector<std::unique_ptr<Lt>> handles;
  std::vector<std::unique_ptr<Matmul>> matmuls;
  std::vector<Timing> timings;
  HeldGemm out{type.name, {}, {}};
  const DeviceGuard guard;
  for (Gpu& g : gpus) {
    FSDPSIM_CUDA(cudaSetDevice(g.device));
    handles.push_back(std::make_unique<Lt>(g));
    matmuls.push_back(std::make_unique<Matmul>(handles.back()->handle, handles.back()->workspace,
                                               type, shape, g.stream));
    Timing t = plan_timing(job, g, *matmuls.back(), plan.short_repeats, what);
    out.short_per_local_gpu.push_back(
        spread_of(run_timed(job, g, *matmuls.back(), t, plan.short_warmup, cat("short ", what))));
    t.inner = static_cast<int>(std::ceil(plan.repeat_ms / t.one_ms));
    t.repeats = plan.repeats;
    timings.push_back(t);
  }
  // Every GPU of the job starts the hold together, whatever its short timing took.
  job.barrier();
  job.wait("lining the ranks up for the hold");
  // Every local GPU's hold and repeats are queued before any is waited for, in turns, and no GPU
  // gets more than kMaxQueued launches ahead of what it has finished (tracked by an event every
  // kLaunchesPerMark launches): a launch into a full queue (CUDA's holds about a thousand) would
  // block this thread on that GPU, so the others would start late, or run dry and idle between
  // launches whenever it is the slowest.
  constexpr int kLaunchesPerMark = 64;
  constexpr int kMaxQueued = 512;
  constexpr int kMarks = kMaxQueued / kLaunchesPerMark + 1;
  struct Cursor {
    int hold_left = 0;
    int repeat = 0;
    int in_repeat = -1;  // launches so far in this repeat; -1: its start event not yet recorded
    std::int64_t queued = 0;    // launches queued
    std::int64_t finished = 0;  // launches known to have finished
    std::vector<cudaEvent_t> marks;
    std::vector<std::int64_t> marked;  // `queued` when each mark was recorded
    int oldest = 0;                    // ring of recorded marks not yet seen complete
    int pending = 0;
  };
  std::vector<Cursor> cursors(gpus.size());
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    FSDPSIM_CUDA(cudaSetDevice(gpus[i].device));
    cursors[i].hold_left = static_cast<int>(std::ceil(plan.hold_ms / timings[i].one_ms));
    cursors[i].marks.resize(kMarks);
    cursors[i].marked.resize(kMarks);
    for (cudaEvent_t& e : cursors[i].marks)
      FSDPSIM_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  const auto launch = [&](std::size_t i) {
    Cursor& c = cursors[i];
    matmuls[i]->enqueue(gpus[i].stream);
    if (++c.queued % kLaunchesPerMark == 0) {
      const int slot = (c.oldest + c.pending) % kMarks;
      FSDPSIM_CUDA(cudaEventRecord(c.marks[static_cast<std::size_t>(slot)], gpus[i].stream));
      c.marked[static_cast<std::size_t>(slot)] = c.queued;
      ++c.pending;
    }
  };
  // Queues GPU i's next launch or event; false when it has queued everything.
  const auto queue_next = [&](std::size_t i) {
    Gpu& g = gpus[i];
    Cursor& c = cursors[i];
    if (c.hold_left > 0) {
      launch(i);
      --c.hold_left;
    } else if (c.repeat == timings[i].repeats) {
      return false;
    } else if (c.in_repeat < 0) {
      FSDPSIM_CUDA(cudaEventRecord(g.start[static_cast<std::size_t>(c.repeat)], g.stream));
      c.in_repeat = 0;
    } else if (c.in_repeat < timings[i].inner) {
      launch(i);
      ++c.in_repeat;
    } else {
      FSDPSIM_CUDA(cudaEventRecord(g.stop[static_cast<std::size_t>(c.repeat)], g.stream));
      ++c.repeat;
      c.in_repeat = -1;
    }
    return true;
  };
  // How far GPU i has come, from its marks.
  const auto catch_up = [&](std::size_t i) {
    Cursor& c = cursors[i];
    while (c.pending > 0) {
      const cudaError_t q = cudaEventQuery(c.marks[static_cast<std::size_t>(c.oldest)]);
      if (q == cudaErrorNotReady) break;
      FSDPSIM_CUDA(q);
      c.finished = c.marked[static_cast<std::size_t>(c.oldest)];
      c.oldest = (c.oldest + 1) % kMarks;
      --c.pending;
    }
  };
  for (bool busy = true; busy;) {
    busy = false;
    bool progressed = false;
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      FSDPSIM_CUDA(cudaSetDevice(gpus[i].device));
      catch_up(i);
      Cursor& c = cursors[i];
      bool more = true;
      while (more && c.queued - c.finished < kMaxQueued && c.pending < kMarks - 1) {
        more = queue_next(i);
        progressed = progressed || more;
      }
      busy = busy || more;
    }
    if (busy && !progressed) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  job.wait(cat("timing ", what));
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    FSDPSIM_CUDA(cudaSetDevice(gpus[i].device));
    for (cudaEvent_t e : cursors[i].marks) FSDPSIM_CUDA(cudaEventDestroy(e));
  }
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    std::vector<double> us;
    for (int r = 0; r < timings[i].repeats; ++r) {
      const auto at = static_cast<std::size_t>(r);
      us.push_back(static_cast<double>(elapsed_ms(gpus[i].start[at], gpus[i].stop[at])) * 1000.0 /
                   timings[i].inner);
    }
    out.per_local_gpu.push_back(spread_of(us));
  }
  return out;
}

}  // namespace fsdpsim::harness
