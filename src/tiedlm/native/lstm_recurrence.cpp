// The VD-LSTM's hidden-to-hidden recurrence as one C++ loop per window (forward and backward).
//
// Same contract and gate layout as tiedlm/models/encoders/recurrence.py ([input, forget, output, cell]; the
// state fed back is h_{t-1} * mask). Per time step: one matmul (ATen addmm / baddbmm, i.e. MKL or
// oneDNN), the two vectorised activations (ATen sigmoid_ / tanh_), and the remaining gate math in one
// fused pass over the state written here. In Python the same step is ~10 (forward) and ~20 (backward)
// small kernels whose launch cost, not their arithmetic, dominated a small model's step.
//
// Registered as torch.ops.tiedlm.lstm_forward / lstm_backward (no pybind: a plain shared library).

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>
#include <torch/library.h>

using at::Tensor;

namespace {

// c_t = f * c_{t-1} + i * g, written to c (rows x H; gates rows x 4H, post-activation).
template <typename T>
void cell_update(const T* a, const T* c_prev, T* c, int64_t rows, int64_t H) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* i = a + r * 4 * H;
    const T* f = i + H;
    const T* g = i + 3 * H;
    const T* cp = c_prev + r * H;
    T* cr = c + r * H;
#pragma GCC ivdep
    for (int64_t j = 0; j < H; ++j) cr[j] = f[j] * cp[j] + i[j] * g[j];
  }
}

// h_t = o * tanh(c_t) -> h; the next step's input h_t * mask -> hm_next (when given).
template <typename T>
void hidden_update(const T* a, const T* tc, const T* mask, T* h, T* hm_next, int64_t rows, int64_t H) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* o = a + r * 4 * H + 2 * H;
    const T* tcr = tc + r * H;
    T* hr = h + r * H;
#pragma GCC ivdep
    for (int64_t j = 0; j < H; ++j) hr[j] = o[j] * tcr[j];
    if (hm_next) {
      T* hmr = hm_next + r * H;
      if (mask) {
        const T* m = mask + r * H;
#pragma GCC ivdep
        for (int64_t j = 0; j < H; ++j) hmr[j] = hr[j] * m[j];
      } else {
        for (int64_t j = 0; j < H; ++j) hmr[j] = hr[j];
      }
    }
  }
}

// One backward step of the gate math: dh (in: ∂/∂h_t, carried part) + d_h (∂/∂h_t from the outputs),
// dc (in/out: ∂/∂c_t -> ∂/∂c_{t-1}); writes the pre-activation gate gradients dg (rows x 4H).
template <typename T>
void gate_backward(const T* a, const T* tc, const T* c_prev, const T* dh_carried, const T* d_h, T* dc, T* dg,
                   int64_t rows, int64_t H) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* i = a + r * 4 * H;
    const T* f = i + H;
    const T* o = i + 2 * H;
    const T* g = i + 3 * H;
    const T* tcr = tc + r * H;
    const T* cp = c_prev + r * H;
    const T* dhc = dh_carried + r * H;
    const T* dho = d_h + r * H;
    T* dcr = dc + r * H;
    T* dgi = dg + r * 4 * H;
    T* dgf = dgi + H;
    T* dgo = dgi + 2 * H;
    T* dgg = dgi + 3 * H;
#pragma GCC ivdep
    for (int64_t j = 0; j < H; ++j) {
      const T dh = dhc[j] + dho[j];
      const T t = tcr[j];
      dgo[j] = dh * t * o[j] * (T(1) - o[j]);
      const T d = dcr[j] + dh * o[j] * (T(1) - t * t);
      dgi[j] = d * g[j] * i[j] * (T(1) - i[j]);
      dgf[j] = d * cp[j] * f[j] * (T(1) - f[j]);
      dgg[j] = d * i[j] * (T(1) - g[j] * g[j]);
      dcr[j] = d * f[j];
    }
  }
}

void check_cpu_contiguous(const Tensor& t, const char* name) {
  TORCH_CHECK(t.device().is_cpu(), "tiedlm lstm: ", name, " must be on the CPU");
  TORCH_CHECK(t.is_contiguous(), "tiedlm lstm: ", name, " must be contiguous");
}

std::vector<int64_t> with_time(int64_t T, at::IntArrayRef state) {
  std::vector<int64_t> shape{T};
  shape.insert(shape.end(), state.begin(), state.end());
  return shape;
}

// The rows of a window are independent sequences: the loops below run on slices [s, s + n) of the first
// lead axis (batch rows, or the k blocks of a block-diagonal W_hh), one slice per thread, each with its own
// single-threaded matmuls. For a small model this halves the recurrence's time on two cores, where one
// (20 x 200) x (200 x 800) matmul a step is too small to split.
template <typename F>
void for_each_slice(int64_t lead0, const F& fn) {
  const int64_t threads = std::max<int64_t>(1, at::get_num_threads());
  const at::ThreadLocalState caller;  // grad / inference mode are thread-local: workers take the caller's
  at::parallel_for(0, lead0, (lead0 + threads - 1) / threads, [&](int64_t begin, int64_t end) {
    at::ThreadLocalStateGuard same_modes(caller);
    fn(begin, end - begin);
  });
}

// xproj (T, *lead, 4H); h0, c0, mask (*lead, H); w_hh (4H, H) or (k, 4H, H) with lead = (k, B).
// Returns acts (post-activation gates), cs (c_{-1}..c_{T-1}), tcs (tanh c_t), hs, hms (masked state fed at t).
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> lstm_forward(const Tensor& xproj, const Tensor& h0,
                                                                const Tensor& c0, const Tensor& w_hh,
                                                                const c10::optional<Tensor>& mask) {
  for (auto [t, n] : {std::pair{&xproj, "xproj"}, {&h0, "h0"}, {&c0, "c0"}}) check_cpu_contiguous(*t, n);
  if (mask) check_cpu_contiguous(*mask, "mask");
  const int64_t T = xproj.size(0), H = xproj.size(-1) / 4, per_lead0 = h0.numel() / H / h0.size(0);
  const bool dense = w_hh.dim() == 2;
  const Tensor w_t = w_hh.transpose(-1, -2);
  Tensor acts = at::empty_like(xproj);
  Tensor cs = at::empty(with_time(T + 1, h0.sizes()), h0.options());
  Tensor tcs = at::empty(with_time(T, h0.sizes()), h0.options());
  Tensor hs = at::empty_like(tcs), hms = at::empty_like(tcs);
  cs[0].copy_(c0);
  if (T == 0) return {acts, cs, tcs, hs, hms};
  Tensor hm0 = hms.select(0, 0);
  mask ? at::mul_out(hm0, h0, *mask) : hm0.copy_(h0);
  AT_DISPATCH_FLOATING_TYPES(xproj.scalar_type(), "tiedlm_lstm_forward", [&] {
    for_each_slice(h0.size(0), [&](int64_t s, int64_t n) {
      const int64_t rows = n * per_lead0, off = s * per_lead0 * H;  // rows of H in this slice, first element
      const scalar_t* m = mask ? mask->data_ptr<scalar_t>() + off : nullptr;
      const Tensor w = dense ? w_t : w_t.narrow(0, s, n);
      for (int64_t t = 0; t < T; ++t) {
        Tensor a = acts.select(0, t).narrow(0, s, n), tc = tcs.select(0, t).narrow(0, s, n);
        Tensor x = xproj.select(0, t).narrow(0, s, n), hm = hms.select(0, t).narrow(0, s, n);
        dense ? at::addmm_out(a, x, hm, w) : at::baddbmm_out(a, x, hm, w);
        a.narrow(-1, 0, 3 * H).sigmoid_();
        a.narrow(-1, 3 * H, H).tanh_();
        Tensor c = cs.select(0, t + 1).narrow(0, s, n);
        cell_update(a.data_ptr<scalar_t>(), cs.select(0, t).data_ptr<scalar_t>() + off, c.data_ptr<scalar_t>(),
                    rows, H);
        at::tanh_out(tc, c);
        hidden_update(a.data_ptr<scalar_t>(), tc.data_ptr<scalar_t>(), m, hs.select(0, t).data_ptr<scalar_t>() + off,
                      t + 1 < T ? hms.select(0, t + 1).data_ptr<scalar_t>() + off : nullptr, rows, H);
      }
    });
  });
  return {acts, cs, tcs, hs, hms};
}

// Gradients through the recurrence, newest step first. d_hs (T, *lead, H) from the outputs; d_hT, d_cT
// from the final state. Returns (d_gates (T, *lead, 4H) pre-activation, ∂/∂h0, ∂/∂c0); the caller forms
// ∂/∂W_hh as one matmul over all steps.
std::tuple<Tensor, Tensor, Tensor> lstm_backward(const Tensor& d_hs, const Tensor& d_hT, const Tensor& d_cT,
                                                 const Tensor& acts, const Tensor& cs, const Tensor& tcs,
                                                 const Tensor& w_hh, const c10::optional<Tensor>& mask) {
  for (auto [t, n] : {std::pair{&d_hs, "d_hs"}, {&acts, "acts"}, {&cs, "cs"}, {&tcs, "tcs"}})
    check_cpu_contiguous(*t, n);
  if (mask) check_cpu_contiguous(*mask, "mask");
  const int64_t T = acts.size(0), H = acts.size(-1) / 4, per_lead0 = d_hT.numel() / H / d_hT.size(0);
  const bool dense = w_hh.dim() == 2;
  Tensor dh_all = d_hT.contiguous().clone(), dc_all = d_cT.contiguous().clone();
  Tensor d_gates = at::empty_like(acts);
  AT_DISPATCH_FLOATING_TYPES(acts.scalar_type(), "tiedlm_lstm_backward", [&] {
    for_each_slice(d_hT.size(0), [&](int64_t s, int64_t n) {
      const int64_t rows = n * per_lead0, off = s * per_lead0 * H;
      Tensor dh = dh_all.narrow(0, s, n), dc = dc_all.narrow(0, s, n);
      const Tensor w = dense ? w_hh : w_hh.narrow(0, s, n);
      const c10::optional<Tensor> m = mask ? c10::optional<Tensor>(mask->narrow(0, s, n)) : c10::nullopt;
      for (int64_t t = T - 1; t >= 0; --t) {
        Tensor dg = d_gates.select(0, t).narrow(0, s, n);
        gate_backward(acts.select(0, t).data_ptr<scalar_t>() + 4 * off, tcs.select(0, t).data_ptr<scalar_t>() + off,
                      cs.select(0, t).data_ptr<scalar_t>() + off, dh.data_ptr<scalar_t>(),
                      d_hs.select(0, t).data_ptr<scalar_t>() + off, dc.data_ptr<scalar_t>(), dg.data_ptr<scalar_t>(),
                      rows, H);
        dense ? at::mm_out(dh, dg, w) : at::bmm_out(dh, dg, w);
        if (m) dh.mul_(*m);
      }
    });
  });
  return {d_gates, dh_all, dc_all};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(tiedlm, m) {
  m.def("lstm_forward(Tensor xproj, Tensor h0, Tensor c0, Tensor w_hh, Tensor? mask) -> "
        "(Tensor, Tensor, Tensor, Tensor, Tensor)");
  m.def("lstm_backward(Tensor d_hs, Tensor d_hT, Tensor d_cT, Tensor acts, Tensor cs, Tensor tcs, "
        "Tensor w_hh, Tensor? mask) -> (Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(tiedlm, CPU, m) {
  m.impl("lstm_forward", &lstm_forward);
  m.impl("lstm_backward", &lstm_backward);
}
