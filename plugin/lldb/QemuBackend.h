//===- QemuBackend.h - Recording under QEMU from LLDB -----------*- C++ -*-===//
//
// The qemu backend: the process runs under qemu-x86_64 with magic-trace's
// TCG plugin (plugin/qemu/), launched through LLDB's qemu-user platform by
// `magic-trace run`. The plugin records every thread into shared-memory
// rings while the process runs, so a plain continue records; a snapshot
// asks the plugin to end each stopped thread's trace at its stop (the stop
// flush, QemuRings.h) and copies the rings. docs/qemu.md, "From LLDB".
//
// Also the trigger callbacks of backends that record while the process
// runs (qemu, perf): a snapshot-on breakpoint takes its snapshot when it is
// hit, whichever command resumed the process.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PLUGIN_QEMUBACKEND_H
#define MAGIC_TRACE_PLUGIN_QEMUBACKEND_H

#include "Session.h"

#include "lldb/API/SBBreakpoint.h"

#include <string>
#include <utility>
#include <vector>

namespace magic_trace::plugin {

/// The plugin's options when `process` runs under magic-trace's QEMU
/// recorder (found from the command line of any of its threads); false
/// for a native process.
bool qemuOptionsFor(lldb::SBProcess &process,
                    std::vector<std::pair<std::string, std::string>> &options);

/// Instructions the QEMU recorder has recorded so far (every thread).
uint64_t qemuInstructions(const Session &session);

/// Snapshot-on --continue under QEMU: arms a trigger inside the recorder at
/// the entry of each of `breakpoint`'s functions (docs/qemu.md, "Triggers in
/// the recorder") and deletes the breakpoint, so that no debugger
/// breakpoint slows QEMU or stops the process. Returns the entry addresses.
llvm::Expected<std::vector<uint64_t>>
armRecorderTrigger(lldb::SBTarget &target, Session &session,
                   lldb::SBBreakpoint &breakpoint, unsigned count);

/// Starts decoding the recorder's own snapshots as they come (a worker of
/// the session: RecorderSnapshots.h), keeping `keep` decoded snapshots in
/// memory; a trigger hit waits up to `waitMs` for room.
void startRecorderSnapshots(lldb::SBTarget &target, Session &session,
                            unsigned keep, unsigned waitMs);

/// The lines of the recorder's snapshots decoded since the last call (those
/// waiting now decoded first, with the modules LLDB lists now, or last
/// listed; with `json`, each followed by its JSON line).
std::vector<std::string> collectRecorderSnapshots(lldb::SBDebugger &debugger,
                                                  Session &session,
                                                  bool json = false);

/// Makes `breakpoint`'s hits take the trigger's snapshot as they happen
/// (backends that record while the process runs).
void armTrigger(lldb::SBDebugger &debugger, lldb::SBBreakpoint &breakpoint);

/// `magic-trace run` (registered with the recording commands).
void registerRunCommand(lldb::SBCommand &root);

} // namespace magic_trace::plugin

#endif
