//===- PluginMain.cpp - Entry point LLDB calls on `plugin load` -----------===//
#include "Commands.h"

#include "lldb/API/SBCommandInterpreter.h"
#include "lldb/API/SBDebugger.h"

namespace lldb {
#define MT_PLUGIN_EXPORT __attribute__((visibility("default")))
MT_PLUGIN_EXPORT bool PluginInitialize(lldb::SBDebugger debugger);
} // namespace lldb

namespace magic_trace::plugin {
namespace {

/// A plain user command of the multiword command's name. IDE consoles ask
/// LLDB whether a line's first word is a command before running it as one:
/// lldb-dap's default ("auto") console mode checks CommandExists,
/// UserCommandExists and AliasExists, and a multiword plugin command is
/// none of them (it lives in LLDB's table of user containers), so
/// "magic-trace status" was evaluated as a C++ expression. This entry makes
/// UserCommandExists true. LLDB looks user containers up after plain user
/// commands, so "magic-trace ..." still runs the multiword command
/// (test/lit/plugin/lldb-dap.test fails if that ever changes).
class ConsoleEntry : public lldb::SBCommandPluginInterface {
public:
  bool DoExecute(lldb::SBDebugger, char **,
                 lldb::SBCommandReturnObject &result) override {
    return failCommand(result,
                       llvm::createStringError(
                           "this LLDB runs magic-trace's console entry instead "
                           "of its commands (see 'help magic-trace')"));
  }
};

} // namespace
} // namespace magic_trace::plugin

bool lldb::PluginInitialize(lldb::SBDebugger debugger) {
  lldb::SBCommandInterpreter interpreter = debugger.GetCommandInterpreter();
  lldb::SBCommand root = interpreter.AddMultiwordCommand(
      "magic-trace", "Record Intel Processor Trace of the debugged process and "
                     "see every call that ran before a breakpoint.");
  if (!root.IsValid())
    return false;
  magic_trace::plugin::registerDoctorCommand(root);
  magic_trace::plugin::registerRecordingCommands(root);
  magic_trace::plugin::registerSnapshotCommands(root);
  magic_trace::plugin::registerViewCommands(root);
  interpreter.AddCommand(
      "magic-trace", new magic_trace::plugin::ConsoleEntry(),
      "The magic-trace commands below (this entry lets IDE consoles such as "
      "lldb-dap's see 'magic-trace' as a command).");
  return true;
}

namespace magic_trace::plugin {

bool failCommand(lldb::SBCommandReturnObject &result, llvm::Error error) {
  std::string message = llvm::toString(std::move(error));
  result.SetError(message.c_str());
  result.SetStatus(lldb::eReturnStatusFailed);
  return false;
}

} // namespace magic_trace::plugin
