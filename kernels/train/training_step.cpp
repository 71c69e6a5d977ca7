#include "kernels/train/training_step.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "kernels/train/backward_ops.hpp"
#include "kernels/train/flash_attention.hpp"
#include "kernels/train/flop_count.hpp"
#include "kernels/train/forward_ops.hpp"
#include "kernels/train/linear_gemm.hpp"
#include "kernels/train/model_weights.hpp"
#include "kernels/train/saved_slot.hpp"

namespace fp8lab::train {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

template <class Real>
class Step {
 public:
  Step(const StepInput& in, const PrecisionRecipe& recipe, const ActivationPolicy& policy, MemoryLedger& ledger)
      : in_(in), recipe_(recipe), policy_(policy), ledger_(ledger), c_(in.model),
        eb_(ledger.shapes_only() && in.element_bytes > 0 ? in.element_bytes : static_cast<int>(sizeof(Real))),
        T_(ledger.shapes_only() && in.tokens.empty() ? in.positions : static_cast<std::int64_t>(in.tokens.size())) {}

  StepResult run() {
    StepResult result;
    StepReport& r = result.report;
    r.model = c_.name;
    r.recipe = recipe_.name;
    r.policy = policy_.spec;
    r.attention = attention_kind_name(in_.attention);
    r.tokens = T_;
    r.shapes_only = ledger_.shapes_only();
    ledger_.begin_phase("setup");
    w_ = allocate_weights<Real>(c_, ledger_, MemoryCategory::weights, eb_);
    if (!r.shapes_only) copy_weights(*in_.weights, w_);
    grad_ = allocate_weights<Real>(c_, ledger_, MemoryCategory::gradients, eb_);
    DeviceBuffer optimizer;  // master weights and moments: counted, never read by the step
    if (in_.optimizer.per_parameter() > 0)
      optimizer = ledger_.allocate(static_cast<std::size_t>(parameter_count(c_) * in_.optimizer.per_parameter()),
                                   MemoryCategory::optimizer_state);

    const auto start = Clock::now();
    Tensor<Real> dlogits = forward(r);
    if (compute() && in_.loss_scale != 1.0)  // the scaled loss's gradient, rounded once per element
      for (Real& g : dlogits.span()) g = static_cast<Real>(g * in_.loss_scale);
    r.forward_seconds = seconds_since(start);
    const auto backward_start = Clock::now();
    if (!in_.forward_only) backward(std::move(dlogits), r);
    r.backward_seconds = seconds_since(backward_start);
    r.step_seconds = seconds_since(start);

    for (std::size_t k = 0; k < kMemoryCategories; ++k) r.peak_bytes[k] = ledger_.peak(static_cast<MemoryCategory>(k));
    r.peak_bytes_total = ledger_.peak_total();
    r.phases = ledger_.phases();
    report_plan(r);
    if (!r.shapes_only && !in_.forward_only)
      grad_.for_each([&](const std::string& name, const Tensor<Real>& t) {
        result.gradients.push_back({name, t.rows, t.cols, std::vector<double>(t.data(), t.data() + t.size())});
      });
    return result;
  }

 private:
  Tensor<Real> make(std::int64_t rows, std::int64_t cols, MemoryCategory cat) {
    return make_tensor<Real>(ledger_, rows, cols, cat, eb_);
  }
  Tensor<Real> make(Saved s, MemoryCategory cat) {
    const Shape sh = saved_shape(s, c_, T_, in_.attention);
    return make(sh.rows, sh.cols, cat);
  }
  bool compute() const { return !ledger_.shapes_only(); }
  bool flash() const { return in_.attention == AttentionKind::flash; }
  GemmCall call(const std::string& layer, GemmKind kind) const {
    const GemmPrecision& precision = recipe_.resolve(layer, kind);
    GemmOperandTally* tally = in_.operand_stats && compute() && precision.kind == GemmPrecision::Kind::fp8
                                  ? &in_.operand_stats->entry(layer, kind)
                                  : nullptr;
    GemmCall c{ledger_, precision, &recipe_.resolve(layer, GemmKind::dgrad), &recipe_.resolve(layer, GemmKind::fprop), eb_,
               tally, nullptr, nullptr};
    if (precision.kind == GemmPrecision::Kind::fp8 && precision.delayed_scaling) {
      c.delayed_a = &delayed_->operand(layer, kind, 'a', precision);
      c.delayed_b = &delayed_->operand(layer, kind, 'b', precision);
    }
    return c;
  }
  static std::string name(int l, const char* kind) { return "L" + std::to_string(l) + "." + kind; }

  // Computes saved tensor s of block l from `have` (its inputs) into a new tensor of `cat`.
  // Used alike by forward and by recompute, so a recomputed tensor is the same computation.
  // Under flash, producing p (the log-sum-exp) also writes o, into a tensor of `o_cat` that the
  // next call, for o, returns: the two come from one op (layer_graph.hpp).
  Tensor<Real> produce(int l, Saved s, const std::array<const Tensor<Real>*, kSavedCount>& have, MemoryCategory cat,
                       MemoryCategory o_cat) {
    const LayerWeights<Real>& w = w_.layers[static_cast<std::size_t>(l)];
    const auto in = [&](Saved x) -> const Tensor<Real>& { return *have[static_cast<std::size_t>(x)]; };
    if (flash() && s == Saved::o) {
      if (flash_o_.rows == 0) throw std::logic_error("flash attention: o asked for before the op that writes it");
      Tensor<Real> o = std::move(flash_o_);
      flash_o_ = Tensor<Real>();
      return o;
    }
    const Shape shape = saved_shape(s, c_, T_, in_.attention);
    Tensor<Real> out = make(in(Saved::x_in).rows == T_ ? shape.rows : in(Saved::x_in).rows, shape.cols, cat);
    switch (s) {
      case Saved::a:
        if (compute()) rmsnorm_forward(in(Saved::x_in), w.rms_att, out);
        break;
      case Saved::q:
      case Saved::k: {
        fprop(call(name(l, s == Saved::q ? "wq" : "wk"), GemmKind::fprop), in(Saved::a), s == Saved::q ? w.wq : w.wk, out);
        if (compute()) rope_inplace(out, c_.head_size(), 1.0);
        break;
      }
      case Saved::v: fprop(call(name(l, "wv"), GemmKind::fprop), in(Saved::a), w.wv, out); break;
      case Saved::p:
        if (flash()) {
          flash_o_ = make(Saved::o, o_cat);
          Tensor<Real> tiles = make(c_.heads, flash_forward_lane_elements(c_.head_size()), MemoryCategory::workspace);
          if (compute())
            flash_attention_forward(in(Saved::q), in(Saved::k), in(Saved::v), c_.heads, c_.kv_heads, flash_o_, out, tiles);
        } else if (compute()) {
          attention_scores(in(Saved::q), in(Saved::k), c_.heads, c_.kv_heads, out);
        }
        break;
      case Saved::o:
        if (compute()) attention_output(in(Saved::p), in(Saved::v), c_.heads, c_.kv_heads, out);
        break;
      case Saved::x_mid:
        fprop(call(name(l, "wo"), GemmKind::fprop), in(Saved::o), w.wo, out);
        if (compute()) add_inplace(out, in(Saved::x_in));
        break;
      case Saved::b:
        if (compute()) rmsnorm_forward(in(Saved::x_mid), w.rms_ffn, out);
        break;
      case Saved::h1: fprop(call(name(l, "w1"), GemmKind::fprop), in(Saved::b), w.w1, out); break;
      case Saved::h3: fprop(call(name(l, "w3"), GemmKind::fprop), in(Saved::b), w.w3, out); break;
      case Saved::g:
        if (compute()) swiglu_forward(in(Saved::h1), in(Saved::h3), out);
        break;
      case Saved::x_in: throw std::logic_error("x_in has no producer");
    }
    return out;
  }

  // The forward of every block and the head; returns dLoss/dlogits (workspace).
  Tensor<Real> forward(StepReport& r) {
    saved_.resize(static_cast<std::size_t>(c_.layers));
    Tensor<Real> x = make(T_, c_.dim, MemoryCategory::saved_activations);
    if (compute())
      for (std::int64_t t = 0; t < T_; ++t)
        std::memcpy(x.row(t), w_.embedding.row(in_.tokens[static_cast<std::size_t>(t)]), sizeof(Real) * static_cast<std::size_t>(c_.dim));
    std::size_t saved_before = ledger_.live(MemoryCategory::saved_activations) - x.buffer.bytes();
    for (int l = 0; l < c_.layers; ++l) {
      ledger_.begin_phase("forward/L" + std::to_string(l));
      const BlockPlan& plan = policy_.blocks[static_cast<std::size_t>(l)];
      auto& slots = saved_[static_cast<std::size_t>(l)];
      std::array<Tensor<Real>, kSavedCount> out;
      out[0] = std::move(x);
      std::array<const Tensor<Real>*, kSavedCount> have{};
      have[0] = &out[0];
      for (int s = 1; s < kSavedCount; ++s) {
        const auto saved = static_cast<Saved>(s);
        const auto category = [&](Saved t) {
          return plan[t] == Keep::keep ? MemoryCategory::saved_activations : MemoryCategory::workspace;
        };
        out[static_cast<std::size_t>(s)] = produce(l, saved, have, category(saved), category(Saved::o));
        have[static_cast<std::size_t>(s)] = &out[static_cast<std::size_t>(s)];
      }
      // x_out = x_mid + g W2^T: the next block's input, saved.
      x = make(T_, c_.dim, MemoryCategory::saved_activations);
      fprop(call(name(l, "w2"), GemmKind::fprop), out[static_cast<std::size_t>(Saved::g)], w_.layers[static_cast<std::size_t>(l)].w2, x);
      if (compute()) add_inplace(x, out[static_cast<std::size_t>(Saved::x_mid)]);
      for (int s = 0; s < kSavedCount; ++s) {
        const auto fp8_count = kept_bytes(static_cast<Saved>(s), Keep::fp8, c_, T_, eb_, in_.attention);
        slots[static_cast<std::size_t>(s)].store(plan.saved[static_cast<std::size_t>(s)], out[static_cast<std::size_t>(s)],
                                                 ledger_, static_cast<std::size_t>(fp8_count));
      }
      const std::size_t now = ledger_.live(MemoryCategory::saved_activations) - x.buffer.bytes();
      r.saved_bytes_per_block.push_back(now - saved_before);
      saved_before = now;
    }
    ledger_.begin_phase("forward/head");
    x_last_ = std::move(x);
    final_norm_ = make(T_, c_.dim, MemoryCategory::saved_activations);
    if (compute()) rmsnorm_forward(x_last_, w_.rms_final, final_norm_);
    r.saved_activation_bytes = ledger_.live(MemoryCategory::saved_activations);
    Tensor<Real> logits = make(T_, c_.vocab, MemoryCategory::workspace);
    fprop(call("classifier", GemmKind::fprop), final_norm_, w_.embedding, logits);
    r.loss = compute() ? cross_entropy_inplace(logits, in_.tokens.data()) : std::numeric_limits<double>::quiet_NaN();
    return logits;
  }

  // What backward of block l reads: kept tensors in place, FP8 ones dequantized and the
  // dropped ones recomputed (both in recompute_workspace). With slices, the MLP tensors are
  // left to the sliced pass.
  std::array<Tensor<Real>, kSavedCount> materialize(int l, std::array<const Tensor<Real>*, kSavedCount>& have,
                                                    StepReport& r) {
    const auto start = Clock::now();
    auto& slots = saved_[static_cast<std::size_t>(l)];
    std::array<Tensor<Real>, kSavedCount> made;
    for (int s = 0; s < kSavedCount; ++s) {
      SavedSlot<Real>& slot = slots[static_cast<std::size_t>(s)];
      if (slot.keep == Keep::keep) have[static_cast<std::size_t>(s)] = &slot.value;
      if (slot.keep == Keep::fp8) {
        made[static_cast<std::size_t>(s)] = make(static_cast<Saved>(s), MemoryCategory::recompute_workspace);
        slot.load_fp8(made[static_cast<std::size_t>(s)]);
        have[static_cast<std::size_t>(s)] = &made[static_cast<std::size_t>(s)];
      }
    }
    const auto needed = recompute_closure(policy_.blocks[static_cast<std::size_t>(l)], in_.attention);
    for (int s = 1; s < kSavedCount; ++s) {
      const auto saved = static_cast<Saved>(s);
      if (!needed[static_cast<std::size_t>(s)] || (policy_.slices > 0 && is_mlp(saved))) continue;
      Tensor<Real> value = produce(l, saved, have, MemoryCategory::recompute_workspace, MemoryCategory::recompute_workspace);
      // Only flash's p and o can be needed while stored (the op writes both): backward reads what was stored.
      if (have[static_cast<std::size_t>(s)]) continue;
      made[static_cast<std::size_t>(s)] = std::move(value);
      have[static_cast<std::size_t>(s)] = &made[static_cast<std::size_t>(s)];
    }
    r.recompute_seconds += seconds_since(start);
    return made;
  }
  static bool is_mlp(Saved s) { return s == Saved::b || s == Saved::h1 || s == Saved::h3 || s == Saved::g; }

  // MLP backward, one slice of positions at a time (one slice of T when not slicing):
  // returns dLoss/dx_mid. Row-independent ops and Wgrads accumulated slice after slice.
  Tensor<Real> mlp_backward(int l, const Tensor<Real>& dx, std::array<const Tensor<Real>*, kSavedCount>& have,
                            StepReport& r) {
    const LayerWeights<Real>& w = w_.layers[static_cast<std::size_t>(l)];
    LayerWeights<Real>& gw = grad_.layers[static_cast<std::size_t>(l)];
    const int slices = std::max(1, policy_.slices);
    const std::int64_t rows = T_ / slices;
    Tensor<Real> dx_mid = make(T_, c_.dim, MemoryCategory::workspace);
    const auto at = [&](Saved s) -> const Tensor<Real>& { return *have[static_cast<std::size_t>(s)]; };
    for (int sl = 0; sl < slices; ++sl) {
      const std::int64_t r0 = sl * rows, r1 = r0 + rows;
      std::array<Tensor<Real>, kSavedCount> part;
      std::array<const Tensor<Real>*, kSavedCount> slice_have{};
      part[static_cast<std::size_t>(Saved::x_in)] = row_view(at(Saved::x_in), r0, r1);
      part[static_cast<std::size_t>(Saved::x_mid)] = row_view(at(Saved::x_mid), r0, r1);
      slice_have[static_cast<std::size_t>(Saved::x_in)] = &part[static_cast<std::size_t>(Saved::x_in)];
      slice_have[static_cast<std::size_t>(Saved::x_mid)] = &part[static_cast<std::size_t>(Saved::x_mid)];
      for (Saved s : {Saved::b, Saved::h1, Saved::h3, Saved::g}) {
        if (policy_.slices > 0) {
          const auto start = Clock::now();
          part[static_cast<std::size_t>(s)] =
              produce(l, s, slice_have, MemoryCategory::recompute_workspace, MemoryCategory::recompute_workspace);
          r.recompute_seconds += seconds_since(start);
        } else {
          part[static_cast<std::size_t>(s)] = row_view(at(s), r0, r1);
        }
        slice_have[static_cast<std::size_t>(s)] = &part[static_cast<std::size_t>(s)];
      }
      const Tensor<Real> dxs = row_view(dx, r0, r1);
      Tensor<Real> dxm = row_view(dx_mid, r0, r1);
      const bool acc = sl > 0;
      const Tensor<Real>& b = part[static_cast<std::size_t>(Saved::b)];
      Tensor<Real> dg = make(rows, c_.hidden, MemoryCategory::workspace);
      dgrad(call(name(l, "w2"), GemmKind::dgrad), dxs, w.w2, dg);
      wgrad(call(name(l, "w2"), GemmKind::wgrad), dxs, part[static_cast<std::size_t>(Saved::g)], gw.w2, acc, 0, rows);
      Tensor<Real> dh1 = make(rows, c_.hidden, MemoryCategory::workspace), dh3 = make(rows, c_.hidden, MemoryCategory::workspace);
      if (compute()) swiglu_backward(part[static_cast<std::size_t>(Saved::h1)], part[static_cast<std::size_t>(Saved::h3)], dg, dh1, dh3);
      dg = Tensor<Real>();
      wgrad(call(name(l, "w1"), GemmKind::wgrad), dh1, b, gw.w1, acc, 0, rows);
      wgrad(call(name(l, "w3"), GemmKind::wgrad), dh3, b, gw.w3, acc, 0, rows);
      Tensor<Real> db = make(rows, c_.dim, MemoryCategory::workspace);
      {
        Tensor<Real> db3 = make(rows, c_.dim, MemoryCategory::workspace);
        dgrad(call(name(l, "w1"), GemmKind::dgrad), dh1, w.w1, db);
        dgrad(call(name(l, "w3"), GemmKind::dgrad), dh3, w.w3, db3);
        if (compute()) add_inplace(db, db3);
      }
      dh1 = Tensor<Real>();
      dh3 = Tensor<Real>();
      if (compute()) {
        rmsnorm_backward(part[static_cast<std::size_t>(Saved::x_mid)], w.rms_ffn, db, dxm, gw.rms_ffn);
        add_inplace(dxm, dxs);
      }
    }
    return dx_mid;
  }

  Tensor<Real> attention_block_backward(int l, const Tensor<Real>& dx_mid, std::array<const Tensor<Real>*, kSavedCount>& have) {
    const LayerWeights<Real>& w = w_.layers[static_cast<std::size_t>(l)];
    LayerWeights<Real>& gw = grad_.layers[static_cast<std::size_t>(l)];
    const auto at = [&](Saved s) -> const Tensor<Real>& { return *have[static_cast<std::size_t>(s)]; };
    Tensor<Real> d_o = make(T_, c_.dim, MemoryCategory::workspace);
    dgrad(call(name(l, "wo"), GemmKind::dgrad), dx_mid, w.wo, d_o);
    wgrad(call(name(l, "wo"), GemmKind::wgrad), dx_mid, at(Saved::o), gw.wo, false, 0, T_);
    Tensor<Real> dq = make(T_, c_.dim, MemoryCategory::workspace), dk = make(T_, c_.kv_dim(), MemoryCategory::workspace),
                 dv = make(T_, c_.kv_dim(), MemoryCategory::workspace);
    if (flash()) {  // D = rowsum(dO o) per head and the kv-head lanes' tiles: workspace of the op
      Tensor<Real> delta = make(c_.heads, T_, MemoryCategory::workspace);
      Tensor<Real> tiles = make(c_.kv_heads, flash_backward_lane_elements(c_.head_size()), MemoryCategory::workspace);
      if (compute())
        flash_attention_backward(at(Saved::q), at(Saved::k), at(Saved::v), at(Saved::o), at(Saved::p), d_o, c_.heads,
                                 c_.kv_heads, dq, dk, dv, delta, tiles);
    } else if (compute()) {
      attention_backward(at(Saved::p), at(Saved::q), at(Saved::k), at(Saved::v), d_o, c_.heads, c_.kv_heads, dq, dk, dv);
    }
    if (compute()) {
      rope_inplace(dq, c_.head_size(), -1.0);  // rotations are orthogonal: the gradient rotates back
      rope_inplace(dk, c_.head_size(), -1.0);
    }
    d_o = Tensor<Real>();
    const Tensor<Real>& a = at(Saved::a);
    wgrad(call(name(l, "wq"), GemmKind::wgrad), dq, a, gw.wq, false, 0, T_);
    wgrad(call(name(l, "wk"), GemmKind::wgrad), dk, a, gw.wk, false, 0, T_);
    wgrad(call(name(l, "wv"), GemmKind::wgrad), dv, a, gw.wv, false, 0, T_);
    Tensor<Real> da = make(T_, c_.dim, MemoryCategory::workspace);
    {
      Tensor<Real> part = make(T_, c_.dim, MemoryCategory::workspace);
      dgrad(call(name(l, "wq"), GemmKind::dgrad), dq, w.wq, da);
      dgrad(call(name(l, "wk"), GemmKind::dgrad), dk, w.wk, part);
      if (compute()) add_inplace(da, part);
      dgrad(call(name(l, "wv"), GemmKind::dgrad), dv, w.wv, part);
      if (compute()) add_inplace(da, part);
    }
    dq = Tensor<Real>();
    dk = Tensor<Real>();
    dv = Tensor<Real>();
    Tensor<Real> dx = make(T_, c_.dim, MemoryCategory::workspace);
    if (compute()) {
      rmsnorm_backward(at(Saved::x_in), w.rms_att, da, dx, gw.rms_att);
      add_inplace(dx, dx_mid);
    }
    return dx;
  }

  void backward(Tensor<Real> dlogits, StepReport& r) {
    ledger_.begin_phase("backward/head");
    grad_dx_ = make(T_, c_.dim, MemoryCategory::workspace);
    {
      wgrad(call("classifier", GemmKind::wgrad), dlogits, final_norm_, grad_.embedding, false, 0, T_);
      Tensor<Real> dnorm = make(T_, c_.dim, MemoryCategory::workspace);
      dgrad(call("classifier", GemmKind::dgrad), dlogits, w_.embedding, dnorm);
      dlogits = Tensor<Real>();
      if (compute()) rmsnorm_backward(x_last_, w_.rms_final, dnorm, grad_dx_, grad_.rms_final);
    }
    final_norm_ = Tensor<Real>();
    x_last_ = Tensor<Real>();
    for (int l = c_.layers - 1; l >= 0; --l) {
      ledger_.begin_phase("backward/L" + std::to_string(l));
      std::array<const Tensor<Real>*, kSavedCount> have{};
      std::array<Tensor<Real>, kSavedCount> made = materialize(l, have, r);
      Tensor<Real> dx_mid = mlp_backward(l, grad_dx_, have, r);
      grad_dx_ = Tensor<Real>();
      grad_dx_ = attention_block_backward(l, dx_mid, have);
      made = {};
      saved_[static_cast<std::size_t>(l)] = {};
    }
    if (compute()) embedding_backward(grad_dx_, in_.tokens.data(), grad_.embedding);
    grad_dx_ = Tensor<Real>();
  }

  void report_plan(StepReport& r) const {
    const PlanFigures f = plan_figures(policy_, c_, T_, eb_);
    r.activation_bytes_not_kept_fraction = f.activation_bytes_not_kept_fraction;
    r.recompute_flops = f.recompute_flops;
    r.layers_recomputed_fraction = f.layers_recomputed_fraction;
    r.layers_fully_recomputed_fraction = f.layers_fully_recomputed_fraction;
    const auto T = static_cast<double>(T_);
    r.step_flops = flops::step_without_recompute(c_, T, in_.attention);
    r.attention_recompute_flops = c_.layers * flops::attention_backward_recompute(c_, T, in_.attention);
    r.recompute_flops_fraction = r.recompute_flops / r.step_flops;
  }

  const StepInput& in_;
  const PrecisionRecipe& recipe_;
  const ActivationPolicy& policy_;
  MemoryLedger& ledger_;
  ModelConfig c_;
  int eb_;
  std::int64_t T_;
  ModelWeights<Real> w_, grad_;
  std::vector<std::array<SavedSlot<Real>, kSavedCount>> saved_;
  DelayedOperandScales first_step_scales_;  // a step without a run's scales is its first
  DelayedOperandScales* delayed_ = in_.delayed_scales ? in_.delayed_scales : &first_step_scales_;
  Tensor<Real> x_last_, final_norm_, grad_dx_;
  Tensor<Real> flash_o_;  // flash forward's o, between producing p and handing o over

};

}  // namespace

StepResult run_training_step(const StepInput& input, const PrecisionRecipe& recipe, const ActivationPolicy& policy,
                             MemoryLedger& ledger) {
  check_step_input(input, recipe, policy, ledger.shapes_only());
  if (recipe.fp64()) return Step<double>(input, recipe, policy, ledger).run();
  return Step<float>(input, recipe, policy, ledger).run();
}

}  // namespace fp8lab::train
