"""Starts a program under QEMU with the recorder's GDB relay (relay=,
stub=), in a directory of /tmp others may enter (the build tree's may be
closed to them) and a relay socket others may write (so that only the
relay's own check stands), and speaks GDB's
protocol to it: first as another user (nobody, through AS_NOBODY), whose
connection the relay must close unanswered, then as this user, whose
"?" must reach QEMU's gdbstub and come back as QEMU's stop reply. Then
"k" ends QEMU. Prints one line per step (gdb/relay.test).

  relay_peer.py RECORDER AS_NOBODY... -- PROGRAM ARGS...
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ASK = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
try:
    s.connect(sys.argv[1])
except OSError as error:
    print("refused: %s" % error.strerror)
    sys.exit(0)
data = b""
try:
    s.sendall(b"+$?#3f")
    while b"#" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
except socket.timeout:
    print("no answer in 5 s")
    sys.exit(0)
except OSError:
    pass
print("answered" if data else "closed")
"""


def wait_for(path, deadline=10.0):
    end = time.monotonic() + deadline
    while not os.path.exists(path):
        if time.monotonic() > end:
            sys.exit("%s did not appear within %g s" % (path, deadline))
        time.sleep(0.02)


def main():
    recorder = sys.argv[1]
    split = sys.argv.index("--")
    as_nobody, program = sys.argv[2:split], sys.argv[split + 1:]
    work = tempfile.mkdtemp(prefix="magic-trace-relay-test-", dir="/tmp")
    os.chmod(work, 0o755)
    relay = os.path.join(work, "relay.sock")
    stub = os.path.join(work, "stub.sock")
    rings = os.path.join(work, "rings")
    qemu = subprocess.Popen(
        ["qemu-x86_64", "-plugin", "%s,dir=%s,relay=%s,stub=%s" %
         (recorder, rings, relay, stub), "-g", stub] + program,
        stdin=subprocess.DEVNULL)
    try:
        wait_for(relay)
        os.chmod(relay, 0o777)
        other = subprocess.run(as_nobody + [sys.executable, "-c", ASK, relay],
                               capture_output=True, text=True, timeout=30)
        print("other user:", (other.stdout or other.stderr).strip())
        mine = socket.socket(socket.AF_UNIX)
        mine.settimeout(10)
        mine.connect(relay)
        mine.sendall(b"$?#3f")
        data = b""
        # The reply packet: "$...#" and its two checksum digits.
        while b"#" not in data or len(data) < data.index(b"#") + 3:
            chunk = mine.recv(4096)
            if not chunk:
                break
            data += chunk
        print("this user:", data.decode(errors="replace").lstrip("+"))
        # Kill, then go as GDB does: QEMU's last packet (W00) waits for an
        # acknowledgement or the connection's end.
        mine.sendall(b"+$k#6b")
        mine.close()
        print("qemu exit:", qemu.wait(timeout=30))
    finally:
        if qemu.poll() is None:
            qemu.kill()
            qemu.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
