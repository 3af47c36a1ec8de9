//===- FilterOptions.cpp - The dlfilter's --dlarg options -----------------===//
#include "FilterOptions.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

using namespace llvm;

namespace magic_trace {
namespace {

const char *const KeysHelp =
    "out=FILE, format=NAME, slice-args=compact|full, time=BEGIN,END, "
    "tid=T[,T...], pid=P, symfs=DIR, drop=same-symbol, stitch=0|1, "
    "window=DURATION|all, max-slices=N";

/// A time as perf script prints it (seconds with up to 9 decimals:
/// "969349.987563929") or nanoseconds ("969349987563929ns").
Expected<uint64_t> parseTime(StringRef text) {
  uint64_t value = 0;
  if (text.consume_back("ns")) {
    if (text.getAsInteger(10, value))
      return createStringError("bad time '" + text +
                               "ns' (use nanoseconds "
                               "like 969349987563929ns)");
    return value;
  }
  auto [seconds, fraction] = text.split('.');
  uint64_t secs = 0, frac = 0;
  if (seconds.getAsInteger(10, secs) || fraction.size() > 9 ||
      (!fraction.empty() && fraction.getAsInteger(10, frac)) ||
      secs > UINT64_MAX / 1000000000)
    return createStringError(
        "bad time '" + text +
        "' (use seconds as perf script prints them, like 969349.987563929)");
  for (size_t digits = fraction.size(); digits < 9; ++digits)
    frac *= 10;
  return secs * 1000000000 + frac;
}

Error parseWindow(StringRef value, FilterOptions &options) {
  auto [begin, end] = value.split(',');
  if (!value.contains(','))
    return createStringError("time= wants BEGIN,END (either may be empty), "
                             "not '" +
                             value + "'");
  if (!begin.empty()) {
    Expected<uint64_t> ns = parseTime(begin);
    if (!ns)
      return ns.takeError();
    options.beginNs = *ns;
  }
  if (!end.empty()) {
    Expected<uint64_t> ns = parseTime(end);
    if (!ns)
      return ns.takeError();
    options.endNs = *ns;
  }
  if (options.beginNs > options.endNs)
    return createStringError("time= window ends before it begins ('" + value +
                             "')");
  return Error::success();
}

Error parseTids(StringRef value, FilterOptions &options) {
  SmallVector<StringRef, 8> parts;
  value.split(parts, ',');
  for (StringRef part : parts) {
    uint64_t tid = 0;
    if (part.getAsInteger(10, tid) || tid == 0)
      return createStringError("tid= wants thread ids like tid=4242,4243, "
                               "not '" +
                               value + "'");
    options.tids.insert(tid);
  }
  return Error::success();
}

Error parseOne(StringRef arg, FilterOptions &options, std::string &window,
               std::string &maxSlices) {
  auto [key, value] = arg.split('=');
  if (!arg.contains('=') || value.empty())
    return createStringError("dlarg '" + arg +
                             "' is not KEY=VALUE (keys: " + KeysHelp + ")");
  if (key == "out") {
    options.output = value.str();
  } else if (key == "format") {
    Expected<OutputFormat> format = outputFormatNamed(value);
    if (!format)
      return format.takeError();
    options.format = *format;
  } else if (key == "slice-args") {
    Expected<FxtSliceArgs> sliceArgs = parseFxtSliceArgs(value);
    if (!sliceArgs)
      return sliceArgs.takeError();
    options.fxt.sliceArgs = *sliceArgs;
  } else if (key == "time") {
    return parseWindow(value, options);
  } else if (key == "tid") {
    return parseTids(value, options);
  } else if (key == "pid") {
    if (value.getAsInteger(10, options.pid) || options.pid == 0)
      return createStringError("pid= wants a process id, not '" + value + "'");
  } else if (key == "symfs") {
    options.symfs = value.str();
  } else if (key == "drop") {
    if (value != "same-symbol")
      return createStringError("drop= knows only same-symbol, not '" + value +
                               "'");
    options.dropSameSymbol = true;
  } else if (key == "window") {
    window = value.str();
  } else if (key == "max-slices") {
    maxSlices = value.str();
  } else if (key == "stitch") {
    if (value != "0" && value != "1")
      return createStringError("stitch= wants 0 or 1, not '" + value + "'");
    options.stitch = value == "1";
  } else {
    return createStringError("unknown dlarg '" + key + "' (keys: " + KeysHelp +
                             ")");
  }
  return Error::success();
}

} // namespace

Expected<FilterOptions> parseFilterOptions(ArrayRef<const char *> args) {
  FilterOptions options;
  std::string window, maxSlices;
  for (const char *arg : args)
    if (Error error = parseOne(arg ? arg : "", options, window, maxSlices))
      return std::move(error);
  // The debuggers' --window and --max-slices, named as dlargs.
  if (Error error = parseWindowOptions(window, maxSlices, "", options.window)) {
    std::string message = toString(std::move(error));
    for (auto [option, dlarg] :
         {std::pair<StringRef, StringRef>{"--window all", "window=all"},
          {"--window", "window="},
          {"--max-slices", "max-slices="}})
      for (size_t at; (at = message.find(option.str())) != std::string::npos;)
        message.replace(at, option.size(), dlarg.str());
    return createStringError(message);
  }
  if (options.output.empty()) {
    if (options.dropSameSymbol)
      return options;
    return createStringError("no output: pass --dlarg out=FILE (a .fxt, "
                             ".json, .folded or .txt) or --dlarg "
                             "drop=same-symbol");
  }
  if (!options.format) {
    Expected<OutputFormat> format = outputFormatOf(options.output);
    if (!format)
      return format.takeError();
    options.format = *format;
  }
  return options;
}

std::string symfsFromCommandLine(StringRef cmdline) {
  SmallVector<StringRef, 16> words;
  cmdline.split(words, '\0');
  std::string symfs;
  for (size_t i = 0; i < words.size(); ++i) {
    StringRef word = words[i];
    if (word == "--symfs" && i + 1 < words.size())
      symfs = words[++i].str();
    else if (word.consume_front("--symfs="))
      symfs = word.str();
  }
  return symfs;
}

Error checkItrace(StringRef cmdline) {
  SmallVector<StringRef, 16> words;
  cmdline.split(words, '\0');
  for (StringRef word : words) {
    // perf's --itrace takes its value only after '=' (an optional
    // argument); without one it synthesizes instructions, which finish()
    // reports as no branches.
    if (!word.consume_front("--itrace="))
      continue;
    // Its letters and periods ("i100usge"): no period unit has a 'b'.
    if (!word.contains('b'))
      return createStringError(
          "--itrace=" + word +
          " leaves out some branches, and the filter needs every one (jumps "
          "and tail calls shape the call stack): run perf script --itrace=be");
  }
  return Error::success();
}

} // namespace magic_trace
