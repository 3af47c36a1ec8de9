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

llvm::Expected<uint64_t> parseSize(llvm::StringRef text) {
  llvm::StringRef digits = text.take_while(llvm::isDigit);
  uint64_t value = 0;
  if (digits.empty() || digits.getAsInteger(10, value))
    return error("bad size '%s' (use bytes or K, M, G: e.g. 4M)",
                 text.str().c_str());
  uint64_t scale = 1;
  std::string lower = text.drop_front(digits.size()).lower();
  llvm::StringRef u(lower);
  u.consume_back("ib");
  u.consume_back("b");
  if (u == "k")
    scale = 1 << 10;
  else if (u == "m")
    scale = 1 << 20;
  else if (u == "g")
    scale = 1 << 30;
  else if (!u.empty())
    return error("bad size unit in '%s' (use K, M or G: e.g. 4M)",
                 text.str().c_str());
  uint64_t bytes = value * scale;
  if (bytes < 4096 || (bytes & (bytes - 1)))
    return error("snapshot size %s is not a power of two of at least 4K "
                 "(e.g. 64K, 4M)",
                 text.str().c_str());
  return bytes;
}

llvm::Expected<WindowOptions> parseWindowArgs(const ParsedArgs &args) {
  WindowOptions options;
  if (llvm::Error failed = parseWindowOptions(
          args.get("window", ""), args.get("max-slices", ""), options))
    return std::move(failed);
  return options;
}

llvm::Expected<uint64_t> parseMemorySize(llvm::StringRef text) {
  llvm::StringRef digits = text.take_while(llvm::isDigit);
  uint64_t value = 0;
  if (digits.empty() || digits.getAsInteger(10, value) || value == 0)
    return error("bad --keep-memory '%s' (give bytes or K, M, G: e.g. 512M)",
                 text.str().c_str());
  std::string lower = text.drop_front(digits.size()).lower();
  llvm::StringRef unit(lower);
  unit.consume_back("ib");
  unit.consume_back("b");
  unsigned shift = unit == "k" ? 10 : unit == "m" ? 20 : unit == "g" ? 30 : 0;
  if ((shift == 0 && !unit.empty()) || value > (UINT64_MAX >> shift))
    return error("bad --keep-memory '%s' (give bytes or K, M, G: e.g. 512M)",
                 text.str().c_str());
  return value << shift;
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
