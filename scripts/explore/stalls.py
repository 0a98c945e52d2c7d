"""stalls.py FILE.csv[.gz]: stall reasons and instruction mix from `ncu -i REP --page source --csv --print-source sass`
(profile.sh writes one): each reason's share of the samples and the opcodes that carry it."""
import csv, gzip, sys, collections, re
rows = list(csv.reader(gzip.open(sys.argv[1], 'rt') if sys.argv[1].endswith('.gz') else open(sys.argv[1])))
hdr = rows[1]; data = rows[2:]
ix = {h: i for i, h in enumerate(hdr)}
stall_cols = [h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
tot = collections.Counter(); byop = collections.defaultdict(collections.Counter)
inst = collections.Counter(); samples = 0
for r in data:
    src = r[ix['Source']].strip()
    op = re.sub(r'^@!?U?P\w+\s+', '', src).split()[0].split('.')[0] if src else '?'
    n = int(r[ix['Instructions Executed']] or 0); inst[op] += n
    for c in stall_cols:
        v = int(r[ix[c]] or 0); tot[c] += v; byop[c][op] += v
    samples += int(r[ix['Warp Stall Sampling (All Samples)']] or 0)
T = sum(tot.values())
print("samples", samples, "instr executed", sum(inst.values()))
for c, v in tot.most_common(10):
    print(f"{c:28} {100*v/T:5.1f}%  top ops: " + ", ".join(f"{o}:{100*x/T:.1f}" for o, x in byop[c].most_common(5)))
print("instr by op:", ", ".join(f"{o}:{100*v/sum(inst.values()):.1f}" for o, v in inst.most_common(16)))
