# The corpus's python3 script (test/corpus/run.py): a little of what
# Python programs do all day, in the interpreter's own C code: parsing,
# dicts, sorting, string formatting, json, re.
import json
import re

words = re.findall(r"[a-z]+", open(__file__).read().lower())
counts = {}
for word in words * 40:
    counts[word] = counts.get(word, 0) + 1
ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
text = json.dumps({"ranked": ranked, "total": sum(counts.values())})
back = json.loads(text)
lines = ["%-12s %5d" % (word, n) for word, n in back["ranked"]]
squares = [i * i for i in range(20000) if i % 3]
print(len(lines), back["total"], sum(squares) % 1000003)
