//===- Gzip.cpp - gzip streams for the writers' .gz outputs ---------------===//
//
// RFC 1952 gzip around LLVM's zlib (RFC 1950) deflate stream: what the
// .fxt.gz and .json.gz outputs are (WriteTraceFile.cpp's format table).
//
//===----------------------------------------------------------------------===//
#include "magic_trace/FxtWriter.h"

#include "llvm/Support/CRC.h"
#include "llvm/Support/Compression.h"
#include "llvm/Support/Endian.h"

namespace magic_trace {

llvm::Error gzipUnavailableError() {
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "gzip output needs zlib, which this LLVM was built without (write .fxt "
      "instead of .fxt.gz)");
}

bool fxtGzipAvailable() { return llvm::compression::zlib::isAvailable(); }

llvm::Error gzipCompress(llvm::ArrayRef<uint8_t> data,
                         llvm::SmallVectorImpl<uint8_t> &out) {
  if (!llvm::compression::zlib::isAvailable())
    return gzipUnavailableError();
  // zlib's format (RFC 1950) is a 2-byte header, a raw deflate stream and an
  // Adler-32 trailer; gzip (RFC 1952) wraps the same deflate stream in its
  // own header and a CRC-32 + size trailer.
  llvm::SmallVector<uint8_t, 0> zlibStream;
  llvm::compression::zlib::compress(
      data, zlibStream, llvm::compression::zlib::BestSpeedCompression);
  if (zlibStream.size() < 6 || (zlibStream[1] & 0x20) != 0)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "zlib produced an unexpected stream (report "
                                   "this bug)");
  out.clear();
  // ID1 ID2, CM = deflate, FLG = 0, MTIME = 0, XFL = 0, OS = 3 (Unix).
  const uint8_t header[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
  out.append(header, header + 10);
  out.append(zlibStream.begin() + 2, zlibStream.end() - 4);
  uint8_t trailer[8];
  llvm::support::endian::write32le(trailer, llvm::crc32(data));
  llvm::support::endian::write32le(trailer + 4, uint32_t(data.size()));
  out.append(trailer, trailer + 8);
  return llvm::Error::success();
}

} // namespace magic_trace
