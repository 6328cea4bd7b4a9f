#pragma once
// Trains the SentencePiece model on the training split.
#include <string>
#include <vector>

namespace memtrain::data {

struct TokenizerSettings {
  std::string type = "bpe";  // "bpe" | "unigram" (data.tokenizer_type)
  int vocab_size = 30522;    // model.vocab_size: an upper bound (see train_tokenizer)
  int num_threads = 0;       // 0 = std::thread::hardware_concurrency()
};

// Trains with sentencepiece::SentencePieceTrainer on `sentences` (one per segment) and writes
// `<model_prefix>.model` and `<model_prefix>.vocab`. Special pieces get the fixed ids of
// Note [Fixed special ids]; no BOS/EOS; every character of `sentences` gets a piece
// (Note [Every character] in the .cpp). The vocabulary size is a soft limit
// (hard_vocab_limit=false): the unigram trainer cannot grow past what the text supports (about
// 11,400 pieces for the KJV), and the model then has fewer pieces than asked; BPE reaches
// 30,522 on the KJV. Returns the number of pieces of the trained model.
// Throws ConfigError for an unknown type or a vocabulary too small for the corpus' characters
// (SentencePiece's own message is included), RuntimeError for other trainer failures.
int train_tokenizer(const std::vector<std::string>& sentences, const TokenizerSettings& settings,
                    const std::string& model_prefix);

}  // namespace memtrain::data
