//===- Frames.h - Values as raw frames between Python and the runtime -*- C++ -*-===//
//
// monarch._actors moves every Python value as a list of frames: frame 0 a
// pickle, the others its out-of-band buffers (pickle protocol 5), each one
// Blob payload on the wire (monarch._src.common.pickling). toPy exposes
// received frames through the buffer protocol without a copy; fromPy copies
// Python buffers into Blobs once, before the GIL is released.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_FRONTEND_CSRC_FRAMES_H
#define MONARCH_FRONTEND_CSRC_FRAMES_H

#include "monarch/runtime/actor/Value.h"

#include <pybind11/pybind11.h>

#include <vector>

namespace monarch::python {

using Frames = std::vector<Blob>;

/// A received frame, exposed to Python through the buffer protocol (no copy;
/// memoryviews of it keep it alive). Bound as monarch._actors.Frame.
struct Frame {
  Buffer buffer;
};

inline pybind11::list toPy(const Frames &frames) {
  pybind11::list out;
  for (const auto &f : frames)
    out.append(pybind11::cast(Frame{f.buffer}));
  return out;
}

inline Frames fromPy(const pybind11::sequence &frames) {
  Frames out;
  out.reserve(frames.size());
  for (auto item : frames) {
    pybind11::buffer buf = pybind11::reinterpret_borrow<pybind11::buffer>(item);
    pybind11::buffer_info info = buf.request();
    out.push_back(Blob{Buffer::copyOf(
        info.ptr, static_cast<size_t>(info.size * info.itemsize))});
  }
  return out;
}

/// Binds the ports of Channel.open() and Port.send (Ports.cpp).
void bindPorts(pybind11::module_ &m);

} // namespace monarch::python

#endif // MONARCH_FRONTEND_CSRC_FRAMES_H
