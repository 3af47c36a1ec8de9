//===- WriteTraceFile.cpp - The output format table and writeTrace --------===//
//
// The one place that maps a format's name or a file's suffix to a writer:
// every host (magic-trace-decode -o, snapshot, snapshot-on, save) writes a
// trace file through writeTrace, so a new format is one row of kFormats.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/FxtWriter.h"
#include "magic_trace/OutputFiles.h"
#include "magic_trace/TraceWriters.h"

#include "ValidatedWriters.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

namespace magic_trace {
namespace {

/// The text `write` makes, gzip-compressed when `gzip`.
template <typename Write>
llvm::Error writeText(llvm::raw_ostream &os, bool gzip, Write write) {
  if (!gzip) {
    write(os);
    return llvm::Error::success();
  }
  llvm::SmallString<0> text;
  llvm::raw_svector_ostream buffer(text);
  write(buffer);
  llvm::SmallVector<uint8_t, 0> packed;
  if (llvm::Error err = gzipCompress(llvm::arrayRefFromStringRef(text), packed))
    return err;
  os.write(reinterpret_cast<const char *>(packed.data()), packed.size());
  return llvm::Error::success();
}

// The writers of the rows, for a model validateModel passed.

llvm::Error writeFxtRow(const TraceModel &model, llvm::raw_ostream &os,
                        const FxtOptions &fxt, bool gzip) {
  FxtOptions options = fxt;
  options.gzip = gzip; // The FXT writer compresses as it goes.
  return writers::writeValidatedFxt(model, os, options);
}
llvm::Error writeJsonRow(const TraceModel &model, llvm::raw_ostream &os,
                         const FxtOptions &, bool gzip) {
  return writeText(os, gzip, [&](llvm::raw_ostream &out) {
    writers::writeValidatedChromeJson(model, out, ChromeJsonOptions());
  });
}
llvm::Error writeFoldedRow(const TraceModel &model, llvm::raw_ostream &os,
                           const FxtOptions &, bool gzip) {
  return writeText(os, gzip, [&](llvm::raw_ostream &out) {
    writers::writeValidatedFolded(model, out, FoldedOptions());
  });
}
llvm::Error writeTextRow(const TraceModel &model, llvm::raw_ostream &os,
                         const FxtOptions &, bool gzip) {
  return writeText(os, gzip,
                   [&](llvm::raw_ostream &out) { out << renderTree(model); });
}

/// Every format. Perfetto and chrome://tracing open gzip-compressed FXT and
/// JSON as they are; folded stacks and the text tree are read by tools and
/// people that want plain text, so they have no .gz row.
const OutputFormat kFormats[] = {
    {"fxt", ".fxt", writeFxtRow, false},
    {"fxt.gz", ".fxt.gz", writeFxtRow, true},
    {"json", ".json", writeJsonRow, false},
    {"json.gz", ".json.gz", writeJsonRow, true},
    {"folded", ".folded", writeFoldedRow, false},
    {"text", ".txt", writeTextRow, false},
};

/// "a, b, c or d" of one column of the table.
std::string listOf(llvm::StringRef OutputFormat::*column) {
  std::string text;
  for (size_t i = 0; i < std::size(kFormats); ++i) {
    if (i)
      text += i + 1 == std::size(kFormats) ? " or " : ", ";
    text += (kFormats[i].*column).str();
  }
  return text;
}

} // namespace

llvm::ArrayRef<OutputFormat> outputFormats() { return kFormats; }

llvm::Expected<OutputFormat> outputFormatNamed(llvm::StringRef name) {
  for (const OutputFormat &format : kFormats)
    if (format.name == name)
      return format;
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "unknown output format '" + name + "' (use " +
                                     listOf(&OutputFormat::name) + ")");
}

llvm::Expected<OutputFormat> outputFormatOf(llvm::StringRef path) {
  const OutputFormat *found = nullptr;
  for (const OutputFormat &format : kFormats)
    if (path.ends_with(format.suffix) &&
        (!found || format.suffix.size() > found->suffix.size()))
      found = &format;
  if (found)
    return *found;
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "unknown output format for '" + path +
                                     "' (name the file " +
                                     listOf(&OutputFormat::suffix) + ")");
}

llvm::Error writeTrace(const TraceModel &model, OutputFile &file,
                       const OutputFormat &format, const FxtOptions &fxt) {
  if (llvm::Error err = validateModel(model))
    return err;
  if (llvm::Error err = format.write(model, file.os(), fxt, format.gzip))
    return err;
  return file.commit();
}

llvm::Error writeTrace(const TraceModel &model, llvm::StringRef path,
                       const OutputFormat &format, const FxtOptions &fxt) {
  // Validate before creating the file, so a bad model leaves no file behind;
  // once: the writers below do not check again.
  if (llvm::Error err = validateModel(model))
    return err;
  llvm::Expected<std::unique_ptr<OutputFile>> file = OutputFile::create(path);
  if (!file)
    return file.takeError();
  if (llvm::Error err = format.write(model, (*file)->os(), fxt, format.gzip))
    return err;
  return (*file)->commit();
}

llvm::Error writeTraceFile(const TraceModel &model, llvm::StringRef path,
                           const FxtOptions &fxt) {
  llvm::Expected<OutputFormat> format = outputFormatOf(path);
  if (!format)
    return format.takeError();
  return writeTrace(model, path, *format, fxt);
}

} // namespace magic_trace
