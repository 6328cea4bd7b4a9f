#pragma once
// `memtrain eval --checkpoint DIR [--input FILE.json]`: a checkpoint's model evaluated on given
// token ids or on the validation split, so that an independent implementation can be compared
// with memtrain on the same inputs (docs/checkpoints.md, "Evaluating a checkpoint").
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "runtime/train/evaluator.hpp"

namespace memtrain::train {

// Token ids to evaluate: {"input_ids": [[...]], "labels": [[...]]} with -100 for positions
// that are not scored, optional "attention_mask" (default ones) and "token_type_ids" (default
// zeros); every array [B, T] of integers.
struct EvalInput {
  int batch_size = 0;                        // B
  int seq_length = 0;                        // T
  std::vector<std::int32_t> input_ids;       // [B, T]
  std::vector<std::int32_t> token_type_ids;  // [B, T]
  std::vector<float> attention_mask;         // [B, T], 0 or 1
  std::vector<std::int32_t> labels;          // [B, T], -100 = not scored
  std::string source = "eval --input";       // the file's path, for messages
};

// Reads FILE.json. Throws ConfigError (exit 2) naming the file, the key and the row or element
// when it cannot be read, is not JSON (with the line and column where parsing stopped), lacks input_ids or labels, has ragged or mismatched
// rows, or a value that is not an integer (0 or 1 for attention_mask). Ranges are checked
// against the model by evaluate_tokens.
EvalInput parse_eval_input(const std::string& path);

// What evaluate_tokens computes at the labelled positions (row-major order).
struct TokenEval {
  double loss = 0;                   // mean cross-entropy, nats (accumulated in double)
  std::vector<std::int32_t> argmax;  // [P] the most likely id over the real vocabulary
  std::int64_t step = 0;             // the checkpoint's step
};

// Loads the checkpoint in `dir` (verified first; tensor-parallel shards merged, so any
// tensor-parallel size) into a model of one process, dropout off, and scores `input`: positions
// 0..T-1, the checkpoint's training.micro_batch_size rows at a time (the memory of one
// micro-batch whatever the file's length). Throws ConfigError when an id, label or token type lies outside the model's ranges, T
// exceeds max_position_embeddings, or no position is labelled; RuntimeError when the
// checkpoint does not verify or cannot be loaded.
TokenEval evaluate_tokens(const std::string& dir, const EvalInput& input, std::ostream& log);

// The checkpoint's model on the validation split of its config's data (training.eval_steps
// micro-batches of training.micro_batch_size), as the trainer's eval lines. Throws as
// evaluate_tokens, and as load_training_data for the data.
EvalResult evaluate_checkpoint(const std::string& dir, std::int64_t* step, std::ostream& log);

}  // namespace memtrain::train
