//===- FloorPlugin.cpp - The cost of watching every executed block --------===//
//
// libmagic-trace-qemu-floor.so, a QEMU TCG plugin for scripts/bench-qemu.sh:
// one empty callback per executed block, registered as the recorder
// registers its own. It records nothing; its run time over plain QEMU's is
// what any plugin that sees every executed block pays in QEMU 7.2 (the
// helper call TCG emits per block), so the recorder's own work is its time
// minus this one.
//
//===----------------------------------------------------------------------===//
#include "QemuPluginApi.h"

extern "C" {

__attribute__((visibility("default"))) int qemu_plugin_version =
    MT_QEMU_PLUGIN_VERSION;

static void blockExecuted(unsigned int, void *) {}

static void blockTranslated(qemu_plugin_id_t, struct qemu_plugin_tb *tb) {
  qemu_plugin_register_vcpu_tb_exec_cb(tb, blockExecuted,
                                       QEMU_PLUGIN_CB_NO_REGS, nullptr);
}

__attribute__((visibility("default"))) int
qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *, int, char **) {
  qemu_plugin_register_vcpu_tb_trans_cb(id, blockTranslated);
  return 0;
}

} // extern "C"
