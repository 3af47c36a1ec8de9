//===- PluginMain.cpp - Entry point LLDB calls on `plugin load` -----------===//
#include "Commands.h"

#include "lldb/API/SBCommandInterpreter.h"
#include "lldb/API/SBDebugger.h"

namespace lldb {
#define MT_PLUGIN_EXPORT __attribute__((visibility("default")))
MT_PLUGIN_EXPORT bool PluginInitialize(lldb::SBDebugger debugger);
} // namespace lldb

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
