// `memtrain export-hf` and `memtrain eval --checkpoint`, checked without PyTorch: the export's
// names, shapes and bytes against Hugging Face BertForMaskedLM's published state-dict layout
// and the safetensors format (parsed here by hand), tensor-parallel shards merged with the
// vocabulary padding removed, fp16 widened exactly, and every bad input named. The comparison
// with an independent PyTorch reader is tests/cli/slow/export_pytorch_test.cpp.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/cpu/matmul_bf16.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "runtime/core/safetensors.hpp"
#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::Scratch;
using testing::slurp;

// Two layers, hidden 32, 4 heads, FFN 64, vocabulary 64, a checkpoint at the last step.
std::string config(const Scratch& s, const std::string& name, int steps, const std::string& extra = "") {
  return s.write(name,
                 "model:\n  vocab_size: 64\n  hidden_size: 32\n  num_hidden_layers: 2\n  num_attention_heads: 4\n"
                 "  intermediate_size: 64\n  max_position_embeddings: 16\n"
                 "data:\n  mock: true\n  seq_length: 16\n"
                 "training:\n  micro_batch_size: 2\n  global_batch_size: 2\n  max_steps: " +
                     std::to_string(steps) + "\n  eval_steps: 1\ncheckpoint:\n  interval: " + std::to_string(steps) +
                     "\n" + extra);
}

struct Entry {
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::vector<unsigned char> bytes;
};

// The published format, read by hand: u64 LE header length, JSON header, raw bytes.
std::map<std::string, Entry> parse_safetensors(const std::string& path, nlohmann::json* metadata) {
  const std::string data = slurp(path);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(data[static_cast<std::size_t>(i)]);
  const auto header = nlohmann::json::parse(data.substr(8, n));
  std::map<std::string, Entry> out;
  std::uint64_t expected_begin = 0;
  for (const auto& [name, e] : header.items()) {  // nlohmann sorts keys: the file's order
    if (name == "__metadata__") {
      *metadata = e;
      continue;
    }
    const auto begin = e["data_offsets"][0].get<std::uint64_t>(), end = e["data_offsets"][1].get<std::uint64_t>();
    EXPECT_EQ(begin, expected_begin) << name << ": tensors are contiguous, in name order";
    expected_begin = end;
    Entry en{e["dtype"], e["shape"].get<std::vector<std::int64_t>>(), {}};
    en.bytes.assign(data.begin() + static_cast<std::ptrdiff_t>(8 + n + begin),
                    data.begin() + static_cast<std::ptrdiff_t>(8 + n + end));
    out[name] = std::move(en);
  }
  EXPECT_EQ(8 + n + expected_begin, data.size()) << "no bytes after the last tensor";
  return out;
}

// BertForMaskedLM's state dict for this config (transformers' modeling_bert: no pooler in the
// masked-LM model; the decoder weight is tied to the word embeddings).
std::map<std::string, std::vector<std::int64_t>> hf_layout(int V, int C, int I, int P, int layers) {
  std::map<std::string, std::vector<std::int64_t>> m = {{"bert.embeddings.word_embeddings.weight", {V, C}},
                                                        {"bert.embeddings.position_embeddings.weight", {P, C}},
                                                        {"bert.embeddings.token_type_embeddings.weight", {2, C}},
                                                        {"bert.embeddings.LayerNorm.weight", {C}},
                                                        {"bert.embeddings.LayerNorm.bias", {C}},
                                                        {"cls.predictions.transform.dense.weight", {C, C}},
                                                        {"cls.predictions.transform.dense.bias", {C}},
                                                        {"cls.predictions.transform.LayerNorm.weight", {C}},
                                                        {"cls.predictions.transform.LayerNorm.bias", {C}},
                                                        {"cls.predictions.bias", {V}}};
  for (int l = 0; l < layers; ++l) {
    const std::string p = "bert.encoder.layer." + std::to_string(l) + ".";
    for (const char* qkv : {"query", "key", "value"}) {
      m[p + "attention.self." + qkv + ".weight"] = {C, C};
      m[p + "attention.self." + qkv + ".bias"] = {C};
    }
    m[p + "attention.output.dense.weight"] = {C, C};
    m[p + "attention.output.dense.bias"] = {C};
    m[p + "attention.output.LayerNorm.weight"] = {C};
    m[p + "attention.output.LayerNorm.bias"] = {C};
    m[p + "intermediate.dense.weight"] = {I, C};
    m[p + "intermediate.dense.bias"] = {I};
    m[p + "output.dense.weight"] = {C, I};
    m[p + "output.dense.bias"] = {C};
    m[p + "output.LayerNorm.weight"] = {C};
    m[p + "output.LayerNorm.bias"] = {C};
  }
  return m;
}

std::vector<float> floats(const Entry& e) {
  std::vector<float> v(e.bytes.size() / 4);
  std::memcpy(v.data(), e.bytes.data(), e.bytes.size());
  return v;
}

// IEEE 754 binary16 to float by its definition (sign, 5-bit exponent, 10-bit fraction).
float half_to_float(std::uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 0x1f, fraction = h & 0x3ff;
  const double magnitude = exponent == 0 ? std::ldexp(fraction, -24) : std::ldexp(1024 + fraction, exponent - 25);
  return static_cast<float>(sign ? -magnitude : magnitude);
}

TEST(ExportHf, NamesShapesAndFormatAreBertForMaskedLMs) {
  Scratch s;
  ASSERT_EQ(s.memtrain("train --config " + config(s, "c.yaml", 2) + " --run-dir run").exit_code, 0);
  const auto r = s.memtrain("export-hf run/checkpoints/step-00000002 hf");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json metadata;
  const auto tensors = parse_safetensors(s.path("hf/model.safetensors"), &metadata);
  EXPECT_EQ(metadata["format"], "pt");
  std::map<std::string, std::vector<std::int64_t>> got;
  for (const auto& [name, e] : tensors) {
    got[name] = e.shape;
    EXPECT_EQ(e.dtype, "F32") << name;
  }
  EXPECT_EQ(got, hf_layout(64, 32, 64, 16, 2));
  const auto cfg = nlohmann::json::parse(slurp(s.path("hf/config.json")));
  EXPECT_EQ(cfg["model_type"], "bert");
  EXPECT_EQ(cfg["architectures"], nlohmann::json::array({"BertForMaskedLM"}));
  EXPECT_EQ(cfg["hidden_act"], "gelu");
  for (const auto& [key, value] : std::map<std::string, int>{{"vocab_size", 64},
                                                             {"hidden_size", 32},
                                                             {"num_hidden_layers", 2},
                                                             {"num_attention_heads", 4},
                                                             {"intermediate_size", 64},
                                                             {"max_position_embeddings", 16},
                                                             {"type_vocab_size", 2}}) {
    EXPECT_EQ(cfg[key], value) << key;
  }
  EXPECT_EQ(cfg["layer_norm_eps"], 1e-12);
  EXPECT_EQ(cfg["hidden_dropout_prob"], 0.1);
  EXPECT_EQ(cfg["torch_dtype"], "float32");
  // The parameters are the checkpoint's bytes (one tensor-parallel rank: nothing to merge).
  std::map<std::string, nlohmann::json> unused;
  nlohmann::json ckpt_meta;
  const auto stored = parse_safetensors(s.path("run/checkpoints/step-00000002/model-tp00.safetensors"), &ckpt_meta);
  for (const auto& [name, e] : tensors) EXPECT_EQ(e.bytes, stored.at(name).bytes) << name;
  EXPECT_TRUE(contains(slurp(s.path("hf/TOKENIZER.md")), "data.mock"));
}

// A second export into the same OUT (or a mistyped OUT) would replace a model someone kept:
// refused, naming the files, unless --force; an existing empty directory is used as before.
TEST(ExportHf, RefusesToReplaceFilesInOutUnlessForced) {
  Scratch s;
  ASSERT_EQ(s.memtrain("train --config " + config(s, "c.yaml", 2) + " --run-dir run").exit_code, 0);
  const std::string ckpt = "run/checkpoints/step-00000002";
  fs::create_directories(s.path("hf"));
  ASSERT_EQ(s.memtrain("export-hf " + ckpt + " hf").exit_code, 0);
  s.write("hf/config.json", "kept");
  const auto again = s.memtrain("export-hf " + ckpt + " hf");
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_EQ(again.err,
            "memtrain: config error: export-hf: OUT hf already holds config.json, model.safetensors, "
            "TOKENIZER.md; expected a new or empty directory, or --force to replace them\n");
  EXPECT_EQ(slurp(s.path("hf/config.json")), "kept");
  fs::create_directories(s.path("other"));
  s.write("other/TOKENIZER.md", "notes");
  const auto one = s.memtrain("export-hf " + ckpt + " other");
  EXPECT_EQ(one.exit_code, 2);
  EXPECT_TRUE(contains(one.err, "OUT other already holds TOKENIZER.md;")) << one.err;
  EXPECT_FALSE(fs::exists(s.path("other/model.safetensors")));
  s.write("file", "");
  const auto file = s.memtrain("export-hf " + ckpt + " file");
  EXPECT_EQ(file.exit_code, 2);
  EXPECT_TRUE(contains(file.err, "OUT file exists and is not a directory")) << file.err;
  const auto below = s.memtrain("export-hf " + ckpt + " file/hf");
  EXPECT_EQ(below.exit_code, 2);
  EXPECT_TRUE(contains(below.err, "OUT file/hf: file is not a directory; expected OUT below a directory")) << below.err;
  const auto forced = s.memtrain("export-hf " + ckpt + " hf --force");
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(s.path("hf/config.json")))["model_type"], "bert");
}

// Note [An export appears whole or not at all]: an export that fails part-way (here the model
// file exceeds the process's file-size limit, as a full disk would refuse it, after config.json
// is written) leaves OUT as the earlier export, byte for byte, beside a user's own file, and
// leaves nothing behind where there was no OUT. The reference is OUT's bytes before the try.
TEST(ExportHf, AFailedExportLeavesTheEarlierOneWhole) {
  Scratch s;
  ASSERT_EQ(s.memtrain("train --config " + config(s, "c.yaml", 2) + " --run-dir run").exit_code, 0);
  ASSERT_EQ(s.memtrain("train --config " + config(s, "d.yaml", 3) + " --run-dir run3").exit_code, 0);
  ASSERT_EQ(s.memtrain("export-hf run/checkpoints/step-00000002 hf").exit_code, 0);
  s.write("hf/README.md", "mine");
  const std::string config_before = slurp(s.path("hf/config.json"));
  const std::string model_before = slurp(s.path("hf/model.safetensors"));
  // 8 KiB: config.json fits, the model (about 100 KiB) does not. SIGXFSZ ignored: write fails.
  const std::string limited = "trap '' XFSZ; ulimit -f 16; ";
  const auto failed = s.shell(limited + "'" + std::string(MEMTRAIN_BINARY_DIR) +
                              "/memtrain' export-hf run3/checkpoints/step-00000003 hf --force");
  EXPECT_EQ(failed.exit_code, 1) << failed.err;
  EXPECT_EQ(slurp(s.path("hf/config.json")), config_before);
  EXPECT_EQ(slurp(s.path("hf/model.safetensors")), model_before);
  EXPECT_EQ(slurp(s.path("hf/README.md")), "mine");
  const auto fresh = s.shell(limited + "'" + std::string(MEMTRAIN_BINARY_DIR) +
                             "/memtrain' export-hf run3/checkpoints/step-00000003 new");
  EXPECT_EQ(fresh.exit_code, 1) << fresh.err;
  EXPECT_FALSE(fs::exists(s.path("new")));
  for (const auto& e : fs::directory_iterator(s.path("."))) {
    EXPECT_FALSE(e.path().filename().string().find(".export-") != std::string::npos) << e.path();
  }
  // And a forced export that succeeds replaces the model and keeps the user's file.
  ASSERT_EQ(s.memtrain("export-hf run3/checkpoints/step-00000003 hf --force").exit_code, 0);
  EXPECT_NE(slurp(s.path("hf/model.safetensors")), model_before);
  EXPECT_EQ(slurp(s.path("hf/README.md")), "mine");
}

// A checkpoint whose tensors disagree with its config.yaml (here a word-embedding table of
// half the vocabulary, the manifest recomputed so that the checksums pass) was exported as a
// config.json of 64 ids beside a 32-row table (found by a bad-input trial); eval refused it.
// The export checks every parameter as eval does and writes nothing.
TEST(ExportHf, RefusesTensorsThatDisagreeWithTheConfig) {
  Scratch s;
  ASSERT_EQ(s.memtrain("train --config " + config(s, "c.yaml", 2) + " --run-dir run").exit_code, 0);
  const std::string ckpt = "run/checkpoints/step-00000002";
  const std::string file = s.path(ckpt + "/model-tp00.safetensors");
  std::map<std::string, std::string> metadata;
  auto tensors = core::read_safetensors(file, &metadata);
  std::string damaged;
  for (auto& [name, a] : tensors) {
    if (name.find("word_embeddings") == std::string::npos) continue;
    damaged = name;
    a.shape[0] /= 2;
    a.data.resize(a.data.size() / 2);
  }
  ASSERT_FALSE(damaged.empty());
  core::write_safetensors(file, tensors, metadata);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(s.path(ckpt))) {
    if (e.path().filename() != "manifest.json") files.push_back(e.path().filename().string());
  }
  std::ofstream(s.path(ckpt + "/manifest.json"))
      << checkpoint::manifest_json(checkpoint::compute_manifest(s.path(ckpt), files));
  // The bytes are the ones listed, but the tensor is not the model's: verify says so too (issue
  // 48: it called such a checkpoint valid).
  const auto v = s.memtrain("checkpoint verify " + ckpt);
  EXPECT_EQ(v.exit_code, 1);
  EXPECT_TRUE(contains(v.out, "model-tp00.safetensors: tensor " + damaged +
                                  " is F32 [32, 32], the model of config.yaml (tensor_model_parallel_size 1) has F32 "
                                  "[64, 32]"))
      << v.out;
  const auto r = s.memtrain("export-hf " + ckpt + " hf");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "tensor " + damaged + " is F32 [32, 32], the model's is F32 [64, 32]")) << r.err;
  EXPECT_FALSE(fs::exists(s.path("hf/config.json")));
  EXPECT_FALSE(fs::exists(s.path("hf/model.safetensors")));
}

// Two tensor-parallel ranks: the vocabulary (64, padded to 256 over the ranks) and the column-
// and row-parallel weights come back whole, in place: after one step they equal a tp = 1 run's
// within AdamW's first update (lr per element, a sign apart where a gradient is ~0), far below
// the 0.02 scale of the weights a misplaced shard would show.
TEST(ExportHf, TensorParallelShardsAreMergedWithoutTheVocabularyPadding) {
  Scratch s;
  ASSERT_EQ(s.memtrain("train --config " + config(s, "one.yaml", 1) + " --run-dir one").exit_code, 0);
  const auto two =
      s.mpirun(2, "train --config " + config(s, "two.yaml", 1, "parallel:\n  tensor_model_parallel_size: 2\n") +
                      " --run-dir two");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  ASSERT_EQ(s.memtrain("export-hf one/checkpoints/step-00000001 hf1").exit_code, 0);
  const auto r = s.memtrain("export-hf two/checkpoints/step-00000001 hf2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json m1, m2;
  const auto a = parse_safetensors(s.path("hf1/model.safetensors"), &m1);
  const auto b = parse_safetensors(s.path("hf2/model.safetensors"), &m2);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, e] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    ASSERT_EQ(b.at(name).shape, e.shape) << name;
    const auto x = floats(e), y = floats(b.at(name));
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(double(x[i]) - y[i]));
    EXPECT_LE(worst, 2.5e-4) << name;  // lr 1e-4: at most 2 lr apart
  }
}

TEST(ExportHf, Fp16IsKeptAsStoredOrWidenedExactly) {
  Scratch s;
  ASSERT_EQ(s.memtrain("train --config " + config(s, "c.yaml", 1, "precision:\n  dtype: fp16\n") + " --run-dir run")
                .exit_code,
            0);
  ASSERT_EQ(s.memtrain("export-hf run/checkpoints/step-00000001 stored").exit_code, 0);
  ASSERT_EQ(s.memtrain("export-hf run/checkpoints/step-00000001 wide --fp32").exit_code, 0);
  nlohmann::json m;
  const auto stored = parse_safetensors(s.path("stored/model.safetensors"), &m);
  const auto wide = parse_safetensors(s.path("wide/model.safetensors"), &m);
  EXPECT_EQ(nlohmann::json::parse(slurp(s.path("stored/config.json")))["torch_dtype"], "float16");
  EXPECT_EQ(nlohmann::json::parse(slurp(s.path("wide/config.json")))["torch_dtype"], "float32");
  const auto& q = "bert.encoder.layer.0.attention.self.query.weight";
  ASSERT_EQ(stored.at(q).dtype, "F16");
  ASSERT_EQ(wide.at(q).dtype, "F32");
  const auto w = floats(wide.at(q));
  ASSERT_EQ(w.size() * 2, stored.at(q).bytes.size());
  for (std::size_t i = 0; i < w.size(); ++i) {
    const std::uint16_t h =
        static_cast<std::uint16_t>(stored.at(q).bytes[2 * i] | (stored.at(q).bytes[2 * i + 1] << 8));
    ASSERT_EQ(w[i], half_to_float(h)) << i;
  }
}

// A checkpoint of a run with precision.bf16_gemm: native (its config.yaml says so) is evaluated
// and exported on a CPU without bf16 dot products (oneDNN capped at AVX2 here): those commands
// fall back to the converted path instead of refusing the recorded setting.
TEST(EvalCheckpoint, ANativeBf16GemmCheckpointLoadsWithoutBf16DotProducts) {
  if (!kernels::bf16_gemm_native()) GTEST_SKIP() << "training with native needs bf16 dot products";
  Scratch s;
  ASSERT_EQ(s.memtrain("train --config " + config(s, "c.yaml", 1, "precision:\n  dtype: bf16\n  bf16_gemm: native\n") +
                       " --run-dir run")
                .exit_code,
            0);
  const std::string ckpt = "run/checkpoints/step-00000001", cap = "ONEDNN_MAX_CPU_ISA=AVX2";
  const auto e = s.memtrain("eval --checkpoint " + ckpt, cap);
  EXPECT_EQ(e.exit_code, 0) << e.err;
  EXPECT_TRUE(nlohmann::json::parse(e.out).contains("loss"));
  const auto x = s.memtrain("export-hf " + ckpt + " hf", cap);
  EXPECT_EQ(x.exit_code, 0) << x.err;
}

// eval --input goes through the model a micro-batch (training.micro_batch_size = 2 rows) at a
// time: 7 rows (four batches, the last short) score as the two files of their first 4 and last 3
// rows do: the same argmax in order, and the loss the mean over the union of the positions,
// (n_a loss_a + n_b loss_b) / (n_a + n_b).
TEST(EvalCheckpoint, ManyRowsGoAMicroBatchAtATime) {
  Scratch s;
  ASSERT_EQ(s.memtrain("train --config " + config(s, "c.yaml", 2) + " --run-dir run").exit_code, 0);
  const std::string ckpt = "run/checkpoints/step-00000002";
  const auto rows = [](int first, int count) {
    nlohmann::json ids = nlohmann::json::array(), labels = nlohmann::json::array();
    for (int r = first; r < first + count; ++r) {
      std::vector<int> row, label;
      for (int t = 0; t < 8; ++t) {
        row.push_back((r * 7 + t * 3) % 64);
        label.push_back((r + t) % 3 == 0 ? (r * 5 + t) % 64 : -100);
      }
      ids.push_back(row);
      labels.push_back(label);
    }
    return nlohmann::json{{"input_ids", ids}, {"labels", labels}}.dump();
  };
  s.write("all.json", rows(0, 7));
  s.write("a.json", rows(0, 4));
  s.write("b.json", rows(4, 3));
  nlohmann::json out[3];
  const char* files[3] = {"all.json", "a.json", "b.json"};
  for (int i = 0; i < 3; ++i) {
    const auto r = s.memtrain("eval --checkpoint " + ckpt + " --input " + files[i]);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    out[i] = nlohmann::json::parse(r.out);
  }
  const double na = out[1]["labelled_positions"].get<double>(), nb = out[2]["labelled_positions"].get<double>();
  EXPECT_EQ(out[0]["labelled_positions"].get<double>(), na + nb);
  auto argmax = out[1]["argmax"].get<std::vector<int>>();
  const auto tail = out[2]["argmax"].get<std::vector<int>>();
  argmax.insert(argmax.end(), tail.begin(), tail.end());
  EXPECT_EQ(out[0]["argmax"].get<std::vector<int>>(), argmax);
  const double joined = (na * out[1]["loss"].get<double>() + nb * out[2]["loss"].get<double>()) / (na + nb);
  EXPECT_NEAR(out[0]["loss"].get<double>(), joined, 1e-6);
}

// eval --input: one JSON object on stdout, messages on stderr; bad inputs named, exit 2.
TEST(EvalCheckpoint, PrintsOneJsonObjectAndNamesBadInput) {
  Scratch s;
  ASSERT_EQ(s.memtrain("train --config " + config(s, "c.yaml", 2) + " --run-dir run").exit_code, 0);
  const std::string ckpt = "run/checkpoints/step-00000002";
  s.write("in.json", R"({"input_ids": [[1,2,3,4],[5,6,7,8]], "labels": [[-100,2,-100,9],[63,-100,-100,-100]]})");
  const auto r = s.memtrain("eval --checkpoint " + ckpt + " --input in.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);  // the whole of stdout is one object
  EXPECT_EQ(j["step"], 2);
  EXPECT_EQ(j["labelled_positions"], 3);
  ASSERT_EQ(j["argmax"].size(), 3u);
  // Untrained-scale weights: the loss is near ln(64) = 4.16, the uniform guess.
  EXPECT_NEAR(j["loss"].get<double>(), std::log(64.0), 0.5);
  const auto v = s.memtrain("eval --checkpoint " + ckpt);
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_TRUE(nlohmann::json::parse(v.out).contains("accuracy"));

  struct Case {
    std::string json, message;
  };
  const std::vector<Case> cases = {
      {"{\"labels\": [[1]]}", "bad.json: no \"input_ids\""},
      {"[1, 2]", "bad.json: not a JSON object"},
      {"{\"input_ids\": [[1", "bad.json:1:18: not valid JSON here"},  // the input ends at byte 17
      {"{\"input_ids\": [[1, 2]],\n \"labels\": [[1, 2]],\n ,, \"x\": 1}", "bad.json:3:2: not valid JSON here"},
      {R"({"input_ids": [[1,2,3]], "labels": [[1,2,3e400]]})", "bad.json: a number too large to read"},
      {R"({"input_ids": [[1,64]], "labels": [[1,2]]})", "bad.json: input_ids[0][1] = 64 is outside"},  // names the file
      {R"({"input_ids": [[1,2]], "labels": [[1,1]], "attention_masks": [[1,1]]})",
       "bad.json: unknown key \"attention_masks\"; expected input_ids, labels, attention_mask or token_type_ids"},
      {R"({"input_ids": [[1,2],[3]], "labels": [[1,2],[3,4]]})",
       "bad.json: input_ids[1] has 1 values, input_ids[0] has 2"},
      {R"({"input_ids": [[1,2]], "labels": [[1,1]], "labels": [[-100,-100]]})",
       "bad.json: key \"labels\" appears twice; expected each key once"},
      {R"({"input_ids": [[1,2.5]], "labels": [[1,2]]})", "bad.json: input_ids[0][1] = 2.5 is not an integer"},
      {R"({"input_ids": [[1,64]], "labels": [[1,2]]})", "input_ids[0][1] = 64 is outside the vocabulary [0, 64)"},
      {R"({"input_ids": [[1,2]], "labels": [[-100,-100]]})", "no labelled position (every label is -100)"},
      {R"({"input_ids": [[1,2]], "labels": [[-5,1]]})", "labels[0][0] = -5; expected -100 or an id in [0, 64)"},
      {R"({"input_ids": [[1,2]], "labels": [[1,1]], "attention_mask": [[1,2]]})",
       "attention_mask[0][1] = 2; expected 0 or 1"},
      {R"({"input_ids": [[1,2]], "labels": [[1,1]], "token_type_ids": [[0,2]]})",
       "token_type_ids[0][1] = 2 is outside [0, 2)"},
      {R"({"input_ids": [[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]], "labels": [[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]]})",
       "rows of 17 tokens exceed model.max_position_embeddings = 16"},
      // 100,000 nested lists overflowed the stack (SIGSEGV); refused as they are read.
      {"{\"input_ids\": " + std::string(100000, '[') + std::string(100000, ']') + ", \"labels\": [[1]]}",
       "bad.json: lists nested deeper than rows of ids; expected {\"input_ids\": [[...]], \"labels\": [[...]]}"},
      // A long value is shown shortened, not echoed whole.
      {R"({"input_ids": [[1,2]], "labels": [[")" + std::string(100000, 'x') + R"(",1]]})",
       "bad.json: labels[0][0] = \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... (100002 bytes) is not an integer"}};
  for (const auto& c : cases) {
    s.write("bad.json", c.json);
    const auto b = s.memtrain("eval --checkpoint " + ckpt + " --input bad.json");
    EXPECT_EQ(b.exit_code, 2) << c.json;
    EXPECT_TRUE(contains(b.err, c.message)) << c.json << "\n" << b.err;
    EXPECT_TRUE(b.out.empty()) << c.json;
    EXPECT_LT(b.err.size(), 400u) << "one short message, not the value echoed: " << c.json.substr(0, 80);
  }
  // Not a regular file: a FIFO with no writer would block the read forever, /dev/zero never ends.
  ASSERT_EQ(::mkfifo(s.path("fifo.json").c_str(), 0600), 0);
  for (const std::string& input : {std::string("fifo.json"), std::string("/dev/zero")}) {
    const auto special = s.memtrain("eval --checkpoint " + ckpt + " --input " + input);
    EXPECT_EQ(special.exit_code, 2) << input;
    EXPECT_TRUE(contains(special.err, input + ": is not a regular file (a pipe, device or special file)"))
        << special.err;
    EXPECT_LT(special.err.size(), 300u) << input;
  }
  std::filesystem::create_directories(s.path("dir.json"));
  const auto dir = s.memtrain("eval --checkpoint " + ckpt + " --input dir.json");
  EXPECT_EQ(dir.exit_code, 2);
  EXPECT_TRUE(contains(dir.err, "dir.json: is a directory; expected a JSON file of token ids")) << dir.err;
  // 32-bit ids: a value beyond is refused as written, never wrapped (to -100, unscored).
  s.write("big.json", R"({"input_ids": [[1,2]], "labels": [[1,18446744073709551516]]})");
  const auto big = s.memtrain("eval --checkpoint " + ckpt + " --input big.json");
  EXPECT_EQ(big.exit_code, 2);
  EXPECT_TRUE(contains(big.err, "labels[0][1] = 18446744073709551516 is outside the 32-bit integer range")) << big.err;
  // An export into a checkpoint would break its manifest: refused, nothing written.
  const auto into = s.memtrain("export-hf " + ckpt + " " + ckpt + "/hf");
  EXPECT_EQ(into.exit_code, 2);
  EXPECT_TRUE(contains(into.err, "a checkpoint or checkpoints directory")) << into.err;
  EXPECT_EQ(s.memtrain("checkpoint verify " + ckpt).exit_code, 0);
  const auto missing = s.memtrain("eval --checkpoint nowhere --input in.json");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(contains(missing.err, "eval --checkpoint nowhere: no such directory"));
  // A corrupted checkpoint is refused by eval and export-hf alike (exit 1, the file named).
  std::fstream f(s.path(ckpt + "/model-tp00.safetensors"), std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(-3, std::ios::end);
  f.put('\x7f');
  f.close();
  for (const std::string& command : {"eval --checkpoint " + ckpt + " --input in.json", "export-hf " + ckpt + " out"}) {
    const auto c = s.memtrain(command);
    EXPECT_EQ(c.exit_code, 1) << command;
    EXPECT_TRUE(contains(c.err, "does not verify:\n  model-tp00.safetensors: XXH64 ")) << command << c.err;
  }
  EXPECT_FALSE(fs::exists(s.path("out")));
}

}  // namespace
}  // namespace memtrain::cli
