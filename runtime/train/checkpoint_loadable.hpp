#pragma once
// Whether a checkpoint whose bytes verify can also be loaded: what `memtrain checkpoint verify`
// adds to the manifest's checksums, and what resume and rollback ask of a checkpoint before
// they choose it (docs/checkpoints.md, "Checking" and "Resume").
#include <string>
#include <vector>

namespace memtrain::train {

// Note [A checkpoint that verifies must load]
// The manifest proves that the bytes are those written, and nothing more: a meta.json edited
// by hand and its checksum recomputed, a directory renamed, a tensor renamed or reshaped
// before the manifest was computed, all verify and then fail the load (exit 1), or worse,
// load as something else (a "step": 29 inside step-00000030 resumed as step 29). So the
// checks a load makes are made before a checkpoint is chosen, without loading it:
// - meta.json's fields as the loader reads them (read_checkpoint_meta), and its step against
//   the directory's name;
// - the shard files against meta.json's layout: model-tpXX for every tensor-parallel rank
//   below tensor_model_parallel_size and none beyond, optimizer-tpXX (or with zero_stage 1
//   optimizer-tpXX-dpYY for every data-parallel rank), compression-tpXX-dpYY when the config
//   keeps per-rank compression state on more than one rank; each named by the manifest;
// - config.yaml loads, and agrees with meta.json on precision.dtype and the tensor-parallel
//   size; the job it describes is built on a simulated device (a dry run: no memory, no
//   values) for meta.json's layout, and the saver's own list of what that job writes
//   (rank_files) is compared, tensor by tensor (name, dtype, shape), with the headers of the
//   model and optimizer files; trainer_state.json holds the loss scaler's fields.
// Shard shapes are equal on every tensor-parallel rank (the vocabulary is padded), so rank 0's
// list holds for every model-tpXX. Not compared, left to the load: the element ranges of ZeRO-1
// pieces (known only with values) and the tensors of compression files (per rank).

// The problems that would stop `dir` (a checkpoint directory whose files verify against their
// manifest) from loading, one line each, "<file>: <what>"; empty when it loads. Reads meta.json,
// config.yaml, trainer_state.json and the headers of the tensor files, never their data.
// Throws nothing but std::bad_alloc: what fails is reported.
std::vector<std::string> verify_loadable(const std::string& dir);

}  // namespace memtrain::train
