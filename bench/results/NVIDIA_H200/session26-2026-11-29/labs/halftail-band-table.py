# halftail-band-table.py - the table order of labs/halftail-band.patch (group_table_kernel) replayed on the
# host: every tile placed once, the short tiles (<= 64 rows) two by two at even places; 3000 random cases,
# then (tiles, short tiles, short pairs) for 128 x 264, 128 groups of ~N(256, 16) rows, 64 x 520.
import random
BM=128
def table(rows):
    G=len(rows); n=[(r+BM-1)//BM if r>0 else 0 for r in rows]
    sh=[1 if n[g]>0 and rows[g]-(n[g]-1)*BM<=BM//2 else 0 for g in range(G)]
    sfirst=[0]*(G+1)
    for g in range(G): sfirst[g+1]=sfirst[g]+sh[g]
    first=[0]*(G+1)
    for g in range(G):
        pair = sh[g] and (sfirst[g]&1)
        first[g+1]=first[g]+n[g]-sh[g]+(2 if pair else 0)
    nshort=sfirst[G]; T=first[G]+(nshort&1)
    tab=[None]*T
    for g in range(G):
        nw=n[g]-sh[g]; p0=first[g]; pair=sh[g] and (sfirst[g]&1)
        early= pair and nw>0 and ((p0+nw-1)&1)==0
        sp = p0+nw-1 if early else p0+nw
        for j in range(nw):
            at = sp+2 if (early and j==nw-1) else p0+j
            assert tab[at] is None; tab[at]=(g,j)
        if pair:
            lo,hi=0,g-1
            while lo<hi:
                mid=(lo+hi+1)//2
                if sfirst[mid]<=sfirst[g]-1: lo=mid
                else: hi=mid-1
            assert sh[lo] and sfirst[lo]==sfirst[g]-1
            assert tab[sp] is None and tab[sp+1] is None
            tab[sp]=(lo,n[lo]-1); tab[sp+1]=(g,n[g]-1)
        if sh[g] and not pair and sfirst[g]==nshort-1:
            tab[first[G]]=(g,n[g]-1)
    assert all(t is not None for t in tab), tab
    assert sorted(tab)==sorted((g,j) for g in range(G) for j in range(n[g]))
    shorts=set((g,n[g]-1) for g in range(G) if sh[g])
    paired=sum(1 for i in range(0,T-1,2) if tab[i] in shorts and tab[i+1] in shorts)
    return T, len(shorts), paired
random.seed(1)
for trial in range(3000):
    G=random.randint(1,300)
    rows=[random.choice([0,1,64,65,128,256,random.randint(0,700),256+random.randint(1,64)]) for _ in range(G)]
    table(rows)
print("ok")
for rows in ([264]*128, [int(random.gauss(256,16)) for _ in range(128)], [520]*64):
    print(table(rows))
