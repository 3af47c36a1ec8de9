# Real work for python3 under the QEMU recorder: JSON, dicts, strings.
import json

data = [{"k": i, "v": str(i) * 3} for i in range(20000)]
text = json.dumps(data)
print(len(json.loads(text)), sum(len(d["v"]) for d in data))
