#!/usr/bin/env python3
"""Rebuilds the real-CPU corpora the tests read from ../shared (realpt,
realpt-perf, realpt-arcus) from the public repositories their READMEs name,
at the commits they name.

  scripts/rebuild-corpora.py [--out DIR] [--repos DIR] [--check DIR]
                             [--repo NAME=PATH ...] [--arcus-all] [CORPUS ...]

CORPUS: realpt, realpt-perf, realpt-arcus (default: all three), written to
DIR/CORPUS (default: ../shared beside the checkout, as CI lays it out).
The repositories are git clones under --repos (default: a cache directory),
cloned from github.com when missing (the only step that needs the network);
--repo NAME=PATH uses an existing clone or bare repository instead (NAME:
libxdc_experiments, ARCUS, hase, perf_data_converter). Files are read from
the named commits with `git show`, so a clone at any branch works.

What each bundle is made of (the READMEs say the same):
- realpt: nyx-fuzz/libxdc_experiments test_data (kAFL recordings). 1.trace is
  the raw PT file; image.elf a synthetic ELF of the recorded page dump (the
  .addr file lists the pages, the .dump file holds them, in that order; an
  address that is not page-aligned is left out): its
  first page holds the ELF and program headers, mapped read-only just below
  the lowest page, then one R+X PT_LOAD per run of contiguous pages.
- realpt-arcus: carter-yagemann/ARCUS tools/angr/test/test-data (Griffin
  traces). 1.trace is the trace's PT buffers joined in sequence order;
  image.elf the same synthetic ELF of the executable pages it captured;
  pages.txt lists them.
- realpt-perf: perf.data files and the binaries they name, as perf recorded
  them (hase-project/hase, google/perf_data_converter), binaries under
  symfs/ at the paths the recordings name.

--check DIR compares every file written with DIR/CORPUS/... and prints
"same" or "DIFFERS" per file (exit status 1 if any differs).
"""
import argparse
import gzip
import io
import json
import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

REPOS = {
    "libxdc_experiments": "https://github.com/nyx-fuzz/libxdc_experiments",
    "ARCUS": "https://github.com/carter-yagemann/ARCUS",
    "hase": "https://github.com/hase-project/hase",
    "perf_data_converter": "https://github.com/google/perf_data_converter",
}

KAFL_CPU = {"vendor": "GenuineIntel", "family": 6, "model": 158, "stepping": 9}
REALPT = [
    # bundle, commit, trace, page addresses, page dump, cpu
    ("Unzip", "7352598", "test_data/Unzip/trace", "test_data/Unzip/data.addr",
     "test_data/Unzip/data.dump", KAFL_CPU),
    ("mruby", "7352598", "test_data/mruby/trace", "test_data/mruby/data.addr",
     "test_data/mruby/data.dump", KAFL_CPU),
    ("avscript_32", "7352598", "test_data/avscript_32/failed_trace_12709_1",
     "test_data/avscript_32/page_cache.addr",
     "test_data/avscript_32/page_cache.dump", KAFL_CPU),
    ("dyn_test", "7352598", "test_data/dyn_test/sample_raw_0",
     "test_data/dyn_test/page_cache.addr", "test_data/dyn_test/page_cache.dump",
     KAFL_CPU),
    ("icelake", "7352598", "test_data/icelake_tip/ptlog",
     "test_data/icelake_tip/pagecache.addr",
     "test_data/icelake_tip/pagecache.dump",
     {"vendor": "GenuineIntel", "family": 6, "model": 126, "stepping": 5}),
]

ARCUS_COMMIT = "a7ff78cd"
ARCUS_CPU = {"vendor": "GenuineIntel", "family": 6, "model": 94, "stepping": 3}
ARCUS = [
    ("hello", "tools/angr/test/test-data/griffin/hello.griffin"),
    ("ovf-01-poc", "tools/angr/test/test-data/traces/ovf-01-poc/trace.griffin.gz"),
    ("cve-2005-0105-poc",
     "tools/angr/test/test-data/traces/cve-2005-0105-poc/trace.griffin.gz"),
    ("uaf-01-poc", "tools/angr/test/test-data/traces/uaf-01-poc/trace.griffin.gz"),
]

PERF = [
    # folder/file, repository, commit, path, member of a .tar.gz or None
    ("loopy/perf.data", "hase", "bbbe91b59965d813ecd958d4d630cd7213f2cc63",
     "tests/bin/loopy/loopy-20180404T162955.perf", None),
    ("loopy/symfs/home/joerg/git/angr/hase/tests/bin/loopy/loopy", "hase",
     "bbbe91b59965d813ecd958d4d630cd7213f2cc63", "tests/bin/loopy/loopy", None),
    ("loopy-snapshot/perf.data", "hase", "b805aee3",
     "tests/bin/loopy/loopy-20180514T145114.tar.gz", "perf.data.1"),
    ("loopy-snapshot/symfs/home/joerg/git/hase/tests/bin/loopy/loopy", "hase",
     "b805aee3", "tests/bin/loopy/loopy-20180514T145114.tar.gz",
     "binaries/home/joerg/git/hase/tests/bin/loopy/loopy"),
    ("chromeos-4.14/perf.data", "perf_data_converter", "e2c2da74",
     "src/quipper/testdata/perf.data.intel_pt-4.14", None),
    ("chromeos-4.14/perf.data.piped", "perf_data_converter", "e2c2da74",
     "src/quipper/testdata/perf.data.piped.intel_pt-4.14", None),
]

PAGE = 4096


class Repos:
    def __init__(self, cache, given):
        self.cache = cache
        self.given = given

    def path(self, name):
        if name in self.given:
            return self.given[name]
        path = os.path.join(self.cache, name)
        if not os.path.exists(path):
            os.makedirs(self.cache, exist_ok=True)
            print("cloning %s into %s" % (REPOS[name], path), flush=True)
            subprocess.run(["git", "clone", "--quiet", REPOS[name], path],
                           check=True)
        return path

    def show(self, name, commit, path):
        result = subprocess.run(
            ["git", "-C", self.path(name), "show", "%s:%s" % (commit, path)],
            capture_output=True)
        if result.returncode != 0:
            sys.exit("error: %s has no %s at %s (%s)" % (
                name, path, commit, result.stderr.decode().strip()))
        return result.stdout


def synthetic_elf(pages):
    """An ELF64 x86-64 executable of `pages` (address -> 4096 bytes): the
    header page at (lowest page - 4096), read-only, then one R+X PT_LOAD per
    run of contiguous pages, the pages in address order after the header
    page. Returns (bytes, header page address, runs)."""
    addresses = sorted(pages)
    runs = []
    for address in addresses:
        if runs and runs[-1][0] + runs[-1][1] * PAGE == address:
            runs[-1][1] += 1
        else:
            runs.append([address, 1])
    header_page = addresses[0] - PAGE
    phnum = 1 + len(runs)
    if 64 + 56 * phnum > PAGE:
        sys.exit("error: %d page runs do not fit in one header page" % len(runs))
    out = bytearray()
    out += b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    out += struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, 0, 64, 0, 0, 64, 56, phnum,
                       64, 0, 0)
    PF_R, PF_X, PT_LOAD = 4, 1, 1
    out += struct.pack("<IIQQQQQQ", PT_LOAD, PF_R, 0, header_page, header_page,
                       PAGE, PAGE, PAGE)
    offset = PAGE
    for address, count in runs:
        out += struct.pack("<IIQQQQQQ", PT_LOAD, PF_R | PF_X, offset, address,
                           address, count * PAGE, count * PAGE, PAGE)
        offset += count * PAGE
    out += bytes(PAGE - len(out))
    for address in addresses:
        out += pages[address]
    return bytes(out), header_page, runs


def trace_json(cpu, load_address):
    return json.dumps({
        "type": "intel-pt",
        "cpuInfo": cpu,
        "processes": [{
            "pid": 1,
            "triple": "x86_64-unknown-linux-gnu",
            "threads": [{"tid": 1, "iptTrace": "1.trace"}],
            "modules": [{"file": "image.elf", "systemPath": "image.elf",
                         "loadAddress": load_address}],
        }],
    }, indent=2) + "\n"


def griffin_items(data):
    """(kind, fields) of a Griffin trace (ARCUS's tools/angr/griffin.py
    describes the layout): magic 0x51C0FFEE, version 1, then items with a
    {kind u32, size u32} header."""
    magic, version = struct.unpack_from("<II", data, 0)
    if magic != 0x51C0FFEE or version != 1:
        sys.exit("error: not a Griffin version 1 trace")
    at = 8
    while at + 8 <= len(data):
        kind, size = struct.unpack_from("<II", data, at)
        body = at + 8
        if kind == 0:  # buffer: tgid, pid, sequence, size, bytes
            tgid, pid, sequence, length = struct.unpack_from("<QQQQ", data, body)
            start = body + 32
            yield "buffer", (sequence, data[start:start + length])
            at = start + length
        elif kind == 4:  # xpage: tgid, base, size, bytes
            tgid, base, length = struct.unpack_from("<QQQ", data, body)
            start = body + 24
            yield "xpage", (base, data[start:start + length])
            at = start + length
        elif kind in (1, 2, 3, 5, 6):  # process, thread, image, unmap, fork
            if size < 8:
                sys.exit("error: Griffin item of kind %d with size %d" % (kind, size))
            at += size
        else:
            sys.exit("error: unknown Griffin item kind %d at %d" % (kind, at))


def write(path, data, written):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    mode = "w" if isinstance(data, str) else "wb"
    with open(path, mode) as f:
        f.write(data)
    written.append(path)


def rebuild_realpt(repos, out, written):
    for bundle, commit, trace, addr, dump, cpu in REALPT:
        raw = repos.show("libxdc_experiments", commit, trace)
        addresses = repos.show("libxdc_experiments", commit, addr)
        memory = repos.show("libxdc_experiments", commit, dump)
        count = len(addresses) // 8
        if len(memory) != count * PAGE:
            sys.exit("error: %s: %d page addresses but %d dump bytes"
                     % (bundle, count, len(memory)))
        pages = {}
        for i in range(count):
            (address,) = struct.unpack_from("<Q", addresses, 8 * i)
            # dyn_test's list holds one address that is not a page's
            # (0x7ffff7fcffff): not a page of code; left out.
            if address % PAGE == 0:
                pages.setdefault(address, memory[i * PAGE:(i + 1) * PAGE])
        image, header_page, _ = synthetic_elf(pages)
        folder = os.path.join(out, "realpt", bundle)
        write(os.path.join(folder, "1.trace"), raw, written)
        write(os.path.join(folder, "image.elf"), image, written)
        write(os.path.join(folder, "trace.json"), trace_json(cpu, header_page),
              written)


def arcus_traces(repos, every):
    """The shared four, or with --arcus-all every Griffin trace ARCUS holds
    (traces/NAME/trace.griffin.gz)."""
    if not every:
        return ARCUS
    listing = subprocess.run(
        ["git", "-C", repos.path("ARCUS"), "ls-tree", "-r", "--name-only",
         ARCUS_COMMIT, "tools/angr/test/test-data/traces"],
        capture_output=True, text=True, check=True).stdout.split()
    found = [(path.split("/")[-2], path) for path in listing
             if path.endswith("/trace.griffin.gz")]
    return ARCUS[:1] + sorted(found)


def rebuild_arcus(repos, out, written, every=False):
    for bundle, path in arcus_traces(repos, every):
        data = repos.show("ARCUS", ARCUS_COMMIT, path)
        if path.endswith(".gz"):
            data = gzip.decompress(data)
        buffers, pages = [], {}
        for kind, fields in griffin_items(data):
            if kind == "buffer":
                buffers.append(fields)
            else:
                base, payload = fields
                for offset in range(0, len(payload) - PAGE + 1, PAGE):
                    pages.setdefault(base + offset,
                                     payload[offset:offset + PAGE])
        buffers.sort(key=lambda item: item[0])
        image, header_page, runs = synthetic_elf(pages)
        listing = "header page 0x%x\n" % header_page + "".join(
            "0x%x-0x%x (%d pages)\n" % (a, a + n * PAGE, n) for a, n in runs)
        folder = os.path.join(out, "realpt-arcus", bundle)
        write(os.path.join(folder, "1.trace"),
              b"".join(payload for _, payload in buffers), written)
        write(os.path.join(folder, "image.elf"), image, written)
        write(os.path.join(folder, "pages.txt"), listing, written)
        write(os.path.join(folder, "trace.json"),
              trace_json(ARCUS_CPU, header_page), written)


def rebuild_perf(repos, out, written):
    import tarfile
    for target, repo, commit, path, member in PERF:
        data = repos.show(repo, commit, path)
        if member:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
                data = tar.extractfile(member).read()
        write(os.path.join(out, "realpt-perf", target), data, written)
        if target.endswith("/loopy") or "/symfs/" in target:
            os.chmod(os.path.join(out, "realpt-perf", target), 0o755)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpora", nargs="*",
                        default=["realpt", "realpt-perf", "realpt-arcus"])
    parser.add_argument("--out", default=os.path.join(ROOT, "..", "shared"))
    parser.add_argument("--repos", default=os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
        "magic-trace-corpora"))
    parser.add_argument("--repo", action="append", default=[],
                        metavar="NAME=PATH")
    parser.add_argument("--check", metavar="DIR")
    parser.add_argument("--arcus-all", action="store_true",
                        help="every ARCUS Griffin trace, not only the four "
                        "../shared holds")
    args = parser.parse_args()
    given = {}
    for item in args.repo:
        name, _, path = item.partition("=")
        if name not in REPOS or not path:
            sys.exit("error: --repo takes NAME=PATH with NAME one of %s"
                     % ", ".join(REPOS))
        given[name] = path
    repos = Repos(args.repos, given)
    builders = {"realpt": rebuild_realpt, "realpt-perf": rebuild_perf,
                "realpt-arcus": rebuild_arcus}
    written = []
    for corpus in args.corpora:
        if corpus not in builders:
            sys.exit("error: unknown corpus '%s' (realpt, realpt-perf, "
                     "realpt-arcus)" % corpus)
        if corpus == "realpt-arcus":
            rebuild_arcus(repos, args.out, written, args.arcus_all)
        else:
            builders[corpus](repos, args.out, written)
    differs = 0
    for path in written:
        relative = os.path.relpath(path, args.out)
        if not args.check:
            print("wrote " + relative)
            continue
        other = os.path.join(args.check, relative)
        same = os.path.exists(other) and open(other, "rb").read() == \
            open(path, "rb").read()
        differs += not same
        print("%s %s" % ("same" if same else "DIFFERS", relative))
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
