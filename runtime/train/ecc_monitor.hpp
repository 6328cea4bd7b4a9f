#pragma once
// GPU memory ECC error counts read through NVML, loaded at run time: a health check beside the
// replica comparison (docs/checkpoints.md, "Health checks").
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "comms/communicator.hpp"

namespace memtrain::train {

// Note [ECC counts through NVML, loaded at run time]
// A GPU whose memory takes an uncorrectable ECC error has lost bits the job may be using: a
// parameter, a moment, an activation that flows into the next all-reduce. The replica digest
// finds damage only in what replicas hold twice; the GPU's own counter finds it anywhere on the
// device, and earlier. So at every replica check (health.consistency_interval) each rank reads
// NVML's volatile uncorrected count of every device NVML sees, and a count that rose since
// the previous check rolls the job back by the same rule as a replica disagreement (to the
// newest checkpoint no later than the last check that passed). Corrected errors are only
// reported: ECC fixed them. NVML is dlopen()ed (libnvidia-ml.so.1, the driver's library, or
// MEMTRAIN_NVML_LIBRARY), never linked, so a binary built with CUDA starts on a machine with
// no driver; there, or with a device without ECC (NVML_ERROR_NOT_SUPPORTED), nothing is read.
// The entry points and enum values used are NVML's documented, stable ABI (nvml.h:
// nvmlInit_v2, nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2,
// nvmlDeviceGetTotalEccErrors with NVML_MEMORY_ERROR_TYPE_{CORRECTED=0,UNCORRECTED=1} and
// NVML_VOLATILE_ECC=0); the toolkit here ships no nvml.h, so they are declared in the .cpp.

struct EccCounts {
  std::uint64_t corrected = 0;
  std::uint64_t uncorrected = 0;
};

// The NVML library, open for the object's lifetime (nvmlShutdown and dlclose at the end).
class Nvml {
 public:
  // Loads `library` (a soname or a path) and calls nvmlInit_v2. Never throws: when the library
  // does not load, lacks an entry point, or NVML fails to initialise, available() is false and
  // reason() says why (dlerror() or nvmlErrorString()).
  explicit Nvml(const std::string& library);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  bool available() const { return handle_ != nullptr; }
  const std::string& reason() const { return reason_; }
  int device_count() const { return devices_; }

  // Volatile ECC counts of device `index` (0 <= index < device_count()) since the driver
  // loaded; nullopt when the device has no ECC or NVML cannot read it.
  std::optional<EccCounts> read(int index) const;

  // The library memtrain loads: $MEMTRAIN_NVML_LIBRARY when set, else "libnvidia-ml.so.1".
  static std::string default_library();

 private:
  void* handle_ = nullptr;
  std::string reason_;
  int devices_ = 0;
  struct Api;
  Api* api_ = nullptr;
};

// The counts of every ECC-capable device, remembered between checks.
class EccMonitor {
 public:
  // Reads the baseline now. A monitor over an unavailable Nvml reads nothing.
  explicit EccMonitor(const Nvml& nvml);

  // Devices with ECC counters (0 when NVML is unavailable or no device has ECC).
  int monitored_devices() const;

  // Collective over `world`: every rank reads its counts, and the ranks whose uncorrected
  // count rose since the previous check are named, the same line on every rank ("" when none
  // rose), e.g. "step 7: uncorrected ECC errors rose on world rank 1 (GPU 0: 0 -> 2)". The new
  // counts become the baseline. `since_step` is the step of the previous check, for the line.
  std::string check(comms::Communicator& world, std::int64_t step, std::int64_t since_step);

 private:
  const Nvml& nvml_;
  std::vector<std::optional<EccCounts>> last_;  // per device
};

}  // namespace memtrain::train
