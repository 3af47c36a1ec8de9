//===- FxtRules.cpp - Perfetto's nesting rule and gzip, for tests ---------===//
//
// Beside the reader (FxtReader.h): how Perfetto's UI nests the slices of
// one track (perfettoDepths, from its slice tracker's rules), and gunzip for
// the .gz outputs, through zlib rather than LLVM (the writer's path).
//
//===----------------------------------------------------------------------===//
#include "FxtReader.h"

#include "llvm/Support/FormatVariadic.h"

#include <zlib.h>

namespace magic_trace::fxt_test {

std::vector<int> perfettoDepths(llvm::ArrayRef<SliceSpan> slices) {
  std::vector<int> depths;
  std::vector<SliceSpan> open;
  for (const SliceSpan &slice : slices) {
    bool dropped = false;
    for (size_t i = open.size(); i-- > 0;) {
      uint64_t end = open[i].begin + open[i].duration;
      bool endsBefore = end < slice.begin;
      bool endsAtBegin =
          end == slice.begin && !(open[i].duration == 0 && slice.duration == 0);
      if (endsBefore || endsAtBegin) {
        // Perfetto pops the top of the stack, whichever slice closed.
        open.pop_back();
        continue;
      }
      if (slice.begin < end && slice.begin + slice.duration > end) {
        dropped = true;
        break;
      }
    }
    if (dropped) {
      depths.push_back(-1);
      continue;
    }
    depths.push_back(int(open.size()));
    open.push_back(slice);
  }
  return depths;
}

llvm::Expected<std::vector<uint8_t>> gunzip(llvm::ArrayRef<uint8_t> bytes) {
  z_stream stream = {};
  // 16 + MAX_WBITS: expect a gzip header and trailer.
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "zlib could not start inflating");
  std::vector<uint8_t> out;
  stream.next_in = const_cast<Bytef *>(bytes.data());
  stream.avail_in = bytes.size();
  int status = Z_OK;
  while (status == Z_OK) {
    size_t used = out.size();
    out.resize(used + (1 << 20));
    stream.next_out = out.data() + used;
    stream.avail_out = 1 << 20;
    status = inflate(&stream, Z_NO_FLUSH);
    out.resize(used + (1 << 20) - stream.avail_out);
    if (status == Z_BUF_ERROR && stream.avail_in == 0)
      break;
  }
  inflateEnd(&stream);
  if (status != Z_STREAM_END)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "not a complete gzip stream (zlib status " +
                                       llvm::Twine(status) + ")");
  if (stream.avail_in != 0)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "trailing bytes after the gzip member");
  return out;
}

} // namespace magic_trace::fxt_test
