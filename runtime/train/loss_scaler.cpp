#include "runtime/train/loss_scaler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "runtime/core/errors.hpp"

namespace memtrain::train {
namespace {

template <class T>
std::string str(T v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

void require(bool ok, const char* key, const char* expected, const std::string& got) {
  if (!ok) {
    throw ConfigError(std::string("precision.loss_scale.") + key + " must be " + expected + ", got " + got);
  }
}

void require_state(bool ok, const char* field, const char* expected, const std::string& got) {
  if (!ok) {
    throw ConfigError(std::string("loss scaler state: ") + field + " must be " + expected + ", got " + got +
                      " (corrupted checkpoint, or one from another config)");
  }
}

// Note [Growth stops where float would overflow]
// The scale multiplies an fp32 loss and divides fp32 gradients, so a scale past FLT_MAX would
// make every step overflow. PyTorch keeps the scale in a float32 tensor and refuses a growth
// whose result is not finite in float; the same test here makes the scale saturate at the
// largest reachable value below FLT_MAX (2^127 from the default 2^16 with factor 2).
bool finite_as_float(double x) { return x <= std::numeric_limits<float>::max(); }

}  // namespace

void LossScaler::validate(const LossScaleConfig& c) {
  // Both scales must be normal floats: below FLT_MIN, 1 / scale overflows to inf when the
  // gradients are unscaled (the config's schema refuses such values first, with their location).
  const auto normal_float = [](double x) {
    return std::isfinite(x) && x >= std::numeric_limits<float>::min() && finite_as_float(x);
  };
  require(normal_float(c.initial_scale), "initial_scale", "a normal float (in [1.18e-38, 3.40e38])",
          str(c.initial_scale));
  require(std::isfinite(c.growth_factor) && c.growth_factor > 1, "growth_factor", "> 1", str(c.growth_factor));
  require(c.backoff_factor > 0 && c.backoff_factor < 1, "backoff_factor", "in (0, 1)", str(c.backoff_factor));
  require(c.growth_interval >= 1, "growth_interval", ">= 1", str(c.growth_interval));
  require(c.hysteresis >= 1, "hysteresis", ">= 1", str(c.hysteresis));
  require(normal_float(c.min_loss_scale), "min_loss_scale", "a normal float (in [1.18e-38, 3.40e38])",
          str(c.min_loss_scale));
  require(c.min_loss_scale <= c.initial_scale, "min_loss_scale",
          ("<= precision.loss_scale.initial_scale = " + str(c.initial_scale)).c_str(), str(c.min_loss_scale));
  require(c.max_skipped_steps_at_min >= 1, "max_skipped_steps_at_min", ">= 1", str(c.max_skipped_steps_at_min));
}

LossScaler::LossScaler(const LossScaleConfig& config, bool enabled) : config_(config), enabled_(enabled) {
  validate(config);
  if (enabled_) state_.scale = config.initial_scale;
}

// Note [Hysteresis counts consecutive overflows]
// Megatron-LM backs off only after `hysteresis` overflows, so that one spike does not halve a
// scale that is otherwise fine. Here the count is of consecutive overflowing steps (a clean
// step resets it), rather than Megatron's count since the last growth, so that rare isolated
// spikes over a long run never add up to a back-off. Once the count is reached, every further
// consecutive overflow backs off again, as in Megatron: a scale that is really too large must
// come down quickly. hysteresis = 1 is exactly PyTorch's GradScaler.
//
// Note [Giving up at the minimum scale]
// At min_loss_scale the scaler can no longer react: if the gradients still overflow, the
// cause is not the scale (a diverged model, NaN in the data, a learning rate too high), and
// skipping steps forever would burn the allocation while looking alive. After
// max_skipped_steps_at_min consecutive overflowing steps at the minimum the run stops.
bool LossScaler::update(bool found_non_finite) {
  State& s = state_;
  if (!enabled_) {
    // Note [One rule for steps that cannot be taken]: scale 1 is all there is, so every skip
    // counts toward the limit.
    if (!found_non_finite) {
      s.consecutive_overflows_at_min = 0;
      return false;
    }
    s.skipped_steps += 1;
    if (++s.consecutive_overflows_at_min >= config_.max_skipped_steps_at_min) {
      throw NonFiniteStreak("gradients were inf/NaN in " + str(s.consecutive_overflows_at_min) +
                            " consecutive steps (no loss scale to lower in this precision), so "
                            "training on would train on garbage: look for inf/NaN in the inputs or a "
                            "diverged loss, or lower training.lr; health.max_consecutive_skips sets "
                            "this limit");
    }
    return true;
  }
  if (!found_non_finite) {
    s.consecutive_overflows = 0;
    s.consecutive_overflows_at_min = 0;
    if (++s.growth_tracker >= config_.growth_interval) {
      const double grown = s.scale * config_.growth_factor;
      if (finite_as_float(grown)) s.scale = grown;
      s.growth_tracker = 0;
    }
    return false;
  }
  s.skipped_steps += 1;
  s.growth_tracker = 0;
  if (s.scale <= config_.min_loss_scale) {
    if (++s.consecutive_overflows_at_min >= config_.max_skipped_steps_at_min) {
      throw NonFiniteStreak("fp16 gradients overflowed " + str(s.consecutive_overflows_at_min) +
                            " consecutive steps at the minimum loss scale " + str(config_.min_loss_scale) +
                            ", so training on would train on garbage: look for inf/NaN in the inputs or a "
                            "diverged loss, lower training.lr, or use precision.dtype: bf16 (float's range, no "
                            "loss scaling); precision.loss_scale.min_loss_scale and max_skipped_steps_at_min "
                            "(or health.max_consecutive_skips) set this limit");
    }
  }
  if (++s.consecutive_overflows >= config_.hysteresis) {
    s.scale = std::max(s.scale * config_.backoff_factor, config_.min_loss_scale);
  }
  return true;
}

void LossScaler::load(const State& st) {
  require_state(std::isfinite(st.scale) && st.scale > 0 && finite_as_float(st.scale), "scale",
                "finite (in float) and > 0", str(st.scale));
  require_state(st.growth_tracker >= 0 && st.growth_tracker < config_.growth_interval, "growth_tracker",
                ("in [0, precision.loss_scale.growth_interval = " + str(config_.growth_interval) + ")").c_str(),
                str(st.growth_tracker));
  require_state(st.consecutive_overflows >= 0, "consecutive_overflows", ">= 0", str(st.consecutive_overflows));
  require_state(st.skipped_steps >= 0, "skipped_steps", ">= 0", str(st.skipped_steps));
  require_state(
      st.consecutive_overflows_at_min >= 0 && st.consecutive_overflows_at_min < config_.max_skipped_steps_at_min,
      "consecutive_overflows_at_min",
      ("in [0, precision.loss_scale.max_skipped_steps_at_min = " + str(config_.max_skipped_steps_at_min) + ")").c_str(),
      str(st.consecutive_overflows_at_min));
  // A disabled scaler keeps scale 1: a fp16 checkpoint resumed in bf16 must not scale.
  state_ = st;
  if (!enabled_) {
    // Only the skip counts carry over: a disabled scaler has nothing else.
    state_.scale = 1.0;
    state_.growth_tracker = 0;
    state_.consecutive_overflows = 0;
  }
}

}  // namespace memtrain::train
