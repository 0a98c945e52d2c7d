"""blocks.py FILE.csv[.gz] [N]: where a kernel's executed instructions go, from `ncu -i REP --page source --csv
--print-source sass` (profile.sh, bwd-profile.sh): consecutive SASS instructions with the same execution count
form a block (straight-line code run as often); the N (default 25) blocks with the most executed instructions, in
address order, each with its row range, count per instruction, length, share of the kernel and opcode mix. The
row range indexes the CSV's instruction rows, to read the block's code."""
import collections, csv, gzip, re, sys

path = sys.argv[1]
rows = list(csv.reader(gzip.open(path, 'rt') if path.endswith('.gz') else open(path)))
hdr, data = rows[1], rows[2:]
ix = {h: i for i, h in enumerate(hdr)}
blocks = []  # [first row, last row, executions, instructions]
for i, r in enumerate(data):
    n = int(r[ix['Instructions Executed']] or 0)
    src = r[ix['Source']].strip()
    if blocks and blocks[-1][2] == n:
        blocks[-1][1] = i
        blocks[-1][3].append(src)
    else:
        blocks.append([i, i, n, [src]])
total = sum(b[2] * len(b[3]) for b in blocks)
print(f"{total} warp instructions executed, {len(data)} in the code")
top = sorted(blocks, key=lambda b: -b[2] * len(b[3]))[:int(sys.argv[2]) if len(sys.argv) > 2 else 25]
for first, last, n, srcs in sorted(top):
    ops = collections.Counter(re.sub(r'^@!?U?P\w+\s+', '', s).split()[0].split('.')[0] for s in srcs if s)
    print(f"{first:5}-{last:5} n={n:9} len={len(srcs):4} share={100 * n * len(srcs) / total:5.1f}%  " +
          " ".join(f"{o}:{c}" for o, c in ops.most_common(8)))
