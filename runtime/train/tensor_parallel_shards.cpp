#include "runtime/train/tensor_parallel_shards.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "runtime/core/errors.hpp"
#include "runtime/core/printable.hpp"
#include "runtime/core/op_profile.hpp"
#include "runtime/train/checkpoint_saver.hpp"

namespace memtrain::train {

using core::shape_text;
namespace {

namespace fs = std::filesystem;

struct Layout {
  int dim = -1;  // 0 or 1
  std::int64_t offset = 0, full_extent = 0, valid_extent = 0;
};

std::map<std::string, Layout> layouts_of(const std::map<std::string, std::string>& metadata, const std::string& file) {
  std::map<std::string, Layout> out;
  const auto it = metadata.find("memtrain_shards");
  if (it == metadata.end()) return out;
  try {
    const auto j = nlohmann::json::parse(it->second);
    for (const auto& [name, l] : j.items()) {
      const std::string sharding = l.at("sharding").get<std::string>();
      Layout layout{sharding == "dim0"   ? 0
                    : sharding == "dim1" ? 1
                                         : -1,
                    l.at("offset").get<std::int64_t>(), l.at("full_extent").get<std::int64_t>(),
                    l.at("valid_extent").get<std::int64_t>()};
      if (layout.dim < 0 || layout.valid_extent < 0 || layout.valid_extent > layout.full_extent) {
        throw RuntimeError(file + ": tensor " + name + " has the shard layout " + l.dump() +
                           "; expected sharding dim0 or dim1 and 0 <= valid_extent <= full_extent");
      }
      out[name] = layout;
    }
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeError(file + ": metadata memtrain_shards is not a shard layout (" + json_error_text(e.what()) + ")");
  }
  return out;
}

// The parameter whose layout a tensor follows: P for P.exp_avg, P.exp_avg_sq and P.master.
std::string parameter_of(const std::string& name) {
  for (const char* suffix : {".exp_avg_sq", ".exp_avg", ".master"}) {
    const std::size_t n = std::strlen(suffix);
    if (name.size() > n && name.compare(name.size() - n, n, suffix) == 0) return name.substr(0, name.size() - n);
  }
  return name;
}

// rows x extent x inner: the element blocks a dim0 or dim1 shard is made of.
struct Blocks {
  std::int64_t outer = 1, inner = 1;
};
Blocks blocks_of(const std::vector<std::int64_t>& shape, int dim) {
  Blocks b;
  b.outer = dim == 0 ? 1 : shape[0];
  for (std::size_t d = static_cast<std::size_t>(dim) + 1; d < shape.size(); ++d) b.inner *= shape[d];
  return b;
}

using Layouts = std::vector<std::map<std::string, Layout>>;

// The tensors of file_name(0 .. tp-1) merged; with `own_layouts` the layouts are read from
// these files' metadata into `layouts`, else `layouts` (the model files') are used.
std::map<std::string, core::HostArray> merge_files(const std::string& dir, int tp,
                                                   const std::function<std::string(int)>& file_name, bool own_layouts,
                                                   Layouts& layouts) {
  std::vector<std::map<std::string, core::HostArray>> shards(static_cast<std::size_t>(tp));
  std::vector<std::string> files(static_cast<std::size_t>(tp));
  if (own_layouts) layouts.assign(static_cast<std::size_t>(tp), {});
  for (int r = 0; r < tp; ++r) {
    files[r] = (fs::path(dir) / file_name(r)).string();
    std::map<std::string, std::string> metadata;
    shards[r] = core::read_safetensors(files[r], &metadata);
    if (own_layouts) layouts[r] = layouts_of(metadata, files[r]);
    if (shards[r].size() != shards[0].size()) {
      throw RuntimeError(files[r] + ": " + std::to_string(shards[r].size()) + " tensors, rank 0 has " +
                         std::to_string(shards[0].size()));
    }
  }
  std::map<std::string, core::HostArray> merged;
  for (const auto& [name, first] : shards[0]) {
    const auto l0 = layouts[0].find(parameter_of(name));
    if (l0 == layouts[0].end()) {  // replicated
      merged[name] = first;
      continue;
    }
    const Layout& layout = l0->second;
    const int dim = layout.dim;
    if (static_cast<int>(first.shape.size()) <= dim) {
      throw RuntimeError(files[0] + ": tensor " + name + " is sharded along dim" + std::to_string(dim) +
                         " that its shape " + shape_text(first.shape) + " does not have");
    }
    const std::size_t elem = core::safetensors_dtype_size(first.dtype);
    const Blocks b = blocks_of(first.shape, dim);
    core::HostArray out{first.dtype, first.shape, {}};
    out.shape[static_cast<std::size_t>(dim)] = layout.valid_extent;
    out.data.resize(static_cast<std::size_t>(out.numel()) * elem);
    for (int r = 0; r < tp; ++r) {
      const auto a = shards[r].find(name);
      const auto l = layouts[r].find(parameter_of(name));
      if (a == shards[r].end() || l == layouts[r].end() || a->second.dtype != first.dtype ||
          a->second.shape.size() != first.shape.size()) {
        throw RuntimeError(files[r] + ": tensor " + name + " is missing, unsharded or of another dtype or rank");
      }
      const std::int64_t extent = a->second.shape[static_cast<std::size_t>(dim)];
      const std::int64_t offset = l->second.offset;
      if (offset < 0 || offset + extent > layout.full_extent || blocks_of(a->second.shape, dim).outer != b.outer ||
          blocks_of(a->second.shape, dim).inner != b.inner) {
        throw RuntimeError(files[r] + ": tensor " + name + " shard " + shape_text(a->second.shape) + " at [" +
                           std::to_string(offset) + ", " + std::to_string(offset + extent) +
                           ") does not fit its full extent " + std::to_string(layout.full_extent) +
                           " or rank 0's shape " + shape_text(first.shape));
      }
      // Only indices below valid_extent are kept: the rest is padding.
      const std::int64_t keep = std::max<std::int64_t>(0, std::min(extent, layout.valid_extent - offset));
      for (std::int64_t o = 0; o < b.outer; ++o) {
        const std::byte* src = a->second.data.data() + static_cast<std::size_t>(o * extent * b.inner) * elem;
        std::byte* dst =
            out.data.data() + static_cast<std::size_t>((o * layout.valid_extent + offset) * b.inner) * elem;
        if (keep > 0) std::memcpy(dst, src, static_cast<std::size_t>(keep * b.inner) * elem);
      }
    }
    merged[name] = std::move(out);
  }
  return merged;
}

}  // namespace

MergedCheckpoint merge_tensor_parallel_checkpoint(const std::string& dir, int tp, bool with_optimizer) {
  MergedCheckpoint m;
  Layouts layouts;
  m.model = merge_files(
      dir, tp, [](int r) { return model_file_name(r); }, true, layouts);
  if (with_optimizer) {
    m.optimizer = merge_files(
        dir, tp, [](int r) { return optimizer_file_name(r); }, false, layouts);
  }
  return m;
}

void copy_shard_into(core::Tensor& t, const models::ShardSpec& spec, const core::HostArray& whole,
                     const std::string& name, const std::string& source) {
  const std::string dtype = core::dtype_name(t.dtype());
  std::vector<std::int64_t> expected = t.shape();
  const int dim = spec.sharding == models::Sharding::dim0 ? 0 : spec.sharding == models::Sharding::dim1 ? 1 : -1;
  if (dim >= 0) expected[static_cast<std::size_t>(dim)] = spec.valid_extent;
  if (whole.dtype != dtype || whole.shape != expected) {
    throw RuntimeError(source + ": tensor " + name + " is " + whole.dtype + " " + shape_text(whole.shape) +
                       ", the model's shard needs " + dtype + " " + shape_text(expected) + " unsharded");
  }
  if (t.nbytes() == 0) return;
  if (t.device() != kernels::Device::cpu) {
    throw RuntimeError(source + ": resharding " + name + " is host code; a GPU run has no tensor parallelism yet");
  }
  auto* dst = t.dtype() == core::DType::f32   ? reinterpret_cast<std::byte*>(t.data<float>())
              : t.dtype() == core::DType::i32 ? reinterpret_cast<std::byte*>(t.data<std::int32_t>())
                                              : reinterpret_cast<std::byte*>(t.data<std::uint16_t>());
  if (dim < 0) {
    std::memcpy(dst, whole.data.data(), t.nbytes());
    return;
  }
  const std::size_t elem = core::dtype_size(t.dtype());
  const Blocks b = blocks_of(t.shape(), dim);
  const std::int64_t extent = t.shape()[static_cast<std::size_t>(dim)];
  const std::int64_t keep = std::clamp<std::int64_t>(spec.valid_extent - spec.offset, 0, extent);
  for (std::int64_t o = 0; o < b.outer; ++o) {
    std::byte* row = dst + static_cast<std::size_t>(o * extent * b.inner) * elem;
    const std::byte* src =
        whole.data.data() + static_cast<std::size_t>((o * spec.valid_extent + spec.offset) * b.inner) * elem;
    if (keep > 0) std::memcpy(row, src, static_cast<std::size_t>(keep * b.inner) * elem);
    std::memset(row + static_cast<std::size_t>(keep * b.inner) * elem, 0,
                static_cast<std::size_t>((extent - keep) * b.inner) * elem);
  }
}

}  // namespace memtrain::train
