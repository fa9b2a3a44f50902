// Cross-entropy J and the augmented loss's KL (Inan et al. 2017, eqs. 3.2-3.4) over (N, |V|) logits,
// one row at a time: each row is read once from memory (bf16 or fp32), widened into an fp32 buffer that
// stays in the cache, and every reduction runs on that buffer with ATen's vectorised exp.
//
// forward: per row, lse = log Σ exp(z) and the CE term lse - z[y*]; with the augmented loss also
//   lse_τ = log Σ exp(z/τ) and the cross term Σ ỹ log softmax(z/τ) = (Σ ỹ z)/τ - lse_τ  (Σ ỹ = 1).
// backward: ∂/∂z = w_ce (exp(z - lse) - onehot(y*)) + w_aug (exp(z/τ - lse_τ) - ỹ)   (eq. 3.4),
//   from the saved lse / lse_τ, written once in the logits' dtype.
// shift (optional, |V|): the augmented loss tempers z - shift instead of z (ŷ = softmax(W h/τ) with z = W h + b
//   and shift = b, eq. 3.1 as printed); the backward then also returns ∂/∂shift = -Σ_rows of the J_aug part,
//   summed per fixed block of rows and then over the blocks, so the result does not depend on the threads.
// Registered as torch.ops.tiedlm.lm_loss_forward / lm_loss_backward; the Python FusedLMLoss is the fallback.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <vector>

using at::Tensor;

namespace {

using Vec = at::vec::Vectorized<float>;

template <typename T>
void widen(const T* src, float* dst, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    std::copy(src, src + n, dst);
  } else {
    for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<float>(src[j]);
  }
}

template <typename T>
void narrow_to(const float* src, T* dst, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    std::copy(src, src + n, dst);
  } else {
    at::vec::convert(src, dst, n);
  }
}

float row_max(const float* z, int64_t V) {
  return at::vec::reduce_all<float>([](Vec& a, Vec& b) { return at::vec::maximum(a, b); }, z, V);
}

// log Σ exp(z * scale), z already in fp32; m = max(z)
float log_sum_exp(const float* z, int64_t V, float m, float scale) {
  const Vec shift(m * scale), s(scale);
  const float sum = at::vec::map_reduce_all<float>([&](Vec x) { return (x * s - shift).exp_u20(); },
                                                   [](Vec a, Vec b) { return a + b; }, z, V);
  return m * scale + std::log(sum);
}

const int64_t kGrain = 8;       // rows per parallel task
const int64_t kMaxBlocks = 64;  // at most this many row blocks (|V|-sized partial sums) in the backward

void check_inputs(const Tensor& logits, const Tensor& targets, const c10::optional<Tensor>& probs,
                  const c10::optional<Tensor>& inverse, const c10::optional<Tensor>& shift) {
  TORCH_CHECK(logits.device().is_cpu() && logits.dim() == 2 && logits.is_contiguous(),
              "tiedlm lm_loss: logits must be a contiguous (N, |V|) CPU tensor");
  TORCH_CHECK(logits.scalar_type() == at::kFloat || logits.scalar_type() == at::kBFloat16,
              "tiedlm lm_loss: logits must be float32 or bfloat16");
  TORCH_CHECK(targets.scalar_type() == at::kLong && targets.is_contiguous(), "tiedlm lm_loss: targets int64");
  TORCH_CHECK(probs.has_value() == inverse.has_value(), "tiedlm lm_loss: probs and inverse go together");
  if (probs) {
    TORCH_CHECK(probs->scalar_type() == at::kFloat && probs->is_contiguous() && probs->size(1) == logits.size(1),
                "tiedlm lm_loss: probs must be contiguous float32 (U, |V|)");
    TORCH_CHECK(inverse->scalar_type() == at::kLong && inverse->is_contiguous(), "tiedlm lm_loss: inverse int64");
  }
  if (shift) {
    TORCH_CHECK(probs.has_value(), "tiedlm lm_loss: a shift needs the augmented loss");
    TORCH_CHECK(shift->scalar_type() == at::kFloat && shift->is_contiguous() && shift->dim() == 1 &&
                    shift->size(0) == logits.size(1),
                "tiedlm lm_loss: shift must be a contiguous float32 (|V|) tensor");
  }
}

// zs = z - shift, vectorised
void subtract(const float* z, const float* shift, float* zs, int64_t V) {
  at::vec::map2([](Vec a, Vec b) { return a - b; }, zs, z, shift, V);
}

// Returns per-row (ce, cross, lse, lse_tau): ce = lse - z[y*] (0 without with_ce), cross = Σ ỹ log ŷ
// (0 without the augmented loss); lse / lse_tau are what the backward needs (lse_tau of z - shift if given).
std::tuple<Tensor, Tensor, Tensor, Tensor> lm_loss_forward(const Tensor& logits, const Tensor& targets,
                                                           bool with_ce, const c10::optional<Tensor>& probs,
                                                           const c10::optional<Tensor>& inverse, double tau,
                                                           const c10::optional<Tensor>& shift) {
  check_inputs(logits, targets, probs, inverse, shift);
  const int64_t N = logits.size(0), V = logits.size(1);
  auto opts = logits.options().dtype(at::kFloat);
  Tensor ce = at::zeros({N}, opts), cross = at::zeros({N}, opts), lse = at::zeros({N}, opts),
         lse_tau = at::zeros({N}, opts);
  const float inv_tau = static_cast<float>(1.0 / tau);
  const int64_t* tgt = targets.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, logits.scalar_type(), "tiedlm_lm_loss_forward", [&] {
    const scalar_t* z_all = logits.data_ptr<scalar_t>();
    at::parallel_for(0, N, kGrain, [&](int64_t begin, int64_t end) {
      std::vector<float> buf(V), shifted(shift ? V : 0);
      for (int64_t n = begin; n < end; ++n) {
        float* z = buf.data();
        widen(z_all + n * V, z, V);
        float m = row_max(z, V);
        if (with_ce) {
          const float l = log_sum_exp(z, V, m, 1.f);
          lse.data_ptr<float>()[n] = l;
          ce.data_ptr<float>()[n] = l - z[tgt[n]];
        }
        if (probs) {
          if (shift) {  // from here on the row is z - shift
            subtract(z, shift->data_ptr<float>(), shifted.data(), V);
            z = shifted.data();
            m = row_max(z, V);
          }
          const float lt = log_sum_exp(z, V, m, inv_tau);
          const float* y = probs->data_ptr<float>() + inverse->data_ptr<int64_t>()[n] * V;
          const float dot = at::vec::map2_reduce_all<float>([](Vec a, Vec b) { return a * b; },
                                                            [](Vec a, Vec b) { return a + b; }, z, y, V);
          lse_tau.data_ptr<float>()[n] = lt;
          cross.data_ptr<float>()[n] = dot * inv_tau - lt;
        }
      }
    });
  });
  return {ce, cross, lse, lse_tau};
}

// ∂/∂logits of w_ce Σ ce + w_aug Σ (Σ ỹ log ỹ - cross), in the logits' dtype; with a shift also
// ∂/∂shift = -Σ_rows w_aug (exp((z - shift)/τ - lse_τ) - ỹ)/τ (fp32, |V|), else an empty tensor.
std::tuple<Tensor, Tensor> lm_loss_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                                            const Tensor& lse_tau, double w_ce, const c10::optional<Tensor>& probs,
                                            const c10::optional<Tensor>& inverse, double tau, double w_aug,
                                            const c10::optional<Tensor>& shift) {
  check_inputs(logits, targets, probs, inverse, shift);
  const int64_t N = logits.size(0), V = logits.size(1);
  Tensor grad = at::empty_like(logits);
  // rows go in fixed blocks; with a shift each block sums its rows' J_aug gradients into a row of its own
  const int64_t block = std::max<int64_t>(kGrain, (N + kMaxBlocks - 1) / kMaxBlocks),
                blocks = (N + block - 1) / block;
  Tensor partial = shift ? at::zeros({blocks, V}, logits.options().dtype(at::kFloat)) : Tensor();
  const float inv_tau = static_cast<float>(1.0 / tau), wc = static_cast<float>(w_ce),
              wa = static_cast<float>(w_aug * (1.0 / tau));  // w_aug / τ: eq. (3.4)
  const int64_t* tgt = targets.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, logits.scalar_type(), "tiedlm_lm_loss_backward", [&] {
    const scalar_t* z_all = logits.data_ptr<scalar_t>();
    scalar_t* g_all = grad.data_ptr<scalar_t>();
    at::parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
      std::vector<float> buf(V), shifted(shift ? V : 0);
      for (int64_t n = first * block; n < std::min(N, last * block); ++n) {
        float* z = buf.data();
        widen(z_all + n * V, z, V);
        const float* zs = z;  // the row the augmented loss tempers
        if (shift) {
          subtract(z, shift->data_ptr<float>(), shifted.data(), V);
          zs = shifted.data();
        }
        float* acc = shift ? partial.data_ptr<float>() + (n / block) * V : nullptr;
        const float* y = probs ? probs->data_ptr<float>() + inverse->data_ptr<int64_t>()[n] * V : nullptr;
        const Vec l(lse.data_ptr<float>()[n]), lt(lse_tau.data_ptr<float>()[n] * tau), it(inv_tau), vwc(wc),
            vwa(wa);
        const int64_t step = Vec::size();
        for (int64_t j = 0; j < V; j += step) {
          const int64_t k = std::min(step, V - j);
          const Vec x = Vec::loadu(z + j, k);
          Vec g(0.f);
          if (wc != 0.f) g = vwc * (x - l).exp_u20();
          if (y) {
            const Vec q = vwa * (((Vec::loadu(zs + j, k) - lt) * it).exp_u20() - Vec::loadu(y + j, k));
            g = g + q;
            if (acc) (Vec::loadu(acc + j, k) - q).store(acc + j, k);
          }
          g.store(z + j, k);  // the buffer now holds the row's gradient
        }
        if (wc != 0.f) z[tgt[n]] -= wc;
        narrow_to(z, g_all + n * V, V);
      }
    });
  });
  return {grad, shift ? partial.sum(0) : at::empty({0}, logits.options().dtype(at::kFloat))};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(tiedlm, m) {
  m.def("lm_loss_forward(Tensor logits, Tensor targets, bool with_ce, Tensor? probs, Tensor? inverse, "
        "float tau, Tensor? shift) -> (Tensor, Tensor, Tensor, Tensor)");
  m.def("lm_loss_backward(Tensor logits, Tensor targets, Tensor lse, Tensor lse_tau, float w_ce, Tensor? probs, "
        "Tensor? inverse, float tau, float w_aug, Tensor? shift) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(tiedlm, CPU, m) {
  m.impl("lm_loss_forward", &lm_loss_forward);
  m.impl("lm_loss_backward", &lm_loss_backward);
}
