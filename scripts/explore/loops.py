"""loops.py FILE.sass: the loops of a cuobjdump -sass listing (instructions between a backward branch
and its target) with their instruction counts and mix; the state loop is the largest inner one."""
import re,sys,collections
lines=open(sys.argv[1]).read().splitlines()
ins=[]
for l in lines:
    m=re.match(r'\s*/\*([0-9a-f]{4,})\*/\s+(.*?);',l)
    if m: ins.append((int(m.group(1),16),m.group(2).strip()))
addr={a:i for i,(a,_) in enumerate(ins)}
print("total",len(ins))
for i,(a,t) in enumerate(ins):
    # BRA 0x…, BRA `(label) 0x…, and the form with a predicate operand, BRA P1, 0x… (nvcc 11.8)
    m=re.search(r'BRA (?:`\(.*?\) )?(?:!?U?P\d, )?0x([0-9a-f]+)',t)
    if m:
        tgt=int(m.group(1),16)
        if tgt<=a:
            j=addr[tgt]; body=ins[j:i+1]
            c=collections.Counter(re.sub(r'^@!?U?P\w+\s+','',x).split()[0].split('.')[0] for _,x in body)
            print(f"loop {tgt:#x}-{a:#x}: {len(body)} instr")
            print("   ", ", ".join(f"{k}:{v}" for k,v in c.most_common()))
