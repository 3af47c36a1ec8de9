//===- DoctorCommand.cpp - `magic-trace doctor` ---------------------------===//
#include "CommandArgs.h"
#include "Commands.h"

#include "magic_trace/MachineFacts.h"

#include "llvm/Support/raw_ostream.h"

namespace magic_trace::plugin {
namespace {

const OptionSpec doctorOptions[] = {
    {'j', "json", false, nullptr, "Print the facts as one JSON object."},
};

class DoctorCommand : public lldb::SBCommandPluginInterface {
public:
  bool DoExecute(lldb::SBDebugger debugger, char **command,
                 lldb::SBCommandReturnObject &result) override {
    llvm::Expected<ParsedArgs> args =
        parseArgs(command, doctorOptions, "doctor");
    if (!args)
      return failCommand(result, args.takeError());
    if (!args->positional.empty())
      return failCommand(
          result, llvm::createStringError(
                      "unexpected argument '%s' (doctor takes only --json)",
                      args->positional.front().c_str()));
    MachineFacts facts = probeMachine();
    if (args->has("json")) {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << renderFactsJson(facts) << "\n";
      result.AppendMessage(text.c_str());
    } else {
      result.Printf("%s", renderFactsText(facts).c_str());
    }
    result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
    return true;
  }
};

} // namespace

void registerDoctorCommand(lldb::SBCommand &root) {
  static const std::string help =
      "Print what this machine offers for tracing: CPU, the intel_pt PMU and "
      "its capabilities, perf and ptrace permissions, library versions, and "
      "which backends work here.\n\nExample:\n  (lldb) magic-trace doctor\n" +
      describeOptions(doctorOptions);
  root.AddCommand("doctor", new DoctorCommand(), help.c_str(),
                  "magic-trace doctor [--json]");
}

} // namespace magic_trace::plugin
