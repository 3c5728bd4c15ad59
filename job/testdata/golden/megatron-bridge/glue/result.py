"""Write progress.jsonl and result.json from the engine's logs (autocompress job glue)."""
import glob, hashlib, json, os, re, shutil, sys

c = json.load(open("contract.json"))
o = c["outputs"]
status = int(sys.argv[1]) if len(sys.argv) > 1 else 0
steps = []
for p in glob.glob(os.path.join(o["resume"], "**", "training.jsonl"), recursive=True):
    for line in open(p):
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if "step" in d and "loss" in d:
            steps.append((int(d["step"]), float(d["loss"])))
for p in ["launch.log"] + sorted(glob.glob("slurm-*.log")):
    if c["engine"] != "megatron-bridge" or not os.path.exists(p):
        continue
    for line in open(p, errors="replace"):
        m = re.search(r"iteration\s+(\d+)/\s*\d+.*?loss: ([0-9.eE+-]+)", line)
        if m:
            steps.append((int(m.group(1)), float(m.group(2))))
steps = sorted(dict(steps).items())
n = c["recipe"]["steps"]
with open(o["progress"], "a") as f:
    for s, l in steps:
        f.write(json.dumps({"step": s, "steps": n, "loss": l}) + "\n")
out = o["checkpoint"]
cands = sorted(glob.glob(os.path.join(o["resume"], "**", "consolidated", "config.json"), recursive=True), key=os.path.getmtime)
if cands and not os.path.exists(out):
    shutil.copytree(os.path.dirname(cands[-1]), out)

def h(name):
    x = hashlib.sha256(("%s\0%d\0" % (name, os.path.getsize(name))).encode())
    x.update(open(name, "rb").read())
    return x.hexdigest()

r = {"version": 1, "kind": c["kind"], "engine": c["engine"], "world_size": c["world_size"],
     "steps": len(steps), "losses": [l for _, l in steps],
     "tokens": len(steps) * c["recipe"]["batch"] * c["recipe"]["seq_len"]}
if status == 0 and os.path.isdir(out):
    r["status"], r["checkpoint"] = "done", out
    r["sha256"] = {out + "/" + f: h(out + "/" + f) for f in sorted(os.listdir(out)) if os.path.isfile(os.path.join(out, f))}
else:
    r["status"] = "failed"
    r["error"] = "the engine exited with status %d%s" % (status, "" if os.path.isdir(out) else " and wrote no " + out + "/")
json.dump(r, open(o["result"], "w"), indent=2)
