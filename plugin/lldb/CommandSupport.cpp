//===- CommandSupport.cpp - What every magic-trace command uses -----------===//
#include "CommandSupport.h"
#include "Session.h"

#include "lldb/API/SBFile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <vector>

namespace magic_trace::plugin {

bool succeed(lldb::SBCommandReturnObject &result, llvm::StringRef text) {
  if (!text.empty())
    result.AppendMessage(text.str().c_str());
  result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
  return true;
}

std::string jsonText(const llvm::json::Value &value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << value;
  return text;
}

llvm::Expected<WindowOptions> parseWindowArgs(const ParsedArgs &args) {
  WindowOptions options;
  if (llvm::Error failed =
          parseWindowOptions(args.get("window", ""), args.get("max-slices", ""),
                             args.get("max-trace", ""), options))
    return std::move(failed);
  return options;
}

llvm::Expected<TimerResolution> parseTimer(llvm::StringRef text) {
  if (text == "low")
    return TimerResolution::Low;
  if (text == "normal")
    return TimerResolution::Normal;
  if (text == "high")
    return TimerResolution::High;
  return error("unknown timer resolution '%s' (use low, normal or high)",
               text.str().c_str());
}

llvm::Expected<unsigned> parseCount(llvm::StringRef text,
                                    llvm::StringRef what) {
  unsigned value = 0;
  if (text.getAsInteger(0, value))
    return error("bad %s '%s' (give a number)", what.str().c_str(),
                 text.str().c_str());
  return value;
}

llvm::Expected<ParsedArgs> parseOptionsOnly(const char *const *argv,
                                            llvm::ArrayRef<OptionSpec> specs,
                                            llvm::StringRef command) {
  llvm::Expected<ParsedArgs> args = parseArgs(argv, specs, command);
  if (!args || args->positional.empty())
    return args;
  return error("unexpected argument '%s' (see 'help magic-trace %s')",
               args->positional.front().c_str(), command.str().c_str());
}

llvm::Expected<Session *> attachedSession(lldb::SBDebugger &debugger) {
  Session &session = sessionFor(debugger);
  if (!session.attached)
    return error("magic-trace is not attached (run 'magic-trace attach' "
                 "first)");
  return &session;
}

void printNow(lldb::SBDebugger &debugger, llvm::StringRef line) {
  lldb::SBFile out = debugger.GetOutputFile();
  if (!out.IsValid())
    return;
  std::string text = line.str() + "\n";
  size_t written = 0;
  out.Write(reinterpret_cast<const uint8_t *>(text.data()), text.size(),
            &written);
  out.Flush();
}

void addCommand(lldb::SBCommand &root, const char *name,
                lldb::SBCommandPluginInterface *impl, const std::string &help,
                const char *syntax) {
  // `help magic-trace` lists the first paragraph; `help magic-trace NAME`
  // shows everything. LLDB keeps the pointers: the strings must outlive it.
  static std::vector<std::unique_ptr<std::string>> texts;
  texts.push_back(
      std::make_unique<std::string>(help.substr(0, help.find("\n\n"))));
  const char *brief = texts.back()->c_str();
  size_t rest = help.find("\n\n");
  texts.push_back(std::make_unique<std::string>(
      rest == std::string::npos ? "" : help.substr(rest + 2)));
  lldb::SBCommand command = root.AddCommand(name, impl, brief, syntax);
  command.SetHelpLong(texts.back()->c_str());
}

} // namespace magic_trace::plugin
