#include "grouped_gemm_cases.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "cli_common.hpp"
#include "driver.hpp"
#include "error.hpp"

namespace cakec {
namespace {

std::vector<int64_t> split(int64_t m, int64_t parts) {
  std::vector<int64_t> v(size_t(parts), m / parts);
  for (int64_t i = 0; i < m % parts; ++i) ++v[size_t(i)];
  return v;
}

std::vector<int64_t> lognormal(int64_t m, int64_t e) {
  std::mt19937 rng(uint32_t(20261129 + e));
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> w(static_cast<size_t>(e));
  for (auto& v : w) v = std::exp(d(rng));
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  std::vector<int64_t> sizes(static_cast<size_t>(e));
  std::vector<std::pair<double, size_t>> frac;
  int64_t given = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    double exact = double(m) * w[i] / sum;
    sizes[i] = int64_t(std::floor(exact));
    given += sizes[i];
    frac.push_back({exact - double(sizes[i]), i});
  }
  std::sort(frac.begin(), frac.end(), [](auto& a, auto& b) { return a.first > b.first; });
  for (size_t i = 0; given < m; ++i, ++given) ++sizes[frac[i % frac.size()].second];
  return sizes;
}

}  // namespace

Shape shape_by_name(const std::string& name) {
  if (name == "gate_up") return {name, 4096, 6144};
  if (name == "down") return {name, 6144, 2048};
  throw UsageError("--shape: '" + name + "' is not gate_up or down");
}

int64_t Case::min_size() const { return *std::min_element(sizes.begin(), sizes.end()); }
int64_t Case::max_size() const { return *std::max_element(sizes.begin(), sizes.end()); }

const std::vector<ModelCase>& model_cases() {
  struct Model {
    const char* name;
    int64_t hidden, intermediate, e, m;
  };
  // Sizes from the models' configs; M: tokens a step times top-k, over the EP group.
  static const Model models[] = {
      {"DeepSeek-V3/EP8", 7168, 2048, 32, 65536},  {"Mixtral-8x7B", 4096, 14336, 8, 32768},
      {"Mixtral-8x22B", 6144, 16384, 8, 32768},    {"Qwen3-30B-A3B", 2048, 768, 128, 65536},
      {"Qwen3-235B/EP8", 4096, 1536, 16, 65536},   {"DBRX", 6144, 10752, 16, 65536},
      {"OLMoE-1B-7B", 2048, 1024, 64, 65536},
  };
  static const std::vector<ModelCase> cases = [] {
    std::vector<ModelCase> v;
    for (const Model& md : models) {
      v.push_back({{std::string(md.name) + " gate_up", 2 * md.intermediate, md.hidden}, md.m, md.e});
      v.push_back({{std::string(md.name) + " down", md.hidden, md.intermediate}, md.m, md.e});
    }
    return v;
  }();
  return cases;
}

Case make_case(const Shape& shape, int64_t m, int64_t e, const std::string& dist) {
  Case c;
  c.m = m, c.e = e, c.n = shape.n, c.k = shape.k, c.dist = dist;
  if (dist == "balanced") {
    c.sizes = split(m, e);
  } else if (dist == "skewed") {
    c.sizes = {e == 1 ? m : m / 2};
    if (e > 1)
      for (int64_t s : split(m - m / 2, e - 1)) c.sizes.push_back(s);
  } else if (dist == "one_empty") {
    if (e < 2) throw UsageError("--dist one_empty needs E >= 2");
    c.sizes = split(m, e - 1);
    c.sizes.insert(c.sizes.begin() + e / 2, 0);
  } else if (dist == "lognormal") {
    c.sizes = lognormal(m, e);
  } else {
    throw UsageError("--dist: '" + dist + "' is not balanced, skewed, one_empty or lognormal");
  }
  c.offsets = {0};
  for (int64_t s : c.sizes) {
    c.offsets.push_back(c.offsets.back() + s);
    c.ends.push_back(int32_t(c.offsets.back()));
  }
  return c;
}

// Row-major R [r, c] is column-major R^T with leading dimension c. So, per group e with
// rows X_e [s, K], G_e [s, N], W_e [N, K]:
//   fwd   Y_e^T  [N, s] = op_T(W_e^T) * X_e^T          m=N, n=s, k=K
//   dgrad dX_e^T [K, s] = W_e^T * G_e^T                m=K, n=s, k=N
//   wgrad dW_e^T [K, N] = X_e^T * op_T(G_e^T)          m=K, n=N, k=s
std::vector<Gemm> baseline_gemms(const Case& c, const std::string& op, CUdeviceptr x, CUdeviceptr g,
                                 CUdeviceptr w, CUdeviceptr out) {
  std::vector<Gemm> v;
  const int N = int(c.n), K = int(c.k);
  const bool f32 = op == "wgrad_acc";
  for (int64_t e = 0; e < c.e; ++e) {
    const int s = int(c.sizes[size_t(e)]);
    if (s == 0) continue;
    const size_t row = size_t(c.offsets[size_t(e)]);
    auto at = [](CUdeviceptr p, size_t bytes) { return reinterpret_cast<void*>(p + bytes); };
    void* xe = at(x, row * K * 2);
    void* ge = at(g, row * N * 2);
    void* we = at(w, size_t(e) * N * K * 2);
    if (op == "fwd")
      v.push_back({CUBLAS_OP_T, CUBLAS_OP_N, N, s, K, we, K, xe, K, at(out, row * N * 2), N, CUDA_R_16BF, 0.f});
    else if (op == "dgrad")
      v.push_back({CUBLAS_OP_N, CUBLAS_OP_N, K, s, N, we, K, ge, N, at(out, row * K * 2), K, CUDA_R_16BF, 0.f});
    else
      v.push_back({CUBLAS_OP_N, CUBLAS_OP_T, K, N, s, xe, K, ge, N, at(out, size_t(e) * N * K * (f32 ? 4 : 2)), K,
                   f32 ? CUDA_R_32F : CUDA_R_16BF, f32 ? 1.f : 0.f});
  }
  return v;
}

void run_loop(const CublasHandle& h, const std::vector<Gemm>& gemms) {
  const float alpha = 1.f;
  for (const Gemm& q : gemms) {
    cublasStatus_t s = h.api().cublasGemmEx(h.get(), q.ta, q.tb, q.m, q.n, q.k, &alpha, q.a, CUDA_R_16BF, q.lda, q.b,
                                            CUDA_R_16BF, q.ldb, &q.beta, q.c, q.ctype, q.ldc, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) throw cake::Error(std::string("cublasGemmEx failed: ") + cublas_status_name(s));
  }
}

GroupedBatched::GroupedBatched(const std::vector<Gemm>& gemms, CUdeviceptr ptrs) : ptrs_(ptrs) {
  std::vector<const void*> p(gemms.size() * 3);
  for (size_t i = 0; i < gemms.size(); ++i) {
    const Gemm& q = gemms[i];
    ta_.push_back(q.ta), tb_.push_back(q.tb);
    m_.push_back(q.m), n_.push_back(q.n), k_.push_back(q.k);
    lda_.push_back(q.lda), ldb_.push_back(q.ldb), ldc_.push_back(q.ldc);
    alpha_.push_back(1.f), beta_.push_back(q.beta), group_size_.push_back(1);
    ctype_ = q.ctype;
    p[i] = q.a, p[gemms.size() + i] = q.b, p[2 * gemms.size() + i] = q.c;
  }
  if (!p.empty()) CAKE_CU(cuMemcpyHtoD(ptrs, p.data(), p.size() * sizeof(void*)));
  CAKE_CU(cuCtxSynchronize());  // the copy is done before a (non-blocking) stream reads it
}

cublasStatus_t GroupedBatched::run(const CublasHandle& h) const {
  const size_t n = m_.size();
  if (n == 0) return CUBLAS_STATUS_SUCCESS;
  auto arr = [&](size_t i) { return reinterpret_cast<void* const*>(ptrs_ + i * n * sizeof(void*)); };
  return h.api().cublasGemmGroupedBatchedEx(
      h.get(), ta_.data(), tb_.data(), m_.data(), n_.data(), k_.data(), alpha_.data(),
      reinterpret_cast<const void* const*>(arr(0)), CUDA_R_16BF, lda_.data(),
      reinterpret_cast<const void* const*>(arr(1)), CUDA_R_16BF, ldb_.data(), beta_.data(), arr(2), ctype_,
      ldc_.data(), int(n), group_size_.data(), CUBLAS_COMPUTE_32F);
}

void GroupedBatched::run_checked(const CublasHandle& h) const {
  cublasStatus_t s = run(h);
  if (s != CUBLAS_STATUS_SUCCESS)
    throw cake::Error(std::string("cublasGemmGroupedBatchedEx failed: ") + cublas_status_name(s));
}

}  // namespace cakec
