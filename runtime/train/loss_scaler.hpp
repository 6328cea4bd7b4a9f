#pragma once
// Dynamic loss scaling for fp16 training: a pure state machine fed one bit per optimizer step.
#include <cstdint>

#include "runtime/config/config.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::train {

// Dynamic loss scaling (Micikevicius et al. 2018, "Mixed Precision Training", section 3.2):
// the loss is multiplied by scale() before the backward pass so that small fp16 gradients do not
// flush to zero; gradients are divided by it before the optimizer. The scale follows
// torch.cuda.amp.GradScaler.update (torch/cuda/amp/grad_scaler.py, _amp_update_scale_) with
// Megatron-LM's hysteresis (megatron/optimizer/grad_scaler.py, DynamicGradScaler):
//   overflow:  skipped_steps += 1, growth tracker = 0; once `hysteresis` consecutive steps
//              have overflowed, scale = max(scale * backoff_factor, min_loss_scale)
//              (and again at each further consecutive overflow);
//   clean:     growth tracker += 1; at growth_interval, scale *= growth_factor unless that is
//              not finite as a float (then it stays), and the tracker resets to 0.
// Enabled only for fp16: bf16 and fp32 have float's exponent range and need no scaling; a
// disabled scaler keeps scale 1 but still counts skipped steps and applies the limit.
// Note [One rule for steps that cannot be taken]
// A step whose gradients hold inf or NaN on any rank is skipped on every rank, in every
// precision (train_step): parameters, moments and the step count stay as they were, and the
// skip is counted (skipped_steps). In fp16 a skip is also the scaler's signal to lower the
// scale, which fixes overflow; in fp32 and bf16 there is nothing to lower. One counter,
// consecutive_overflows_at_min, counts the skips nothing could fix (fp16: at min_loss_scale;
// fp32/bf16: every one), and one limit, precision.loss_scale.max_skipped_steps_at_min (which
// health.max_consecutive_skips replaces when set), ends them: update throws NonFiniteStreak,
// and the trainer rolls back to the last checkpoint (up to health.max_rollbacks times) or,
// without one, stops with exit 1. A transient NaN (one bad batch, a flipped bit in a gradient)
// costs one step; a persistent one costs the steps since the last checkpoint.

// Too many consecutive steps skipped for inf/NaN gradients (Note [One rule for steps that
// cannot be taken]).
class NonFiniteStreak : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

class LossScaler {
 public:
  // Everything needed to resume exactly (saved in checkpoints).
  struct State {
    double scale = 1.0;
    int growth_tracker = 0;                // clean steps since the last growth or overflow
    int consecutive_overflows = 0;         // the hysteresis counter
    std::int64_t skipped_steps = 0;        // all overflowing steps of the run
    int consecutive_overflows_at_min = 0;  // toward max_skipped_steps_at_min
    bool operator==(const State&) const = default;
  };

  // Throws memtrain::ConfigError naming the key when `config` is invalid (see validate), even
  // when disabled. A disabled scaler has scale 1.
  LossScaler(const LossScaleConfig& config, bool enabled);

  // Checks precision.loss_scale.*: initial_scale finite and > 0, growth_factor > 1 and finite,
  // 0 < backoff_factor < 1, growth_interval >= 1, hysteresis >= 1,
  // 0 < min_loss_scale <= initial_scale, max_skipped_steps_at_min >= 1. Throws
  // memtrain::ConfigError, e.g. "precision.loss_scale.growth_factor must be > 1, got 0.5".
  static void validate(const LossScaleConfig& config);

  bool enabled() const { return enabled_; }
  // The settings it was built with (max_skipped_steps_at_min included).
  const LossScaleConfig& config() const { return config_; }
  // The factor the loss is multiplied by (dimensionless); 1.0 when disabled.
  double scale() const { return state_.scale; }

  // Called once per optimizer step with whether ANY gradient on ANY rank was inf or NaN (the
  // caller reduces the flag over all ranks first, so that every rank takes the same decision).
  // Returns true when the step must be skipped (the optimizer must not run): exactly when
  // found_non_finite. Throws NonFiniteStreak when max_skipped_steps_at_min consecutive steps
  // overflow with nothing to adjust (fp16: at min_loss_scale; disabled: any).
  bool update(bool found_non_finite);

  std::int64_t skipped_steps() const { return state_.skipped_steps; }
  int growth_tracker() const { return state_.growth_tracker; }

  State state() const { return state_; }
  // Restores a saved state. Throws memtrain::ConfigError when a field is out of range (a
  // corrupted or foreign checkpoint), naming the field. A disabled scaler validates the state
  // but keeps scale 1 (an fp16 checkpoint resumed in bf16 must not scale).
  void load(const State& state);

 private:
  LossScaleConfig config_;
  bool enabled_;
  State state_;
};

}  // namespace memtrain::train
