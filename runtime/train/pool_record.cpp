#include "runtime/train/pool_record.hpp"

namespace memtrain::train {

PoolRecord PoolRecord::after(const PoolRecord& earlier) const {
  PoolRecord r;
  r.bitwise = bitwise && earlier.bitwise;
  r.shrinks = earlier.shrinks + shrinks;
  r.grows = earlier.grows + grows;
  r.preemptions = earlier.preemptions + preemptions;
  r.waited_s = earlier.waited_s + waited_s;
  return r;
}

nlohmann::ordered_json PoolRecord::to_json() const {
  nlohmann::ordered_json j;
  j["trajectory"] = bitwise ? "bitwise" : "within_rounding";
  j["shrinks"] = shrinks;
  j["grows"] = grows;
  j["preemptions"] = preemptions;
  j["waited_s"] = waited_s;
  return j;
}

}  // namespace memtrain::train
