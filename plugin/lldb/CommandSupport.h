//===- CommandSupport.h - What every magic-trace command uses --*- C++ -*-===//
//
// Error text, option values (sizes, counts), the attached session, progress
// lines and help registration, shared by the command groups.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PLUGIN_COMMANDSUPPORT_H
#define MAGIC_TRACE_PLUGIN_COMMANDSUPPORT_H

#include "CommandArgs.h"

#include "magic_trace/PacketWriter.h"
#include "magic_trace/Pipeline.h"
#include "magic_trace/SizeOptions.h"

#include "lldb/API/SBCommandInterpreter.h"
#include "lldb/API/SBCommandReturnObject.h"
#include "lldb/API/SBDebugger.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <string>

namespace magic_trace::plugin {

struct Session;

inline llvm::Error error(const char *format) {
  return llvm::createStringError("%s", format);
}
template <typename... Ts> llvm::Error error(const char *format, Ts... values) {
  return llvm::createStringError(format, values...);
}

/// Appends `text` (if any) and reports success; returns true for DoExecute.
bool succeed(lldb::SBCommandReturnObject &result, llvm::StringRef text);

std::string jsonText(const llvm::json::Value &value);

/// A --timer-resolution value: low, normal or high.
llvm::Expected<TimerResolution> parseTimer(llvm::StringRef text);
/// --window, --max-slices and --max-trace (WindowOptions in Pipeline.h),
/// as every command that decodes takes them: list kWindowOption,
/// kMaxSlicesOption and kMaxTraceOption in its options.
llvm::Expected<WindowOptions> parseWindowArgs(const ParsedArgs &args);
inline constexpr OptionSpec kWindowOption{
    'w', "window", true, "DURATION|all",
    "Write the last DURATION of the trace at most (e.g. 5ms), or all of it "
    "(default: the longest window that fits --max-slices and "
    "--max-trace)."};
inline constexpr OptionSpec kMaxSlicesOption{
    'm', "max-slices", true, "N",
    "The output's budget in slices (default 10000000, what Perfetto's UI "
    "opens; 2M = 2000000)."};
inline constexpr OptionSpec kMaxTraceOption{
    'B', "max-trace", true, "SIZE",
    "Without --window: decode at most SIZE bytes of trace, every thread's "
    "together (default 5M, about a second on 2 cores; K, M, G)."};

/// A count option's value; `what` names it in the error.
llvm::Expected<unsigned> parseCount(llvm::StringRef text, llvm::StringRef what);

/// Parses a command that takes options only: a positional argument is an
/// error.
llvm::Expected<ParsedArgs> parseOptionsOnly(const char *const *argv,
                                            llvm::ArrayRef<OptionSpec> specs,
                                            llvm::StringRef command);

/// The session, which must be recording a live process.
llvm::Expected<Session *> attachedSession(lldb::SBDebugger &debugger);

/// Prints a line now (progress during a long command).
void printNow(lldb::SBDebugger &debugger, llvm::StringRef line);

/// Adds `name` under `root`: the first paragraph of `help` is the brief
/// help, the rest the long help.
void addCommand(lldb::SBCommand &root, const char *name,
                lldb::SBCommandPluginInterface *impl, const std::string &help,
                const char *syntax);

} // namespace magic_trace::plugin

#endif
