#pragma once
// Reading a checkpoint as one unsharded model, and writing it in Hugging Face's layout
// (`memtrain export-hf`, `memtrain eval --checkpoint`; docs/checkpoints.md, "Export").
#include <array>
#include <map>
#include <string>

#include "runtime/config/config.hpp"
#include "runtime/core/safetensors.hpp"

namespace memtrain::train {

// The parameters of the checkpoint in `dir` merged over its tensor-parallel ranks: each
// tensor of model-tp00..tpNN.safetensors put back at its recorded place (memtrain_shards:
// dim0 rows or dim1 columns at `offset` out of `full_extent`), then cut to `valid_extent`
// (the vocabulary padding removed); replicated tensors taken from rank 0. Hugging Face names,
// the stored dtype (F32, F16 or BF16), shapes of the unsharded model. Throws RuntimeError
// naming the file when one is missing or unreadable, a shard's layout is absent or
// inconsistent, or the ranks disagree on the tensors they hold.
std::map<std::string, core::HostArray> merged_model_tensors(const std::string& dir);

// The Config the checkpoint was trained with (its config.yaml), with
// tensor_model_parallel_size 1 and sequence parallelism off: the shape of the merged model.
// Throws ConfigError as load_config does (the message names the file).
Config checkpoint_model_config(const std::string& dir);

// Writes OUT/config.json (BertConfig keys, model_type bert, architectures [BertForMaskedLM],
// hidden_act gelu, torch_dtype) and OUT/model.safetensors (merged_model_tensors, 16-bit values
// as stored or, with `fp32`, converted exactly to F32; the decoder weight is tied to the word
// embeddings, as BertForMaskedLM ties it), OUT/TOKENIZER.md (how the ids were made) and, when
// the run's data cache is on this machine, OUT/tokenizer.model (SentencePiece). OUT is
// created; existing files there are replaced. Throws RuntimeError when a file cannot be
// written, and as merged_model_tensors.
void export_hf(const std::string& dir, const std::string& out, bool fp32);

// Every file export_hf may write into OUT (tokenizer.model only when the run's tokenizer is on
// this machine).
inline constexpr std::array<const char*, 4> kHfExportFiles = {"config.json", "model.safetensors", "TOKENIZER.md",
                                                              "tokenizer.model"};

}  // namespace memtrain::train
