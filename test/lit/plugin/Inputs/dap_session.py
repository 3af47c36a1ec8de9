"""Drives lldb-dap (VS Code's LLDB adapter) over the Debug Adapter Protocol
on its stdin/stdout, as an IDE does: initialize, launch with
launchCommands, configurationDone, then wait for `stopped` events, continue,
and evaluate console lines in the "repl" context (lldb-dap's default "auto"
mode decides whether a line is a command or an expression). Prints the
events and answers the test looks at, one line each.

Usage: dap_session.py LLDB_DAP LAUNCH_JSON STEP...
  STEP is one of: wait-stopped | continue | evaluate:TEXT
Every wait has a deadline (60 s); a missing answer fails the script."""
import json
import subprocess
import sys
import threading
import time
import queue

DEADLINE = 60


class Dap:
    def __init__(self, program):
        self.process = subprocess.Popen([program], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL)
        self.seq = 0
        self.messages = queue.Queue()
        threading.Thread(target=self.reader, daemon=True).start()

    def reader(self):
        stream = self.process.stdout
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    self.messages.put(None)
                    return
                line = line.strip()
                if not line:
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            self.messages.put(json.loads(stream.read(length)))

    def send(self, command, arguments=None):
        self.seq += 1
        body = {"seq": self.seq, "type": "request", "command": command}
        if arguments is not None:
            body["arguments"] = arguments
        data = json.dumps(body).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data))
        self.process.stdin.write(data)
        self.process.stdin.flush()
        return self.seq

    def wait(self, predicate, what):
        end = time.time() + DEADLINE
        while True:
            left = end - time.time()
            if left <= 0:
                sys.exit("dap: no %s within %d s" % (what, DEADLINE))
            try:
                message = self.messages.get(timeout=left)
            except queue.Empty:
                continue
            if message is None:
                sys.exit("dap: lldb-dap ended while waiting for " + what)
            if message.get("type") == "event":
                self.show_event(message)
            if predicate(message):
                return message

    def show_event(self, message):
        event = message.get("event")
        body = message.get("body", {})
        if event == "output":
            for line in body.get("output", "").splitlines():
                if line.strip():
                    print("output: " + line)
        elif event == "stopped":
            print("event stopped: reason=%s" % body.get("reason"))
        elif event in ("exited", "terminated"):
            print("event " + event)

    def request(self, command, arguments=None):
        seq = self.send(command, arguments)
        response = self.wait(lambda m: m.get("type") == "response" and
                             m.get("request_seq") == seq,
                             "answer to " + command)
        if not response.get("success"):
            print("%s failed: %s" % (command, response.get("message")))
        return response


def main():
    dap = Dap(sys.argv[1])
    launch = json.loads(sys.argv[2])
    dap.request("initialize", {"adapterID": "lldb-dap", "clientID": "lit",
                               "linesStartAt1": True,
                               "columnsStartAt1": True})
    seq = dap.send("launch", launch)
    dap.wait(lambda m: m.get("event") == "initialized", "initialized event")
    dap.request("configurationDone")
    dap.wait(lambda m: m.get("type") == "response" and
             m.get("request_seq") == seq, "answer to launch")
    thread_id = None
    for step in sys.argv[3:]:
        if step == "wait-stopped":
            stopped = dap.wait(lambda m: m.get("event") == "stopped",
                               "stopped event")
            thread_id = stopped["body"].get("threadId", thread_id)
        elif step == "continue":
            dap.request("continue", {"threadId": thread_id or 0})
        elif step.startswith("evaluate:"):
            text = step[len("evaluate:"):]
            response = dap.request("evaluate", {"expression": text,
                                                "context": "repl"})
            print("evaluate %s:" % text)
            for line in response.get("body", {}).get("result", "").splitlines():
                print("  " + line)
        else:
            sys.exit("dap: unknown step " + step)
    dap.send("disconnect", {"terminateDebuggee": True})
    try:
        dap.process.wait(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        dap.process.kill()


main()
