// Every bad input of issue 2 ("CLI and bad input") gets one ConfigError whose message names the
// file, the line, the key, the value and what was expected. The reference for each line number is
// the YAML text the test wrote.
//
// Most cases are one row of a table (kRefused, kRefusedSet): a config's text, and what the
// message must say. The tests below the tables set up files, links, permissions or PATH first, or
// check a config that loads.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "runtime/config/config_loader.hpp"
#include "tests/config/config_test_files.hpp"

namespace memtrain::train {
namespace {

using testing::ConfigFiles;
using testing::contains;
using testing::kMinimalYaml;
using testing::load_error;

// kMinimalYaml is 7 lines; a section appended starts at line 8.
std::string with(const std::string& extra) { return std::string(kMinimalYaml) + extra; }

// One config that load_config refuses with a ConfigError (load_error fails the case on any other
// outcome). In `says`, "{path}" stands for the config file's path; in `yaml` and `says`, "{dir}"
// for its directory.
struct Refused {
  std::string name;                     // the case's test name: what is refused, and how it is said
  std::string yaml;                     // the file's text; with(...): kMinimalYaml and more
  std::vector<std::string> says;        // parts of the message, each found in it
  std::vector<std::string> set = {};    // --set arguments
  bool whole = false;                   // says[0] is the whole message
  std::vector<std::string> never = {};  // parts the message must not have
  std::string file = "c.yaml";          // the file's name
};

const std::vector<Refused> kRefused = {
    // Unknown keys and sections: where, and the closest name.
    {.name = "UnknownKeyNamesFileLineAndClosestKey",
     .yaml = with("training:\n  micro_batch_sise: 8\n"),
     .says = {"{path}:9: training.micro_batch_sise = 8: unknown key", "did you mean training.micro_batch_size?",
              "expected a key listed in docs/config.md"}},
    {.name = "AOneLetterKeyIsNoTypo",
     .yaml = with("training:\n  a: 8\n"),
     .says = {"training.a = 8: unknown key; expected a key listed in docs/config.md"},
     .never = {"did you mean"}},
    {.name = "KeyInTheWrongSectionSuggestsItsSection",
     .yaml = with("training:\n  hidden_size: 8\n"),
     .says = {"training.hidden_size = 8: unknown key (did you mean model.hidden_size?)"}},
    {.name = "RewordedKeySuggestsTheKeySharingAWord",
     .yaml = with("training:\n  lr_warmup: 8\n"),
     .says = {"training.lr_warmup = 8: unknown key (did you mean training.warmup_steps?)"}},
    {.name = "RewordedMemoryKeySuggestsTheKeySharingAWord",
     .yaml = with("memory:\n  split_size: 8\n"),
     .says = {"memory.split_size = 8: unknown key (did you mean memory.max_split_size?)"}},
    // yaml-cpp does not merge: a merge key arrives as a key named "<<", and is named as such.
    {.name = "YamlMergeKeyIsNamedAsUnsupported",
     .yaml = with("compression:\n  <<: {method: onebit}\n"),
     .says = {"{path}:9: compression.<< = {method: onebit}: a YAML merge key, which memtrain's config does not "
              "support; expected the keys written out"}},
    {.name = "NonsenseKeyGetsNoSuggestion",
     .yaml = with("training:\n  zzzzzzzzzzzzzzzzzzzz: 1\n"),
     .says = {"unknown key;"},
     .never = {"did you mean"}},
    {.name = "UnknownSectionSuggestsTheClosestSection",
     .yaml = with("trainng:\n  max_steps: 8\n"),
     .says = {"{path}:8: trainng: unknown section (did you mean training?)"}},
    {.name = "DuplicateKeyNamesBothLines",
     .yaml = with("training:\n  lr: 1e-4\n  lr: 1e-3\n"),
     .says = {"{path}:10: training.lr = 1e-3: duplicate key (first at line 9)"}},

    // Values of the wrong type or form.
    {.name = "WrongTypeNamesTheExpectedType",
     .yaml = with("training:\n  max_steps: many\n"),
     .says = {"{path}:9: training.max_steps = many: not an integer; expected an integer in [1, "}},
    {.name = "NonBooleanHugePagesNamesTheExpectedValues",
     .yaml = with("memory:\n  host_huge_pages: sometimes\n"),
     .says = {"{path}:9: memory.host_huge_pages = sometimes: "}},
    {.name = "FractionalIntegerIsRejected",
     .yaml = with("training:\n  micro_batch_size: 2.5\n"),
     .says = {"training.micro_batch_size = 2.5: not an integer"}},
    {.name = "ListWhereAScalarBelongs",
     .yaml = with("training:\n  lr: [1, 2]\n"),
     .says = {"training.lr = [1, 2]: is a list; expected a number > 0"}},
    {.name = "EmptyValue",
     .yaml = with("training:\n  lr:\n"),
     .says = {"{path}:9: training.lr = (empty): has no value"}},
    {.name = "BooleanMustBeTrueOrFalse",
     .yaml = with("memory:\n  trace: maybe\n"),
     .says = {"memory.trace = maybe: not a boolean; expected true or false"}},
    {.name = "UnknownChoiceListsTheChoices",
     .yaml = with("training:\n  lr_schedule: exponential\n"),
     .says = {"training.lr_schedule = exponential: unknown value; expected one of cosine, linear, constant"}},
    {.name = "NotANumberIsRejected", .yaml = with("training:\n  lr: nan\n"), .says = {"training.lr = nan: not"}},

    // Ranges.
    {.name = "ProbabilityOutOfRange",
     .yaml = "model:\n  hidden_dropout_prob: 1.5\ndata:\n  mock: true\n",
     .says = {"{path}:2: model.hidden_dropout_prob = 1.5: out of range; expected a number in [0, 1)"}},
    {.name = "NegativeLearningRate",
     .yaml = with("training:\n  lr: -1e-3\n"),
     .says = {"training.lr = -1e-3: out of range; expected a number > 0"}},
    {.name = "ZeroMicroBatchSize",
     .yaml = with("training:\n  micro_batch_size: 0\n"),
     .says = {"training.micro_batch_size = 0: out of range; expected an integer in [1, "}},
    {.name = "ZeroGlobalBatchSize",
     .yaml = with("training:\n  global_batch_size: 0\n"),
     .says = {"training.global_batch_size = 0: out of range"}},
    // The evaluator runs at least one batch, so 0 would silently mean 1.
    {.name = "EvalStepsZeroIsOutOfRange",
     .yaml = with("training:\n  eval_steps: 0\n"),
     .says = {"{path}:9: training.eval_steps = 0: out of range; expected an integer in [1, 1000000000]"},
     .whole = true},
    {.name = "MinLrAboveLr",
     .yaml = with("training:\n  lr: 1e-4\n  min_lr: 1e-3\n"),
     .says = {"training.min_lr = 0.001: above training.lr = 0.0001"}},

    // A float key holds what its text rounds to in single precision; a value that would round
    // out of the key's range (to 0, to inf, onto an open bound) is refused with the value as
    // written.
    {.name = "FloatKeyThatRoundsToZeroIsTooSmall",
     .yaml = "model:\n  layer_norm_eps: 1e-50\ndata:\n  mock: true\n",
     .says = {"model.layer_norm_eps = 1e-50: too small for single precision (it would be stored as 0, not as the "
              "value written); expected a number in (0, 1)"}},
    {.name = "FloatDataKeyThatRoundsToZeroIsTooSmall",
     .yaml = "data:\n  mock: true\n  mlm_probability: 1e-50\n",
     .says = {"data.mlm_probability = 1e-50: too small for single precision (it would be stored as 0"}},
    {.name = "FloatKeyThatRoundsOntoItsOpenBoundIsOutOfRange",
     .yaml = "model:\n  layer_norm_eps: 0.999999999\ndata:\n  mock: true\n",
     .says = {"model.layer_norm_eps = 0.999999999: out of range in single precision (it would be stored as 1)"}},
    // AdamW's kernels take lr, the betas, eps and weight decay as float (kernels/cpu/adamw.hpp):
    // a beta of 0.99999999 reached them as 1 and the run trained to NaN with exit 0; the value
    // the kernel would see must keep the key's range, while the config keeps the double.
    {.name = "AdamBeta1ThatRoundsToOneIsOutOfRange",
     .yaml = with("training:\n  adam_beta1: 0.99999999\n"),
     .says = {"training.adam_beta1 = 0.99999999: out of range in single precision (it would be stored as 1); "
              "expected a number in [0, 1)"}},
    {.name = "AdamBeta2ThatRoundsToOneIsOutOfRange",
     .yaml = with("training:\n  adam_beta2: 0.99999999\n"),
     .says = {"training.adam_beta2 = 0.99999999: out of range in single precision (it would be stored as 1); "
              "expected a number in [0, 1)"}},
    {.name = "AdamEpsThatRoundsToZeroIsTooSmall",
     .yaml = with("training:\n  adam_eps: 1e-46\n"),
     .says = {"training.adam_eps = 1e-46: too small for single precision (it would be stored as 0"}},
    {.name = "LrThatRoundsToZeroIsTooSmall",
     .yaml = with("training:\n  lr: 1e-50\n"),
     .says = {"training.lr = 1e-50: too small for single precision"}},
    {.name = "WeightDecayThatRoundsToZeroIsTooSmall",
     .yaml = with("training:\n  weight_decay: 1e-50\n"),
     .says = {"training.weight_decay = 1e-50: too small for single precision (it would be stored as 0, not as the "
              "value written); expected a number >= 0"}},

    // Rules between keys name both keys and both lines.
    {.name = "HeadsThatDoNotDivideHiddenSizeNameBothKeysAndLines",
     .yaml = "model:\n  hidden_size: 100\n  num_attention_heads: 3\ndata:\n  mock: true\n",
     .says = {"{path}:3: model.num_attention_heads = 3: does not divide model.hidden_size = 100 ({path}:2); "
              "expected a divisor of 100"}},
    {.name = "SeqLengthAboveMaxPositionEmbeddings",
     .yaml = "model:\n  max_position_embeddings: 512\ndata:\n  mock: true\n  seq_length: 1024\n",
     .says = {"{path}:5: data.seq_length = 1024: exceeds model.max_position_embeddings = 512 ({path}:2); expected "
              "at most 512"}},
    {.name = "GlobalBatchNotAMultipleOfMicroBatch",
     .yaml = with("training:\n  micro_batch_size: 4\n  global_batch_size: 10\n"),
     .says = {"{path}:10: training.global_batch_size = 10: not a multiple of training.micro_batch_size = 4 "
              "({path}:9); expected a multiple of 4"}},

    // Tensor parallelism splits heads and intermediate features: a size that does not split is
    // refused at load time, naming the key set last and where.
    {.name = "TensorParallelSizeThatDoesNotSplitHeads",
     .yaml = "parallel:\n  tensor_model_parallel_size: 5\ndata:\n  mock: true\n",
     .says = {"{path}:2: parallel.tensor_model_parallel_size = 5: does not divide model.num_attention_heads = 12 "
              "(default); expected a divisor of 12"}},
    {.name = "TensorParallelSizeThatDoesNotSplitMlp",
     .yaml = "parallel:\n  tensor_model_parallel_size: 4\nmodel:\n  intermediate_size: 1026\ndata:\n  mock: true\n",
     .says = {"{path}:4: model.intermediate_size = 1026: not divisible by parallel.tensor_model_parallel_size = 4 "
              "({path}:2); expected a multiple of 4"}},
    // Sequence parallelism needs a tensor-parallel group and lengths that split evenly.
    {.name = "SequenceParallelWithoutTensorParallel",
     .yaml = "parallel:\n  sequence_parallel: true\ndata:\n  mock: true\n",
     .says = {"{path}:2: parallel.sequence_parallel = true: means nothing with parallel.tensor_model_parallel_size "
              "= 1"}},
    {.name = "SequenceParallelWithUnevenSeqLength",
     .yaml = "parallel:\n  tensor_model_parallel_size: 4\n  sequence_parallel: true\ndata:\n  mock: true\n  "
             "seq_length: 126\n",
     .says = {"{path}:6: data.seq_length = 126: not divisible by parallel.tensor_model_parallel_size = 4"}},
    {.name = "SequenceParallelWithDynamicSeqLength",
     .yaml = "parallel:\n  tensor_model_parallel_size: 2\n  sequence_parallel: true\ndata:\n  mock: true\n  "
             "dynamic_seq_length: true\n",
     .says = {"{path}:6: data.dynamic_seq_length = true: is set with parallel.sequence_parallel = true ({path}:3)"}},

    // ZeRO stages 2 and 3 are refused as not supported; bucket sizes must be positive.
    {.name = "ZeroStageTwoIsNotSupported",
     .yaml = "data:\n  mock: true\nparallel:\n  zero_stage: 2\n",
     .says = {"{path}:4: parallel.zero_stage = 2: ZeRO stage 2 is not supported"}},
    {.name = "ZeroStageThreeIsNotSupported",
     .yaml = "data:\n  mock: true\nparallel:\n  zero_stage: 3\n",
     .says = {"{path}:4: parallel.zero_stage = 3: ZeRO stage 3 is not supported"}},
    {.name = "ZeroStageFourIsNoStage",
     .yaml = "data:\n  mock: true\nparallel:\n  zero_stage: 4\n",
     .says = {"parallel.zero_stage = 4", "0 or 1"}},
    {.name = "EmptyBucket",
     .yaml = "data:\n  mock: true\nparallel:\n  bucket_size_mb: 0\n",
     .says = {"{path}:4: parallel.bucket_size_mb = 0", "a number of MiB in (0, 1048576]"}},
    {.name = "NonBooleanOverlapGradReduce",
     .yaml = "data:\n  mock: true\nparallel:\n  overlap_grad_reduce: maybe\n",
     .says = {"{path}:4: parallel.overlap_grad_reduce = maybe"}},

    // PowerSGD: ZeRO-1 refused with the reason, bad option values named with their line.
    {.name = "CompressionNeedsZeroStageZero",
     .yaml = "data:\n  mock: true\nparallel:\n  zero_stage: 1\ncompression:\n  method: powersgd\n",
     .says = {"{path}:6: compression.method = powersgd: gradient compression needs ZeRO stage 0, and "
              "parallel.zero_stage = 1 ({path}:4)"}},
    {.name = "PowerSgdRankZero",
     .yaml = "data:\n  mock: true\ncompression:\n  method: powersgd\n  rank: 0\n",
     .says = {"{path}:5: compression.rank = 0"}},
    {.name = "PowerSgdNegativeMinCompressionRate",
     .yaml = "data:\n  mock: true\ncompression:\n  method: powersgd\n  min_compression_rate: -1\n",
     .says = {"{path}:5: compression.min_compression_rate = -1"}},
    // 1-bit Adam compresses the momentum: a gradient compressor beside it, 16-bit, ZeRO-1 and
    // tensor parallelism are refused; freeze_step with a gradient compressor is refused too.
    {.name = "OneBitAdamWithAGradientCompressor",
     .yaml = "data:\n  mock: true\ntraining:\n  optimizer: onebit_adam\ncompression:\n  method: onebit\n",
     .says = {"{path}:6: compression.method = onebit: compresses the gradients, and training.optimizer = "
              "onebit_adam ({path}:4) compresses the momentum"}},
    {.name = "OneBitAdamWithBf16",
     .yaml = "data:\n  mock: true\ntraining:\n  optimizer: onebit_adam\nprecision:\n  dtype: bf16\n",
     .says = {"{path}:4: training.optimizer = onebit_adam: not supported yet with precision.dtype = bf16"}},
    {.name = "OneBitAdamWithZeroStageOne",
     .yaml = "data:\n  mock: true\ntraining:\n  optimizer: onebit_adam\nparallel:\n  zero_stage: 1\n",
     .says = {"{path}:4: training.optimizer = onebit_adam: needs ZeRO stage 0, and parallel.zero_stage = 1 "
              "({path}:6) shards the optimizer state"}},
    {.name = "FreezeStepWithoutOneBitAdam",
     .yaml = "data:\n  mock: true\ncompression:\n  method: powersgd\n  freeze_step: 5\n",
     .says = {"{path}:5: compression.freeze_step = 5: is an option of training.optimizer = onebit_adam, which "
              "training.optimizer = adamw (default) does not use; expected no compression.freeze_step with "
              "compression.method = powersgd, or training.optimizer = onebit_adam with compression.method = none"}},
    {.name = "OneBitAdamFreezeStepZero",
     .yaml = "data:\n  mock: true\ntraining:\n  optimizer: onebit_adam\ncompression:\n  freeze_step: 0\n",
     .says = {"{path}:6: compression.freeze_step = 0"}},
    // PowerSGD's options mean nothing to 1-bit: refused, with the method's line.
    {.name = "PowerSgdRankWithOneBit",
     .yaml = "data:\n  mock: true\ncompression:\n  method: onebit\n  rank: 8\n",
     .says = {"{path}:5: compression.rank = 8: is a PowerSGD option and compression.method = onebit ({path}:4) has "
              "no use for it"}},
    {.name = "PowerSgdWarmStartWithOneBit",
     .yaml = "data:\n  mock: true\ncompression:\n  method: onebit\n  warm_start: false\n  start_iter: 3\n",
     .says = {"{path}:5: compression.warm_start = false: is a PowerSGD option"}},
    // 1-bit's blocks are whole words of signs; its options mean nothing to PowerSGD; the scale
    // is one of two.
    {.name = "OneBitBlockSizeNotWholeWords",
     .yaml = "data:\n  mock: true\ncompression:\n  method: onebit\n  block_size: 24\n",
     .says = {"{path}:5: compression.block_size = 24: is not a whole number of 16-bit words of signs; expected 0 "
              "(one scale per chunk) or a multiple of 16"}},
    {.name = "OneBitScaleWithPowerSgd",
     .yaml = "data:\n  mock: true\ncompression:\n  method: powersgd\n  scale: rms\n",
     .says = {"{path}:5: compression.scale = rms: is a 1-bit option and compression.method = powersgd ({path}:4) "
              "has no use for it"}},
    {.name = "OneBitUnknownScale",
     .yaml = "data:\n  mock: true\ncompression:\n  method: onebit\n  scale: max\n",
     .says = {"{path}:5: compression.scale"}},

    // Features named by the interface but not built yet are rejected, never ignored.
    {.name = "TopkCompressionIsNotSupportedYet",
     .yaml = with("compression:\n  method: topk\n"),
     .says = {"{path}:", "compression.method = topk: not supported yet; expected "}},
    {.name = "NegativeStallTimeout",
     .yaml = with("health:\n  stall_timeout: -1\n"),
     .says = {"{path}:", "health.stall_timeout = -1: out of range; expected an integer in [0, 604800]"}},
    {.name = "OtherStallKeysAreTypos",
     .yaml = with("health:\n  stall_timeuot: 60\n"),
     .says = {"{path}:", "health.stall_timeuot = 60: unknown key (did you mean health.stall_timeout?)"}},
    {.name = "SgdIsNotSupportedYet",
     .yaml = with("training:\n  optimizer: sgd\n"),
     .says = {"{path}:", "training.optimizer = sgd: not supported yet; expected "}},
    {.name = "DeterministicIsNotSupportedYet",
     .yaml = with("training:\n  deterministic: true\n"),
     .says = {"{path}:", "training.deterministic = true: not supported yet; expected "}},
    {.name = "PipelineParallelIsNotSupportedYet",
     .yaml = with("parallel:\n  pipeline_model_parallel_size: 2\n"),
     .says = {"{path}:", "parallel.pipeline_model_parallel_size = 2: not supported yet; expected "}},

    // checkpoint.*: out-of-range values name the key and the range.
    {.name = "NegativeCheckpointInterval",
     .yaml = with("checkpoint:\n  interval: -1\n"),
     .says = {"checkpoint.interval = -1: out of range; expected an integer in [0, "}},
    {.name = "CheckpointKeepLastZero",
     .yaml = with("checkpoint:\n  keep_last: 0\n"),
     .says = {"checkpoint.keep_last = 0: out of range; expected an integer in [1, "}},

    // memory.limit and memory.reservation (issue 3, "Quotas, isolation and a device pool").
    {.name = "ReservationAboveLimitNamesBothKeys",
     .yaml = with("memory:\n  capacity: 8GiB\n  limit: 1GiB\n  reservation: 2GiB\n"),
     .says = {"{path}:11: memory.reservation = 2147483648: exceeds memory.limit = 1073741824 ({path}:10); expected "
              "at most memory.limit"}},
    {.name = "ReservationWithoutCapacityIsRefusedWithTheReason",
     .yaml = with("memory:\n  reservation: 1GiB\n"),
     .says = {"{path}:9: memory.reservation = 1073741824: needs memory.capacity",
              "expected memory.capacity set as well"}},
    {.name = "ReservationAboveCapacity",
     .yaml = with("memory:\n  capacity: 1GiB\n  reservation: 2GiB\n"),
     .says = {"memory.reservation = 2147483648: exceeds memory.capacity = 1073741824"}},
    {.name = "LimitAboveCapacityWouldDoNothing",
     .yaml = with("memory:\n  capacity: 1GiB\n  limit: 2GiB\n"),
     .says = {"memory.limit = 2147483648: exceeds memory.capacity = 1073741824"}},
    // Admission by plan and elastic jobs (issue 45, "Elastic pool").
    {.name = "AdmissionIsFailOrWait",
     .yaml = with("memory:\n  admission: queue\n"),
     .says = {"{path}:9: memory.admission = queue: ", "fail", "wait"}},
    {.name = "AdmissionWaitNeedsACapacity",
     .yaml = with("memory:\n  admission: wait\n"),
     .says = {"{path}:9: memory.admission = wait: needs memory.capacity"}},
    {.name = "AdmissionWaitWithAReservationNamesTheReservation",
     .yaml = with("memory:\n  capacity: 8GiB\n  admission: wait\n  reservation: 1GiB\n"),
     .says = {"{path}:11: memory.reservation = 1073741824: cannot be set with memory.admission = wait"}},
    {.name = "PriorityOutOfRange",
     .yaml = with("memory:\n  capacity: 8GiB\n  admission: wait\n  priority: 5000\n"),
     .says = {"{path}:11: memory.priority = 5000: out of range; expected an integer in [-1000, 1000]"}},
    {.name = "PriorityThatIsNotAnInteger",
     .yaml = with("memory:\n  priority: high\n"),
     .says = {"{path}:9: memory.priority = high: "}},
    {.name = "NegativePriorityAging",
     .yaml = with("memory:\n  priority_aging: -1\n"),
     .says = {"{path}:9: memory.priority_aging = -1: out of range; expected an integer in [0, 86400]"}},
    {.name = "ElasticIsABoolean",
     .yaml = with("memory:\n  elastic: sometimes\n"),
     .says = {"{path}:9: memory.elastic = sometimes: "}},
    {.name = "ElasticNeedsAdmissionWait",
     .yaml = with("memory:\n  capacity: 8GiB\n  elastic: true\n"),
     .says = {"{path}:10: memory.elastic = true: needs memory.admission = wait"}},
    {.name = "ElasticFloorAboveTheMicroBatch",
     .yaml = with("memory:\n  capacity: 8GiB\n  admission: wait\n  elastic: true\n  elastic_min_micro_batch: 512\n"),
     .says = {"{path}:12: memory.elastic_min_micro_batch = 512: exceeds training.micro_batch_size"}},
    {.name = "PriorityWithoutAQueueDoesNothing",
     .yaml = with("memory:\n  priority: 5\n"),
     .says = {"{path}:9: memory.priority = 5: has no effect with memory.admission = fail"}},
    {.name = "PriorityAgingWithoutAQueueDoesNothing",
     .yaml = with("memory:\n  priority_aging: 5\n"),
     .says = {"{path}:9: memory.priority_aging = 5: has no effect with memory.admission = fail"}},
    {.name = "AnElasticFloorWithoutElasticDoesNothing",
     .yaml = with("memory:\n  elastic_min_micro_batch: 4\n"),
     .says = {"{path}:9: memory.elastic_min_micro_batch = 4: has no effect with memory.elastic = false"}},
    {.name = "ElasticFloorZero",
     .yaml = with("memory:\n  elastic_min_micro_batch: 0\n"),
     .says = {"{path}:9: memory.elastic_min_micro_batch = 0: out of range; expected an integer in [1, "}},
    {.name = "LimitThatIsNotASize", .yaml = with("memory:\n  limit: lots\n"), .says = {":9: memory.limit = lots: "}},
    // Allocator settings that have no effect are refused, not ignored.
    {.name = "NoCachePolicyWithMaxSplitSizeDoesNothing",
     .yaml = with("memory:\n  policy: no_cache\n  max_split_size: 64MiB\n"),
     .says = {"{path}:10: memory.max_split_size = 67108864: has no effect with memory.policy = no_cache"}},
    {.name = "NoCachePolicyWithExpandableSegmentsDoesNothing",
     .yaml = with("memory:\n  policy: no_cache\n  expandable_segments: true\n"),
     .says = {"memory.expandable_segments = true: has no effect with memory.policy = no_cache"}},
    {.name = "CollectionThresholdWithoutCapacityDoesNothing",
     .yaml = with("memory:\n  garbage_collection_threshold: 0.8\n"),
     .says = {"{path}:9: memory.garbage_collection_threshold = 0.8: has no effect without memory.capacity"}},
    {.name = "MaxSplitSizeAtOrBelowTwentyMiB",
     .yaml = with("memory:\n  max_split_size: 20MiB\n"),
     .says = {"memory.max_split_size = 20MiB: out of range; expected a size above 20MiB"}},
    {.name = "MaxSplitSizeThatIsNotASize",
     .yaml = with("memory:\n  max_split_size: lots\n"),
     .says = {"memory.max_split_size = lots: not a size"}},

    // data.corpus names a file that is not there.
    {.name = "MissingCorpusFile",
     .yaml = "data:\n  corpus: {dir}/no-such-corpus.txt\n",
     .says = {"{path}:2: data.corpus = {dir}/no-such-corpus.txt: no such file or directory"}},

    // Files that are not one YAML mapping of sections. An empty config would otherwise train
    // BERT-Base on every default.
    {.name = "EmptyConfigFileIsRejected",
     .yaml = "",
     .says = {"{path}: config file is empty; expected a YAML mapping with sections model, data, training, "
              "precision, memory, parallel, compression, checkpoint, health"},
     .whole = true},
    {.name = "CommentOnlyConfigFileIsRejectedAsEmpty",
     .yaml = "# only a comment\n\n",
     .says = {"{path}: config file is empty; expected a YAML mapping with sections model, data, training, "
              "precision, memory, parallel, compression, checkpoint, health"},
     .whole = true},
    {.name = "NullDocumentIsRejectedAsEmpty",
     .yaml = "~\n",
     .says = {"{path}: config file is empty; expected a YAML mapping with sections model, data, training, "
              "precision, memory, parallel, compression, checkpoint, health"},
     .whole = true},
    {.name = "DocumentMarkerAloneIsRejectedAsEmpty",
     .yaml = "---\n",
     .says = {"{path}: config file is empty; expected a YAML mapping with sections model, data, training, "
              "precision, memory, parallel, compression, checkpoint, health"},
     .whole = true},
    // kMinimalYaml is 7 lines; `---` is line 8 and the second document's mapping starts on line 9.
    {.name = "SecondYamlDocumentNamesItsLine",
     .yaml = with("---\ntraining:\n  max_steps: 5\n"),
     .says = {"{path}:9: a second YAML document; expected one document per config file"},
     .whole = true},
    {.name = "NotYamlNamesTheLine",
     .yaml = "model:\n  hidden_size: 8\n  vocab_size: [1, 2\n",
     .says = {"{path}:4: not valid YAML ("}},
    // A picture passed by mistake: PNG signature and a header chunk with NUL bytes.
    {.name = "BinaryFileIsNotAConfig",
     .yaml = std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16),
     .says = {"{path}:", "expected a YAML mapping of sections"},
     .file = "picture.png"},
    {.name = "DocumentThatIsNotAMapping",
     .yaml = "- model\n- data\n",
     .says = {"{path}:1: the document is a list; expected a YAML mapping of sections"}},
    {.name = "SectionThatIsNotAMapping",
     .yaml = "model: 5\n",
     .says = {"{path}:1: model = 5: not a mapping; expected a mapping of model.* keys"}},
};

// --set arguments on kMinimalYaml: the message names the argument first.
const std::vector<Refused> kRefusedSet = {
    {.name = "BadValueNamesTheArgument",
     .yaml = kMinimalYaml,
     .says = {"--set model.hidden_size=abc: model.hidden_size = abc: not an integer; expected an integer in [1, "
              "1048576]"},
     .set = {"model.hidden_size=abc"},
     .whole = true},
    {.name = "UnknownKeySuggests",
     .yaml = kMinimalYaml,
     .says = {"--set training.max_step=5: training.max_step = 5: unknown key (did you mean training.max_steps?)"},
     .set = {"training.max_step=5"}},
    {.name = "MissingEquals",
     .yaml = kMinimalYaml,
     .says = {"--set training.max_steps: no '='; expected section.key=value"},
     .set = {"training.max_steps"}},
    {.name = "SectionWithoutKey",
     .yaml = kMinimalYaml,
     .says = {"--set model=5: model is a section; expected section.key=value"},
     .set = {"model=5"}},
    {.name = "EmptyKey",
     .yaml = kMinimalYaml,
     .says = {"--set =: empty key; expected section.key=value, e.g. training.max_steps=100"},
     .set = {"="},
     .whole = true},
    {.name = "BlankKey", .yaml = kMinimalYaml, .says = {": empty key;"}, .set = {" =5"}},
    {.name = "UnknownSectionIsNamedAsInAFile",
     .yaml = kMinimalYaml,
     .says = {"--set frob.x=1: frob: unknown section; expected one of device, model, data, training, precision, "
              "memory, parallel, compression, checkpoint, health"},
     .set = {"frob.x=1"},
     .whole = true},
    {.name = "MisspelledSectionSuggestsTheClosest",
     .yaml = kMinimalYaml,
     .says = {"--set trainng.max_steps=1: trainng: unknown section (did you mean training?)"},
     .set = {"trainng.max_steps=1"}},
    {.name = "CrossKeyRuleBlamesTheOverride",
     .yaml = kMinimalYaml,
     .says = {"--set model.num_attention_heads=5: model.num_attention_heads = 5: does not divide model.hidden_size "
              "= 32"},
     .set = {"model.num_attention_heads=5"}},
    {.name = "NotSupportedYetThroughSet",
     .yaml = kMinimalYaml,
     .says = {"--set compression.method=topk: compression.method = topk: not supported yet; expected one of none, "
              "powersgd, onebit"},
     .set = {"compression.method=topk"}},
};

// `text` with "{path}" and "{dir}" replaced.
std::string expand(std::string text, const std::string& path, const std::string& dir) {
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"{path}", path}, {"{dir}", dir}}) {
    for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
      text.replace(at, from.size(), to);
    }
  }
  return text;
}

// A failing case is shown by its name and text, not as the bytes of the struct.
void PrintTo(const Refused& c, std::ostream* os) { *os << c.name << " (" << ::testing::PrintToString(c.yaml) << ")"; }

class RefusedConfig : public ::testing::TestWithParam<Refused> {};

TEST_P(RefusedConfig, SaysWhereWhatAndWhatWasExpected) {
  const Refused& c = GetParam();
  ConfigFiles files;
  const std::string path = files.write(c.file, expand(c.yaml, "", files.dir()));
  const std::string msg = load_error(path, c.set);
  if (c.whole) {
    ASSERT_EQ(c.says.size(), 1u) << "a whole message is one part";
    EXPECT_EQ(msg, expand(c.says[0], path, files.dir()));
  } else {
    for (const std::string& part : c.says) EXPECT_TRUE(contains(msg, expand(part, path, files.dir())));
  }
  for (const std::string& part : c.never) EXPECT_FALSE(contains(msg, part)) << msg;
}

std::string case_name(const ::testing::TestParamInfo<Refused>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(ConfigErrors, RefusedConfig, ::testing::ValuesIn(kRefused), case_name);
INSTANTIATE_TEST_SUITE_P(SetErrors, RefusedConfig, ::testing::ValuesIn(kRefusedSet), case_name);

// Values a float holds within range load, as doubles (the refused ones are in kRefused).
TEST(ConfigErrors, OptimizerKeysKeepTheDoubleOfAValueAFloatHolds) {
  ConfigFiles files;
  const Config c =
      load_config(files.write("c.yaml", with("training:\n  adam_beta2: 0.9999999\n  adam_eps: 1e-44\n")), {});
  EXPECT_EQ(c.training.adam_beta2, 0.9999999);
  EXPECT_EQ(c.training.adam_eps, 1e-44);
}

// What the compression and 1-bit Adam rows of kRefused leave allowed: 16-bit gradients are
// compressed in f32 (Note [16-bit gradients are compressed in f32]); 1-bit Adam's options load;
// PowerSGD's options are accepted (and do nothing) with method none.
TEST(ConfigErrors, CompressionAndOneBitAdamOptionsThatLoad) {
  ConfigFiles files;
  const std::string b =
      files.write("b.yaml", "data:\n  mock: true\nprecision:\n  dtype: bf16\ncompression:\n  method: powersgd\n");
  EXPECT_EQ(load_config(b, {}).compression.method, "powersgd");
  const Config adam = load_config(
      files.write("m.yaml",
                  "data:\n  mock: true\ntraining:\n  optimizer: onebit_adam\ncompression:\n  freeze_step: 7\n"),
      {});
  EXPECT_EQ(adam.compression.freeze_step, 7);
  const Config blocks = load_config(
      files.write("q.yaml",
                  "data:\n  mock: true\ntraining:\n  optimizer: onebit_adam\ncompression:\n  block_size: 0\n"
                  "  scale: rms\n"),
      {});
  EXPECT_EQ(blocks.compression.block_size, 0);
  EXPECT_EQ(blocks.compression.scale, "rms");
  const std::string e =
      files.write("e.yaml",
                  "data:\n  mock: true\nparallel:\n  zero_stage: 1\ncompression:\n  method: none\n  rank: 8\n"
                  "  start_iter: 0\n  warm_start: false\n");
  const Config ok = load_config(e, {});
  EXPECT_EQ(ok.compression.rank, 8);
  EXPECT_EQ(ok.compression.start_iter, 0);
  EXPECT_FALSE(ok.compression.warm_start);
}

TEST(ConfigErrors, GlobalBatchNotAMultipleOfMicroTimesRanks) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", with("training:\n  micro_batch_size: 4\n  global_batch_size: 8\n"));
  const Config c = load_config(path, {});
  try {
    check_data_parallel_size(c, 4);
    FAIL() << "accepted 8 = 4 x 4 ranks x 0.5 steps";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(std::string(e.what()),
                         path + ":10: training.global_batch_size = 8: not a multiple of training.micro_batch_size x "
                                "data-parallel size = 4 x 4 = 16; expected a multiple of 16"));
  }
}

// A loop of links was reported as "no such file or directory", sending the user to a name that
// is there.
TEST(ConfigErrors, CorpusThatIsALoopOfLinksIsNamedAsSuch) {
  ConfigFiles files;
  const std::string a = files.dir() + "/loop-a", b = files.dir() + "/loop-b";
  std::filesystem::create_symlink(b, a);
  std::filesystem::create_symlink(a, b);
  const std::string path = files.write("c.yaml", "data:\n  corpus: " + a + "\n");
  EXPECT_TRUE(contains(
      load_error(path),
      path + ":2: data.corpus = " + a + ": a symbolic link that leads to no file (Too many levels of symbolic links)"))
      << load_error(path);
}

TEST(ConfigErrors, CorpusFileAndDirectoryAreAccepted) {
  ConfigFiles files;
  const std::string text = files.write("corpus.txt", "In the beginning.\n");
  EXPECT_NO_THROW(load_config(files.write("a.yaml", "data:\n  corpus: " + text + "\n"), {}));
  EXPECT_NO_THROW(load_config(files.write("b.yaml", "data:\n  corpus: " + files.dir() + "\n"), {}));
}

TEST(ConfigErrors, UnreadableCorpusFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file";
  ConfigFiles files;
  const std::string text = files.write("corpus.txt", "secret\n");
  std::filesystem::permissions(text, std::filesystem::perms::none);
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", "data:\n  corpus: " + text + "\n")), "cannot be read"));
}

// Sets PATH for one test and restores it.
class ScopedPath {
 public:
  explicit ScopedPath(const std::string& value) : old_(std::getenv("PATH") ? std::getenv("PATH") : "") {
    ::setenv("PATH", value.c_str(), 1);
  }
  ~ScopedPath() { ::setenv("PATH", old_.c_str(), 1); }

 private:
  std::string old_;
};

TEST(ConfigErrors, KjvCorpusWithoutTheBibleProgram) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", "data:\n  corpus: kjv\n");
  ScopedPath empty(files.dir());
  const std::string msg = load_error(path);
  EXPECT_TRUE(
      contains(msg, path + ":2: data.corpus = kjv: the `bible` program (Debian package bible-kjv) is not in PATH"));
}

TEST(ConfigErrors, DefaultKjvCorpusWithoutTheBibleProgramSaysDefault) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", "model:\n  hidden_size: 768\n");
  ScopedPath empty(files.dir());
  EXPECT_TRUE(contains(load_error(path), path + " (default): data.corpus = kjv: the `bible` program"));
}

TEST(ConfigErrors, KjvCorpusIsAcceptedWhenBibleIsFound) {
  ConfigFiles files;
  const std::string bible = files.write("bible", "#!/bin/sh\n");
  std::filesystem::permissions(bible, std::filesystem::perms::owner_all);
  ScopedPath fake(files.dir());
  EXPECT_NO_THROW(load_config(files.write("c.yaml", "data:\n  corpus: kjv\n"), {}));
}

TEST(ConfigErrors, MissingConfigFile) {
  EXPECT_EQ(load_error("/nonexistent/dir/exp.yaml"),
            "/nonexistent/dir/exp.yaml: config file not found; expected a YAML file such as configs/tiny.yaml");
}

TEST(ConfigErrors, ConfigPathIsADirectory) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.dir()), files.dir() + ": is a directory; expected a YAML file"));
}

TEST(ConfigErrors, UnreadableConfigFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file";
  ConfigFiles files;
  const std::string path = files.write("c.yaml", kMinimalYaml);
  std::filesystem::permissions(path, std::filesystem::perms::none);
  EXPECT_TRUE(contains(load_error(path), path + ": cannot read config file"));
}

TEST(ConfigErrors, DevNullIsNotAConfig) {
  EXPECT_TRUE(contains(load_error("/dev/null"), "/dev/null: is not a regular file"));
}

TEST(ConfigErrors, FifoIsRejectedWithoutOpeningIt) {
  // Opening a FIFO with no writer blocks forever; the check must come before the open.
  ConfigFiles files;
  const std::string path = files.dir() + "/fifo.yaml";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_EQ(load_error(path), path +
                                  ": is not a regular file (a pipe, device or special file); expected a YAML "
                                  "file such as configs/tiny.yaml");
}

TEST(ConfigErrors, ProcMemIsNotAConfig) {
  // stat calls /proc/self/mem a regular file of size 0, and reading it at offset 0 fails: it
  // reads as nothing, so it is refused as empty rather than trained on defaults.
  EXPECT_TRUE(contains(load_error("/proc/self/mem"), "/proc/self/mem: config file is empty"));
}

TEST(ConfigErrors, LinkToARegularFileIsFollowed) {
  ConfigFiles files;
  const std::string target = files.write("c.yaml", kMinimalYaml);
  const std::string link = files.dir() + "/link.yaml";
  std::filesystem::create_symlink(target, link);
  EXPECT_NO_THROW(load_config(link, {}));
}

// Checkpoints hold every optimizer's and compressor's state: checkpointing loads with each.
TEST(ConfigErrors, CheckpointsLoadWithEveryOptimizerAndCompressor) {
  ConfigFiles files;
  for (const char* extra : {"parallel:\n  zero_stage: 1\n", "compression:\n  method: powersgd\n",
                            "compression:\n  method: onebit\n", "training:\n  optimizer: onebit_adam\n"}) {
    const Config c = load_config(files.write("c.yaml", with(std::string("checkpoint:\n  interval: 5\n") + extra)), {});
    EXPECT_EQ(c.checkpoint.interval, 5) << extra;
  }
}

// checkpoint.*: loaded as given (the out-of-range values are in kRefused).
TEST(ConfigErrors, CheckpointKeysLoad) {
  ConfigFiles files;
  const Config c = load_config(
      files.write("c.yaml", with("checkpoint:\n  interval: 7\n  keep_last: 3\n  on_interrupt: true\n")), {});
  EXPECT_EQ(c.checkpoint.interval, 7);
  EXPECT_EQ(c.checkpoint.keep_last, 3);
  EXPECT_TRUE(c.checkpoint.on_interrupt);
}

TEST(ConfigErrors, LimitAndReservationWithinCapacityLoad) {
  ConfigFiles files;
  const Config c =
      load_config(files.write("c.yaml", with("memory:\n  capacity: 4GiB\n  limit: 2GiB\n  reservation: 1GiB\n"
                                             "  garbage_collection_threshold: 0.5\n")),
                  {});
  EXPECT_EQ(c.memory.limit, 2ull << 30);
  EXPECT_EQ(c.memory.reservation, 1ull << 30);
  // A limit alone is a bound the collection threshold can be measured against.
  EXPECT_NO_THROW(
      load_config(files.write("d.yaml", with("memory:\n  limit: 2GiB\n  garbage_collection_threshold: 0.5\n")), {}));
}

}  // namespace
}  // namespace memtrain::train
