#!/usr/bin/env python3
"""Per-stage table of one scripts/realsize/run.sh parent directory D.

Reads D/run.json (autocompress run --json: each stage's run_seconds,
cpu_seconds and peak_rss_bytes, from its manifest), D/init.time and
D/run.time (/usr/bin/time -v) and D/run/*-measure/invocations.json (the
bench-serve child server's own peak RSS). Prints a Markdown table."""
import glob, json, os, sys

d = sys.argv[1]
GiB = 1 << 30


def timev(path):
    out = {}
    for line in open(path):
        k, _, v = line.strip().rpartition(": ")
        out[k] = v
    h, m, s = (["0"] + out["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":"))[-3:]
    wall = int(h) * 3600 + int(m) * 60 + float(s)
    cpu = float(out["User time (seconds)"]) + float(out["System time (seconds)"])
    return wall, cpu, int(out["Maximum resident set size (kbytes)"]) * 1024


def fmt_s(s):
    return f"{s:.1f} s" if s < 120 else f"{int(s // 60)} min {s % 60:04.1f} s"


rows = []
w, c, r = timev(os.path.join(d, "init.time"))
rows.append(("init (random bf16 weights)", w, c, r, "/usr/bin/time -v"))
res = json.load(open(os.path.join(d, "run.json")))["result"]
for s in res["stages"]:
    note = "manifest"
    if s.get("reused"):
        note += " (reused)"
    rss = s.get("peak_rss_bytes", 0)
    if s["name"] == "measure":
        for p in glob.glob(os.path.join(d, "run", "*-measure", "invocations.json")):
            inv = json.load(open(p))
            peaks = [rep.get("peak_rss_bytes", 0) for rep in inv.get("reports", [])]
            if peaks:
                note += f"; bench-serve child server peak {max(peaks) / GiB:.2f} GiB"
    rows.append((s["name"], s["run_seconds"], s.get("cpu_seconds", 0), rss, note))
# time -v's maximum RSS is no peak of the whole run: each stage resets the
# run process's high-water mark (clear_refs), and the kernel reports the
# mark at exit; the run's peak is its largest stage's.
w, c, _ = timev(os.path.join(d, "run.time"))
r = max(row[3] for row in rows[1:])
rows.append(("run, all stages", w, c, r, "wall and CPU: /usr/bin/time -v; peak: the largest stage's"))

print("| stage | wall | CPU | peak RSS | source |")
print("|---|---|---|---|---|")
for name, w, c, r, note in rows:
    print(f"| {name} | {fmt_s(w)} | {fmt_s(c)} | {r / GiB:.2f} GiB | {note} |")
