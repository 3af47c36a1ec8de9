# magic-trace run on python3 (test/lit/qemu/run-python.test): work in the
# interpreter's own C code, then one call through PyObject_Call
# (f(*args, **kwargs) is CALL_FUNCTION_EX, which calls PyObject_Call).
counts = {}
for i in range(3000):
    key = "k%d" % (i % 97)
    counts[key] = counts.get(key, 0) + i
ranked = sorted(counts.items(), key=lambda item: -item[1])


def report(first, *rest, scale=1):
    return first[1] * scale + len(rest)


print(report(*ranked, **{"scale": 2}))
