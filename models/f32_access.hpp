#pragma once
// Float views of tensors, so that the fp32 kernels serve every storage dtype (issue 5, mixed
// precision on CPU): Note [fp32 arithmetic on 16-bit storage].
#include <cstdint>
#include <span>

#include "kernels/op_context.hpp"
#include "kernels/ops/half_convert.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/tensor.hpp"
#include "runtime/core/workspace.hpp"

namespace memtrain::models {

// Note [fp32 arithmetic on 16-bit storage]
// With compute_dtype f16/bf16, weights, activations and gradients are STORED in 16 bits (the
// allocator sees 2 bytes per element) while the CPU kernels compute in float, as a GPU's
// tensor cores accumulate 16-bit products in fp32. Each op converts its 16-bit inputs to float
// in a Workspace slot (Note [Workspace outside the allocator]), runs the fp32 kernel, and
// rounds its outputs back to 16 bits to nearest even. The views below do that and nothing
// when the tensor is f32: then they hand out the tensor's own pointer, so the fp32 path runs
// the same kernels on the same memory in the same order, bitwise as before.
// An op keeps intermediate results in a write view until it has finished with them (e.g. the
// output projection, dropout and residual add are one view, rounded once), as a fused GPU
// kernel would. In a dry run nothing is read, written or converted: a view of a 16-bit
// tensor is then null, one of an f32 tensor its (untouchable) pointer, as before.

// Note [Row views of embedding tables]
// An embedding lookup reads, and its backward writes, only the rows of the batch's tokens: at
// most B*T of the word table's 30,522 rows. Converting the whole 16-bit table to float for it,
// as a whole view does, moved 23.4 M elements each way three times a step for BERT's table
// (the lookup, and the gradient's read and write-back in backward): about a third of all the
// 16-bit conversions of a bf16 step (issue 15). A row view converts and rounds back the
// listed rows only. The result is bitwise that of a whole view: a row the kernel does not
// touch would have been converted and rounded back unchanged (a 16-bit value survives the
// round trip through float exactly), and a touched row is rounded once, after the kernel, as
// before.

// Note [Views rounded in place]
// Many 16-bit activations are read back by the very next op: q, k and v by the attention core
// right after their projections, the context by the output projection, a residual sum by its
// LayerNorm, dcontext by the core's backward, the core's dq, dk and dv by the projections'
// backward, the MLM logits by the cross-entropy and their gradient by the decoder's backward.
// With plain views each is rounded into 16 bits by one op (commit) and converted back into
// another workspace slot by the next, a second pass over memory that has gone cold, to get
// floats that differ from the first op's only by the rounding. round_in_place() rounds the
// floats once, storing the 16 bits and overwriting each float with its rounded value in the
// same pass, and the caller hands those floats to the next op (a GemmInput's view, a kernel's
// pointer). The next op then reads exactly the values a fresh read view of the tensor would
// give, so the bits of every result are unchanged; one conversion of each such tensor is gone
// (issue 15: fp16's conversions fell from 26-30 to 20-21 ms of a bench-bert step on the second
// machine). The price is workspace: the slot is held from the first op to the last reader
// (the logits' from the loss to the head's backward), where a fresh read view's would have
// lived for the reader alone; the allocator's trace is unchanged. A rounded view writes nothing
// more into its tensor, so it may outlive it; the callers drop it with or before the tensor.

// How a view uses its tensor.
enum class F32Access {
  read,        // converted in; never written back
  write,       // contents undefined on entry; rounded back on commit / destruction
  read_write,  // converted in and rounded back (accumulation: gradients +=)
  scratch,     // contents undefined, never written back (kernel scratch shaped like the tensor)
  zeroed,      // contents zero on entry (the tensor's own memory is zeroed when f32); rounded
               // back as write. For gradients accumulated from zero: Note [Zeroed views].
};

// Note [Zeroed views]
// Backward passes start many input gradients at zero and accumulate into them (the residual
// branch, then each projection's share). Made as Tensor::zeros and viewed read_write, a 16-bit
// one is zero-filled in 16 bits, then converted to float, 6 bytes an element to read back
// zeros; a zeroed view of an empty tensor writes the float zeros alone (4 bytes an element).
// For an f32 tensor it zeroes the tensor itself, exactly as Tensor::zeros did.

// True for the 16-bit floating-point dtypes (f16, bf16).
bool is_half(core::DType dtype);
// The kernels' name of a 16-bit dtype. Throws memtrain::RuntimeError for f32 / i32.
kernels::HalfFormat half_format(core::DType dtype);

// A float view of an f32, f16 or bf16 tensor (RAII; see the Note above). Movable only.
// An undefined tensor gives a null view. Throws memtrain::RuntimeError for an i32 tensor.
// The view does NOT hold the tensor's storage (so that taking a view never changes when a
// tensor is freed, and the allocation trace is the same with and without views): the caller
// keeps the tensor alive until the view is committed or destroyed.
class F32View {
 public:
  F32View() = default;
  F32View(core::Context& ctx, const core::Tensor& t, F32Access access);
  // A view of the rows `rows` of t (indices into its first dimension) only: Note [Row views of
  // embedding tables]. The other rows of the floats are unspecified and never written back, so
  // the kernel may touch only the listed rows. A row may be listed more than once; indices
  // outside [0, rows of t) are skipped (the kernel reports them). `rows` must outlive the view.
  // An f32 tensor's view is its own memory, as above.
  F32View(core::Context& ctx, const core::Tensor& t, F32Access access, std::span<const std::int32_t> rows);
  F32View(F32View&& o) noexcept;
  F32View& operator=(F32View&& o) noexcept;
  F32View(const F32View&) = delete;
  F32View& operator=(const F32View&) = delete;
  // Commits; a conversion that fails here (a CUDA error surfacing at this launch on a GPU) is
  // dropped rather than thrown from a destructor: the error is sticky and the next checked call
  // of the step reports it.
  ~F32View();

  // numel() floats: the tensor's memory (f32) or the converted copy (16-bit).
  float* get() const { return data_; }
  // For write / read_write views of 16-bit tensors: rounds the floats into the tensor now and
  // returns the workspace slot. The view is null afterwards. No-op for the other cases.
  void commit();
  // For write / read_write / zeroed views of 16-bit tensors: rounds the floats into the tensor
  // now, as commit() does, and leaves each float equal to its rounded value (Note [Views
  // rounded in place]). The view then holds exactly what a read view of the tensor would
  // convert in, and acts as `then`: a read view (nothing more is written back), or a write view
  // whose floats the caller overwrites and which rounds them again on commit (the loss writes
  // the logits' gradient over them). No-op for the other cases (an f32 tensor's view is its own
  // memory). Throws memtrain::RuntimeError for a row view, std::invalid_argument for a `then`
  // other than read or write.
  void round_in_place(F32Access then = F32Access::read);

 private:
  // Converts [the listed rows of] half_ into data_ (to_f32) or back (!to_f32).
  void convert(bool to_f32);

  std::uint16_t* half_ = nullptr;  // the 16-bit tensor's memory when converted, else null
  std::int64_t numel_ = 0;
  std::span<const std::int32_t> rows_;  // a row view's rows; empty for a whole view
  std::int64_t row_length_ = 0;         // elements per row of a row view
  bool row_view_ = false;
  kernels::HalfFormat format_ = kernels::HalfFormat::f16;
  F32Access access_ = F32Access::read;
  core::Workspace::Lease lease_;  // held only for a converted 16-bit tensor
  float* data_ = nullptr;
  core::OpProfile* profile_ = nullptr;  // the context's, for timing the conversions
  kernels::OpContext kc_;               // the context's device: where the conversions run
};

// Shorthands naming the access at the call site: read_f32(ctx, x).get() is a const float*.
class F32Read {
 public:
  F32Read(core::Context& ctx, const core::Tensor& t) : view_(ctx, t, F32Access::read) {}
  const float* get() const { return view_.get(); }

 private:
  F32View view_;
};
inline F32Read read_f32(core::Context& ctx, const core::Tensor& t) { return F32Read(ctx, t); }
inline F32View write_f32(core::Context& ctx, const core::Tensor& t) { return F32View(ctx, t, F32Access::write); }
inline F32View update_f32(core::Context& ctx, const core::Tensor& t) { return F32View(ctx, t, F32Access::read_write); }
inline F32View scratch_f32(core::Context& ctx, const core::Tensor& t) { return F32View(ctx, t, F32Access::scratch); }
inline F32View zeroed_f32(core::Context& ctx, const core::Tensor& t) { return F32View(ctx, t, F32Access::zeroed); }
// A parameter gradient's view for a layer's whole contribution (every element written), added
// to what it holds: read_write; when `grads_zero` (PassState) says it holds zeros, a 16-bit
// gradient gets a zeroed view instead (bitwise the same sum, without converting the zeros in:
// Note [Zeroed views]), and an f32 one is its own, already zero, memory as before.
inline F32View gradient_f32(core::Context& ctx, const core::Tensor& grad, bool grads_zero) {
  return F32View(ctx, grad, grads_zero && is_half(grad.dtype()) ? F32Access::zeroed : F32Access::read_write);
}

// Rounds src [n] into the 16-bit or f32 tensor dst (numel n): a plain copy when dst is f32.
// Used to write a parameter's value from its f32 master. No-op in a dry run. Throws
// memtrain::RuntimeError when dst is not f32/f16/bf16 or its numel differs from n.
void store_f32(core::Tensor& dst, const float* src, std::int64_t n);
// Converts the f32/f16/bf16 tensor src into out [src.numel()]. No-op in a dry run.
void load_f32(float* out, const core::Tensor& src);

// The first byte of a defined tensor of any dtype, for copies that move elements without
// converting them (gathers, concatenations). Throws memtrain::RuntimeError when undefined.
void* raw_bytes(const core::Tensor& t);

}  // namespace memtrain::models
