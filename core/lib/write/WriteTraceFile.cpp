//===- WriteTraceFile.cpp - Pick a writer by the output file's suffix -----===//
#include "magic_trace/FxtWriter.h"
#include "magic_trace/TraceWriters.h"

#include "ValidatedWriters.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

namespace magic_trace {

llvm::Error writeTraceFile(const TraceModel &model, llvm::StringRef path) {
  enum class Format { Fxt, FxtGz, Json, Folded, Tree } format;
  if (path.ends_with(".fxt.gz"))
    format = Format::FxtGz;
  else if (path.ends_with(".fxt"))
    format = Format::Fxt;
  else if (path.ends_with(".json"))
    format = Format::Json;
  else if (path.ends_with(".folded"))
    format = Format::Folded;
  else if (path.ends_with(".txt"))
    format = Format::Tree;
  else
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "unknown output format for '" + path +
            "' (name the file .fxt, .fxt.gz, .json, .folded or .txt)");
  // Validate before creating the file, so a bad model leaves no file behind;
  // once: the writers below do not check again.
  if (llvm::Error err = validateModel(model))
    return err;
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return llvm::createStringError(ec, "cannot write '" + path +
                                           "': " + ec.message() +
                                           " (check the directory exists and "
                                           "is writable)");
  llvm::Error err = llvm::Error::success();
  switch (format) {
  case Format::Fxt:
  case Format::FxtGz: {
    FxtOptions options;
    options.gzip = format == Format::FxtGz;
    err = writers::writeValidatedFxt(model, os, options);
    break;
  }
  case Format::Json:
    writers::writeValidatedChromeJson(model, os, ChromeJsonOptions());
    break;
  case Format::Folded:
    writers::writeValidatedFolded(model, os, FoldedOptions());
    break;
  case Format::Tree:
    os << renderTree(model);
    break;
  }
  os.close();
  if (err)
    return err;
  if (os.has_error()) {
    std::error_code writeError = os.error();
    os.clear_error();
    return llvm::createStringError(
        writeError, "cannot write '" + path + "': " + writeError.message() +
                        " (check free disk space)");
  }
  return llvm::Error::success();
}

} // namespace magic_trace
