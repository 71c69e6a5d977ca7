#include "kernels/train/layer_graph.hpp"

#include "kernels/train/flop_count.hpp"

namespace fp8lab::train {

const char* saved_name(Saved s) {
  static constexpr const char* names[kSavedCount] = {"x_in", "a", "q", "k", "v", "p", "o", "x_mid", "b", "h1", "h3", "g"};
  return names[static_cast<int>(s)];
}

Shape saved_shape(Saved s, const ModelConfig& c, std::int64_t T, AttentionKind attention) {
  switch (s) {
    case Saved::k:
    case Saved::v: return {T, c.kv_dim()};
    case Saved::p:
      if (attention == AttentionKind::flash) return {c.heads, T};
      return {static_cast<std::int64_t>(c.heads) * T, T};
    case Saved::h1:
    case Saved::h3:
    case Saved::g: return {T, c.hidden};
    default: return {T, c.dim};
  }
}

Producer producer_of(Saved s, AttentionKind attention) {
  using S = Saved;
  if (attention == AttentionKind::flash && (s == S::p || s == S::o)) return {"flash", {S::q, S::k, S::v}, 3};
  switch (s) {
    case S::a: return {"norm_att", {S::x_in, S::x_in, S::x_in}, 1};
    case S::q: return {"proj_q", {S::a, S::x_in, S::x_in}, 1};
    case S::k: return {"proj_k", {S::a, S::x_in, S::x_in}, 1};
    case S::v: return {"proj_v", {S::a, S::x_in, S::x_in}, 1};
    case S::p: return {"scores", {S::q, S::k, S::x_in}, 2};
    case S::o: return {"attend", {S::p, S::v, S::x_in}, 2};
    case S::x_mid: return {"proj_o", {S::o, S::x_in, S::x_in}, 2};
    case S::b: return {"norm_ffn", {S::x_mid, S::x_in, S::x_in}, 1};
    case S::h1: return {"proj_1", {S::b, S::x_in, S::x_in}, 1};
    case S::h3: return {"proj_3", {S::b, S::x_in, S::x_in}, 1};
    case S::g: return {"swiglu", {S::h1, S::h3, S::x_in}, 2};
    case S::x_in: break;
  }
  return {"input", {S::x_in, S::x_in, S::x_in}, 0};
}

double producer_flops(Saved s, const ModelConfig& c, std::int64_t T) {
  const double t = static_cast<double>(T), d = c.dim, kv = c.kv_dim(), f = c.hidden, hs = c.head_size(),
               pairs = static_cast<double>(c.heads) * t * (t + 1) / 2;
  switch (s) {
    case Saved::a:
    case Saved::b: return flops::rmsnorm(t, d);
    case Saved::q: return flops::gemm(t, d, d) + flops::rope(t, d);
    case Saved::k: return flops::gemm(t, kv, d) + flops::rope(t, kv);
    case Saved::v: return flops::gemm(t, kv, d);
    case Saved::p: return 2 * pairs * hs + flops::kSoftmaxPerScore * pairs;
    case Saved::o: return 2 * pairs * hs;
    case Saved::x_mid: return flops::gemm(t, d, d) + t * d;
    case Saved::h1:
    case Saved::h3: return flops::gemm(t, f, d);
    case Saved::g: return flops::kSwigluPerElement * t * f;
    case Saved::x_in: break;
  }
  return 0;
}

}  // namespace fp8lab::train
