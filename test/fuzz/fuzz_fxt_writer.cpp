// Fuzzes the FXT writer: the input drives a model (thread count, names of any
// length and bytes, frame shapes); whatever the writer accepts must read back
// through the spec-based reader without a single error.
#include "FuzzSupport.h"
#include "FxtReader.h"
#include "magic_trace/FxtWriter.h"
#include "magic_trace/TraceModel.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>

using namespace magic_trace;

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  keepFreedMemory();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  InputStream in{data, size};
  TraceModel model;
  model.pid = in.u16();
  model.processName = in.text();
  unsigned threads = in.byte() % 8 + 1;
  if (in.byte() == 0xff)
    threads = 300 + in.byte(); // Past the 255-entry thread table.
  for (unsigned t = 0; t < threads; ++t) {
    ThreadModel thread;
    thread.tid = 1000 + t;
    thread.name = in.text();
    Segment segment;
    uint64_t now = in.u16();
    segment.begin = now;
    std::vector<uint32_t> open;
    unsigned frames = in.byte() % 32;
    for (unsigned f = 0; f < frames; ++f) {
      uint8_t op = in.byte();
      now += op % 17;
      if ((op & 0x80) && !open.empty()) {
        segment.frames.setEnd(open.back(), now);
        open.pop_back();
        continue;
      }
      FrameSite site;
      site.name = model.strings.intern(in.text());
      site.file = model.strings.intern(in.text());
      site.line = in.u16();
      site.address = in.u16();
      site.kind = static_cast<FrameKind>(op % 6);
      Frame frame;
      frame.begin = now;
      frame.site = thread.sites.intern(site);
      frame.parent = open.empty() ? Frame::NoParent : open.back();
      open.push_back(uint32_t(segment.frames.size()));
      segment.frames.push_back(frame);
    }
    now += 1;
    for (uint32_t index : open)
      segment.frames.setEnd(index, now);
    segment.end = now;
    thread.segments.push_back(std::move(segment));
    model.threads.push_back(std::move(thread));
  }
  if (llvm::Error invalid = validateModel(model)) {
    llvm::consumeError(std::move(invalid));
    return 0;
  }
  std::string bytes;
  llvm::raw_string_ostream os(bytes);
  if (llvm::Error error = writeFxt(model, os)) {
    llvm::consumeError(std::move(error));
    return 0;
  }
  os.flush();
  auto trace = fxt_test::readFxt(llvm::ArrayRef<uint8_t>(
      reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()));
  if (!trace) {
    llvm::errs() << "written FXT does not validate: "
                 << llvm::toString(trace.takeError()) << "\n";
    abort();
  }
  return 0;
}
