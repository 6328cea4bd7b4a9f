#include "models/parameter_io.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>

#include "runtime/core/errors.hpp"
#include "tests/models/bert_test_util.hpp"

namespace memtrain::models {
namespace {

using memtrain::testing::BertFixture;

struct TinyModel {
  TinyModel() : ctx(std::make_shared<memtrain::testing::TestAllocator>()), model(BertFixture::get().config, ctx) {}
  core::Context ctx;
  BertForMaskedLM model;
};

// The fixture's weights were written by PyTorch; loading them and writing them back through a
// file must reproduce every byte of those arrays.
TEST(ParameterIo, LoadsPyTorchWeightsAndRoundTripsThroughAFile) {
  const auto& f = BertFixture::get();
  TinyModel a;
  std::map<std::string, core::HostArray> weights;
  for (const auto& p : a.model.parameters()) weights.emplace(p.name, f.arrays.at(p.name));
  load_parameters(a.model.parameters(), weights, "fixture");

  const std::string path = ::testing::TempDir() + "memtrain_weights_" + std::to_string(::getpid()) + ".safetensors";
  core::write_safetensors(path, parameters_to_arrays(a.model.parameters()));
  TinyModel b;
  load_parameters(b.model.parameters(), core::read_safetensors(path), path);
  for (const auto& p : b.model.parameters()) {
    EXPECT_EQ(parameters_to_arrays(b.model.parameters()).at(p.name).data, f.arrays.at(p.name).data) << p.name;
  }
}

void expect_load_error(std::map<std::string, core::HostArray> arrays, const std::string& needle) {
  TinyModel m;
  try {
    load_parameters(m.model.parameters(), arrays, "ckpt.safetensors");
    ADD_FAILURE() << "no error; expected " << needle;
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("ckpt.safetensors"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

std::map<std::string, core::HostArray> good_arrays() {
  TinyModel m;
  m.model.init_parameters(1);
  return parameters_to_arrays(m.model.parameters());
}

TEST(ParameterIo, MissingTensorIsNamed) {
  auto a = good_arrays();
  a.erase("cls.predictions.bias");
  expect_load_error(a, "no tensor named cls.predictions.bias");
}

TEST(ParameterIo, WrongShapeIsNamedWithBothShapes) {
  auto a = good_arrays();
  a["cls.predictions.bias"] = core::host_array_f32(std::vector<float>(63).data(), {63});
  expect_load_error(a, "cls.predictions.bias has shape [63]; the model expects [64]");
}

TEST(ParameterIo, UnexpectedTensorIsAnError) {
  auto a = good_arrays();
  a["bert.pooler.dense.bias"] = core::host_array_f32(std::vector<float>(32).data(), {32});
  expect_load_error(a, "bert.pooler.dense.bias matches no parameter");
}

TEST(ParameterIo, IntegerTensorIsRejected) {
  auto a = good_arrays();
  a["cls.predictions.bias"] = core::host_array_i32(std::vector<std::int32_t>(64).data(), {64});
  expect_load_error(a, "dtype I32");
}

}  // namespace
}  // namespace memtrain::models
