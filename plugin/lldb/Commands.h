//===- Commands.h - The magic-trace command tree ----------------*- C++ -*-===//
#ifndef MAGIC_TRACE_PLUGIN_COMMANDS_H
#define MAGIC_TRACE_PLUGIN_COMMANDS_H

#include "lldb/API/SBCommandInterpreter.h"
#include "lldb/API/SBCommandReturnObject.h"
#include "lldb/API/SBDebugger.h"

#include "llvm/Support/Error.h"

namespace magic_trace::plugin {

/// Adds each subcommand to the `magic-trace` multiword command.
void registerDoctorCommand(lldb::SBCommand &root);
/// attach, status, detach, continue (RecordingCommands.cpp).
void registerRecordingCommands(lldb::SBCommand &root);
/// magic-trace attach (AttachCommand.cpp), registered by
/// registerRecordingCommands.
void registerAttachCommand(lldb::SBCommand &root);
/// snapshot, snapshot-on (SnapshotCommands.cpp).
void registerSnapshotCommands(lldb::SBCommand &root);
/// save, report, diff (ViewCommands.cpp).
void registerViewCommands(lldb::SBCommand &root);

/// Reports `error` on `result` as LLDB's commands do: "error: <message>" and
/// eReturnStatusFailed. Returns false, the value DoExecute must return.
bool failCommand(lldb::SBCommandReturnObject &result, llvm::Error error);

} // namespace magic_trace::plugin

#endif
